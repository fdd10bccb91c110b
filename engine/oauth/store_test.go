package oauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestStorePermissions(t *testing.T) {
	state := t.TempDir()
	// A directory left wider by someone else is narrowed on the first write.
	if err := os.MkdirAll(filepath.Join(state, ".bridge", "oauth"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := NewStore(state, testKey)
	if err := s.Save(&Record{Server: "gh", Resource: "https://x/mcp", AccessToken: "secret-a"}); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(s.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := st.Mode().Perm(), os.FileMode(0o700); got != want {
		t.Errorf("dir mode = %v, want %v", got, want)
	}
	ents, _ := os.ReadDir(s.Dir())
	n := 0
	for _, e := range ents {
		if e.Name() == ".lock" {
			continue
		}
		n++
		info, _ := e.Info()
		if got, want := info.Mode().Perm(), os.FileMode(0o600); got != want {
			t.Errorf("%s mode = %v, want %v", e.Name(), got, want)
		}
	}
	if n != 1 {
		t.Errorf("files = %d, want 1 (no temp file left behind)", n)
	}
	rec, err := s.Load("gh", "https://x/mcp")
	if err != nil || rec == nil || rec.AccessToken != "secret-a" {
		t.Fatalf("Load = %v, %v", rec, err)
	}
	if got := fmt.Sprint(*rec) + fmt.Sprintf("%v %+v %#v %#v", rec, rec, rec, *rec); strings.Contains(got, "secret-a") {
		t.Errorf("String shows the token: %s", got)
	}
}

func TestStoreCorruptFile(t *testing.T) {
	s := NewStore(t.TempDir(), testKey)
	if err := s.Save(&Record{Server: "gh", Resource: "https://x/mcp", AccessToken: "a"}); err != nil {
		t.Fatal(err)
	}
	p := s.path("gh", "https://x/mcp")
	if err := os.WriteFile(p, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load("gh", "https://x/mcp"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Load of a corrupt file: err = %v, want ErrCorrupt", err)
	}
	rec, err := s.Current(context.Background(), http.DefaultClient, "gh", "https://x/mcp", time.Now)
	if err != nil || rec != nil {
		t.Errorf("Current of a corrupt file = %v, %v; want signed out (nil, nil)", rec, err)
	}
	// A file that names another server (copied or renamed) does not count.
	if err := os.WriteFile(p, []byte(`{"server":"other","resource":"https://x/mcp","access_token":"b"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load("gh", "https://x/mcp"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Load of another server's file: err = %v, want ErrCorrupt", err)
	}
	// The next sign-in replaces it.
	if err := s.Save(&Record{Server: "gh", Resource: "https://x/mcp", AccessToken: "c"}); err != nil {
		t.Fatal(err)
	}
	if rec, err := s.Load("gh", "https://x/mcp"); err != nil || rec.AccessToken != "c" {
		t.Errorf("after Save: %v, %v", rec, err)
	}
}

func TestRecordExpiry(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name         string
		rec          *Record
		valid, fresh bool
	}{
		{"no expiry", &Record{AccessToken: "a"}, true, true},
		{"an hour left", &Record{AccessToken: "a", ExpiresAt: now.Add(time.Hour)}, true, true},
		{"within a minute of expiry", &Record{AccessToken: "a", ExpiresAt: now.Add(30 * time.Second)}, true, false},
		{"expired", &Record{AccessToken: "a", ExpiresAt: now.Add(-time.Second)}, false, false},
		{"no token", &Record{RefreshToken: "r"}, false, false},
		{"short-lived, before half its life", &Record{AccessToken: "a", ExpiresAt: now.Add(30 * time.Second), RefreshAt: now.Add(10 * time.Second)}, true, true},
		{"short-lived, past half its life", &Record{AccessToken: "a", ExpiresAt: now.Add(30 * time.Second), RefreshAt: now.Add(-time.Second)}, true, false},
		{"nil", nil, false, false},
	} {
		if got := tc.rec.Valid(now); got != tc.valid {
			t.Errorf("%s: Valid = %v, want %v", tc.name, got, tc.valid)
		}
		if got := tc.rec.Fresh(now); got != tc.fresh {
			t.Errorf("%s: Fresh = %v, want %v", tc.name, got, tc.fresh)
		}
	}
}

// tokenServer is a token endpoint that hands out numbered tokens for a
// refresh grant.
func tokenServer(t *testing.T, hits *atomic.Int32) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if r.Form.Get("grant_type") != "refresh_token" || r.Form.Get("refresh_token") != "refresh-1" {
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		hits.Add(1)
		time.Sleep(20 * time.Millisecond) // widen the race window
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"fresh-token","token_type":"Bearer","expires_in":3600,"refresh_token":"refresh-1"}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestStoreRefreshesOnceAcrossRacers(t *testing.T) {
	var hits atomic.Int32
	srv := tokenServer(t, &hits)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	s := NewStore(t.TempDir(), testKey)
	now := time.Now
	if err := s.Save(&Record{Server: "gh", Resource: "https://x/mcp", TokenEndpoint: srv.URL + "/token", ClientID: "c", AuthMethod: "none",
		AccessToken: "old-token", RefreshToken: "refresh-1", ExpiresAt: now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	got := make([]string, 4)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Separate stores: like a stdio bridge and a bridge exec.
			rec, err := NewStore(filepath.Dir(filepath.Dir(s.Dir())), testKey).Current(context.Background(), hc, "gh", "https://x/mcp", now)
			if err != nil || rec == nil {
				t.Errorf("Current: %v, %v", rec, err)
				return
			}
			got[i] = rec.AccessToken
		}()
	}
	wg.Wait()
	for i, g := range got {
		if g != "fresh-token" {
			t.Errorf("racer %d got %q, want the refreshed token", i, g)
		}
	}
	if n := hits.Load(); n != 1 {
		t.Errorf("refresh requests = %d, want 1 (the lock and re-read make racers share one)", n)
	}
	rec, _ := s.Load("gh", "https://x/mcp")
	if rec.AccessToken != "fresh-token" || !rec.Valid(now()) {
		t.Errorf("stored after refresh: valid=%v", rec.Valid(now()))
	}
}

func TestStoreRefreshRefusedSignsOut(t *testing.T) {
	var hits atomic.Int32
	srv := tokenServer(t, &hits)
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	s := NewStore(t.TempDir(), testKey)
	if err := s.Save(&Record{Server: "gh", Resource: "https://x/mcp", TokenEndpoint: srv.URL + "/token", ClientID: "c", AuthMethod: "none",
		AccessToken: "old", RefreshToken: "revoked", ExpiresAt: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Current(context.Background(), &http.Client{Transport: tr}, "gh", "https://x/mcp", time.Now)
	if err != nil || rec != nil {
		t.Fatalf("Current = %v, %v; want signed out", rec, err)
	}
	if cur, _ := s.Load("gh", "https://x/mcp"); cur.AccessToken != "" || cur.RefreshToken != "" {
		t.Errorf("the refused tokens are still stored")
	}
}
