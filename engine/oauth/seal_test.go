package oauth

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// otherKey is a bridge key other than testKey: a changed key file.
var otherKey = bytes.Repeat([]byte{0xa5}, 32)

func TestSealRoundTrip(t *testing.T) {
	exp := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name string
		rec  Record
	}{
		{"access token only", Record{Server: "gh", Resource: "https://x/mcp", AccessToken: "secret-access-1"}},
		{"full record", Record{Server: "gh", Resource: "https://x/mcp", Indicator: "https://x", Issuer: "https://as", TokenEndpoint: "https://as/token",
			ClientID: "c", ClientSecret: "secret-client-1", AuthMethod: "client_secret_post", RedirectURI: "http://127.0.0.1:1/cb", Registered: true,
			AccessToken: "secret-access-2", RefreshToken: "secret-refresh-2", Scope: "a b", ExpiresAt: exp, RefreshAt: exp.Add(-time.Minute)}},
		{"names with spaces and newlines", Record{Server: "my server\n", Resource: "https://x/a b?c=d", AccessToken: "secret-access-3", RefreshToken: "secret-refresh-3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStore(t.TempDir(), testKey)
			want := tc.rec
			if err := s.Save(&tc.rec); err != nil {
				t.Fatal(err)
			}
			got, err := s.Load(want.Server, want.Resource)
			if err != nil || got == nil || !reflect.DeepEqual(*got, want) {
				t.Fatalf("Load = %+v, %v; want the saved record", got, err)
			}
			data, err := os.ReadFile(s.path(want.Server, want.Resource))
			if err != nil {
				t.Fatal(err)
			}
			if got, want := string(data[:len(sealMagic)+1]), sealMagic+" "; got != want {
				t.Errorf("file starts %q, want %q", got, want)
			}
			if got, want := bytes.Count(data, []byte("\n")), 1; got != want || !bytes.HasSuffix(data, []byte("\n")) {
				t.Errorf("file has %d newlines, want %d, at the end", got, want)
			}
			for _, secret := range []string{want.AccessToken, want.RefreshToken, want.ClientSecret} {
				if secret != "" && bytes.Contains(data, []byte(secret)) {
					t.Errorf("the file on disk contains the secret %q", secret)
				}
			}
		})
	}
}

// sealedFile saves rec under key in dir and returns its file's content.
func sealedFile(t *testing.T, dir string, key []byte, rec Record) []byte {
	t.Helper()
	s := NewStoreAt(dir, key)
	if err := s.Save(&rec); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(s.path(rec.Server, rec.Resource))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestSealRefusals(t *testing.T) {
	const res = "https://x/mcp"
	gh := Record{Server: "gh", Resource: res, AccessToken: "secret-access", RefreshToken: "secret-refresh"}
	for _, tc := range []struct {
		name string
		// file returns the content put at the path of ("other", res).
		file func(t *testing.T, dir string) []byte
		key  []byte
		want error
	}{
		{"sealed with another key", func(t *testing.T, dir string) []byte {
			return sealedFile(t, dir, otherKey, Record{Server: "other", Resource: res, AccessToken: "secret-access"})
		}, testKey, ErrKey},
		{"another server's file renamed", func(t *testing.T, dir string) []byte {
			return sealedFile(t, dir, testKey, gh)
		}, testKey, ErrCorrupt},
		{"another server's file with its header edited", func(t *testing.T, dir string) []byte {
			f := bytes.Fields(sealedFile(t, dir, testKey, gh))
			f[1] = []byte(b64.EncodeToString([]byte("other")))
			return append(bytes.Join(f, []byte(" ")), '\n')
		}, testKey, ErrKey},
		{"ciphertext altered", func(t *testing.T, dir string) []byte {
			data := sealedFile(t, dir, testKey, Record{Server: "other", Resource: res, AccessToken: "secret-access"})
			i := len(data) - 10
			data[i] = map[bool]byte{true: 'B', false: 'A'}[data[i] == 'A']
			return data
		}, testKey, ErrKey},
		{"a sealed line without its ciphertext", func(t *testing.T, dir string) []byte {
			return []byte(sealMagic + " " + b64.EncodeToString([]byte("other")) + " " + b64.EncodeToString([]byte(res)) + "\n")
		}, testKey, ErrCorrupt},
		{"a field that is not base64url", func(t *testing.T, dir string) []byte {
			return []byte(sealMagic + " b3RoZXI " + b64.EncodeToString([]byte(res)) + " !!!\n")
		}, testKey, ErrCorrupt},
		{"over the size bound", func(t *testing.T, dir string) []byte {
			return append([]byte(sealMagic+" "), bytes.Repeat([]byte("A"), maxRecord)...)
		}, testKey, ErrCorrupt},
		{"sealed, read without a key", func(t *testing.T, dir string) []byte {
			return sealedFile(t, dir, testKey, Record{Server: "other", Resource: res, AccessToken: "secret-access"})
		}, nil, errNoKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			data := tc.file(t, dir)
			s := NewStoreAt(dir, tc.key)
			if err := os.WriteFile(s.path("other", res), data, 0o600); err != nil {
				t.Fatal(err)
			}
			rec, err := s.Load("other", res)
			if !errors.Is(err, tc.want) || rec != nil {
				t.Fatalf("Load = %v, %v; want nil, %v", rec, err, tc.want)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("the error shows a secret: %v", err)
			}
			if tc.key == nil {
				return
			}
			// Signed out, and the next sign-in replaces the file.
			rec, err = s.Current(context.Background(), http.DefaultClient, "other", res, time.Now)
			if err != nil || rec != nil {
				t.Errorf("Current = %v, %v; want signed out (nil, nil)", rec, err)
			}
			if err := s.Save(&Record{Server: "other", Resource: res, AccessToken: "new"}); err != nil {
				t.Fatal(err)
			}
			if rec, err := s.Load("other", res); err != nil || rec == nil || rec.AccessToken != "new" {
				t.Errorf("after Save: Load = %v, %v", rec, err)
			}
		})
	}
}

func TestErrKeyText(t *testing.T) {
	got := ErrKey.Error()
	want := "token file was sealed with another key (MCP_BRIDGE_KEY_FILE changed?): sign in again"
	if got != want {
		t.Errorf("ErrKey = %q, want %q", got, want)
	}
}

func TestStoreWithoutKey(t *testing.T) {
	for _, tc := range []struct {
		name string
		key  []byte
	}{
		{"nil key", nil},
		{"empty key", []byte{}},
		{"31 bytes", bytes.Repeat([]byte{1}, 31)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			s := NewStoreAt(dir, tc.key)
			rec := Record{Server: "gh", Resource: "https://x/mcp", AccessToken: "secret-access"}
			if got, want := fmt.Sprint(s.Save(&rec)), "token store: no encryption key"; got != want {
				t.Errorf("Save: err = %s, want %s", got, want)
			}
			ran := false
			if _, err := s.Update("gh", "https://x/mcp", func(*Record) (*Record, error) { ran = true; return nil, nil }); !errors.Is(err, errNoKey) || ran {
				t.Errorf("Update: err = %v, fn ran = %v; want errNoKey before fn", err, ran)
			}
			// A plaintext file of the previous version still reads.
			writePlain(t, s, rec)
			if got, err := s.Load("gh", "https://x/mcp"); err != nil || got == nil || got.AccessToken != "secret-access" {
				t.Errorf("Load of a plaintext file = %v, %v", got, err)
			}
			if n, err := s.Migrate(); n != 0 || !errors.Is(err, errNoKey) {
				t.Errorf("Migrate = %d, %v; want 0, errNoKey", n, err)
			}
		})
	}
}

// writePlain writes rec as the previous version did: its JSON in the clear.
func writePlain(t *testing.T, s *Store, rec Record) {
	t.Helper()
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(s.Dir(), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.path(rec.Server, rec.Resource), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestStoreMigrate(t *testing.T) {
	s := NewStore(t.TempDir(), testKey)
	if n, err := s.Migrate(); n != 0 || err != nil {
		t.Fatalf("Migrate of a missing dir = %d, %v; want 0, nil", n, err)
	}
	if _, err := os.Stat(s.Dir()); err == nil {
		t.Errorf("Migrate of a missing dir created it")
	}
	plain := []Record{
		{Server: "gh", Resource: "https://x/mcp", AccessToken: "secret-access-1", RefreshToken: "secret-refresh-1"},
		{Server: "gl", Resource: "https://y/mcp", AccessToken: "secret-access-2", ClientSecret: "secret-client-2"},
	}
	for _, r := range plain {
		writePlain(t, s, r)
	}
	sealed := Record{Server: "sealed", Resource: "https://z/mcp", AccessToken: "secret-access-3"}
	if err := s.Save(&sealed); err != nil {
		t.Fatal(err)
	}
	foreign := sealedFile(t, s.Dir(), otherKey, Record{Server: "foreign", Resource: "https://w/mcp", AccessToken: "secret-access-4"})
	corrupt := []byte("{not json")
	if err := os.WriteFile(s.path("corrupt", "https://v/mcp"), corrupt, 0o600); err != nil {
		t.Fatal(err)
	}
	// The plaintext files read before the migration.
	for _, want := range plain {
		if got, err := s.Load(want.Server, want.Resource); err != nil || got == nil || !reflect.DeepEqual(*got, want) {
			t.Errorf("before Migrate: Load(%s) = %+v, %v", want.Server, got, err)
		}
	}
	for _, tc := range []struct {
		name string
		want int
	}{
		{"first migration", len(plain)},
		{"second migration", 0},
	} {
		n, err := s.Migrate()
		if got, want := n, tc.want; got != want || err != nil {
			t.Errorf("%s: Migrate = %d, %v; want %d, nil", tc.name, got, err, want)
		}
	}
	for _, want := range append(plain, sealed) {
		data, err := os.ReadFile(s.path(want.Server, want.Resource))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(data, []byte(sealMagic+" ")) {
			t.Errorf("%s: not sealed after Migrate: %.20q", want.Server, data)
		}
		for _, secret := range []string{want.AccessToken, want.RefreshToken, want.ClientSecret} {
			if secret != "" && bytes.Contains(data, []byte(secret)) {
				t.Errorf("%s: the file still contains %q", want.Server, secret)
			}
		}
		if got, err := s.Load(want.Server, want.Resource); err != nil || got == nil || !reflect.DeepEqual(*got, want) {
			t.Errorf("after Migrate: Load(%s) = %+v, %v", want.Server, got, err)
		}
	}
	// What Migrate cannot read it leaves as it was.
	for _, tc := range []struct {
		name string
		path string
		want []byte
	}{
		{"another key's file", s.path("foreign", "https://w/mcp"), foreign},
		{"a corrupt file", s.path("corrupt", "https://v/mcp"), corrupt},
	} {
		if got, _ := os.ReadFile(tc.path); !bytes.Equal(got, tc.want) {
			t.Errorf("%s changed: %q, want %q", tc.name, got, tc.want)
		}
	}
	ents, _ := os.ReadDir(s.Dir())
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".token-") {
			t.Errorf("temp file left behind: %s", e.Name())
		}
	}
}

func TestStoreListDeleteSealed(t *testing.T) {
	dir := t.TempDir()
	s := NewStoreAt(dir, testKey)
	for _, r := range []Record{
		{Server: "gh", Resource: "https://x/mcp", AccessToken: "a1"},
		{Server: "gh", Resource: "https://x/other", AccessToken: "a2"},
		{Server: "gl", Resource: "https://y/mcp", AccessToken: "a3"},
	} {
		if err := s.Save(&r); err != nil {
			t.Fatal(err)
		}
	}
	writePlain(t, s, Record{Server: "gh", Resource: "https://x/plain", AccessToken: "a4"})
	sealedFile(t, dir, otherKey, Record{Server: "gh", Resource: "https://x/foreign", AccessToken: "a5"})

	list := func() []string {
		var out []string
		for _, r := range s.List() {
			out = append(out, r.Server+" "+r.Resource+" "+r.AccessToken)
		}
		slices.Sort(out)
		return out
	}
	for _, tc := range []struct {
		name        string
		delete      string
		wantDeleted int
		wantList    []string
	}{
		// Another key's file is not listed: it does not read.
		{"before", "", 0, []string{"gh https://x/mcp a1", "gh https://x/other a2", "gh https://x/plain a4", "gl https://y/mcp a3"}},
		{"delete an unknown server", "none", 0, []string{"gh https://x/mcp a1", "gh https://x/other a2", "gh https://x/plain a4", "gl https://y/mcp a3"}},
		// Delete removes another key's file too: its header names gh.
		{"delete gh", "gh", 4, []string{"gl https://y/mcp a3"}},
		{"delete gh again", "gh", 0, []string{"gl https://y/mcp a3"}},
		{"delete gl", "gl", 1, nil},
	} {
		if tc.delete != "" {
			n, err := s.Delete(tc.delete)
			if got, want := n, tc.wantDeleted; got != want || err != nil {
				t.Errorf("%s: Delete = %d, %v; want %d, nil", tc.name, got, err, want)
			}
		}
		if got, want := list(), tc.wantList; !slices.Equal(got, want) {
			t.Errorf("%s: List = %q, want %q", tc.name, got, want)
		}
	}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if e.Name() != ".lock" {
			t.Errorf("left after deleting every server: %s", e.Name())
		}
	}
	if n, err := NewStoreAt(filepath.Join(dir, "missing"), testKey).Delete("gh"); n != 0 || err != nil {
		t.Errorf("Delete in a missing dir = %d, %v; want 0, nil", n, err)
	}
}

func TestStoreKeyNotShown(t *testing.T) {
	s := NewStoreAt(t.TempDir(), testKey)
	derived := hex.EncodeToString(s.key)
	for _, got := range []string{
		fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s", s, s, s, s),
		fmt.Sprintf("%+v %#v", struct{ S *Store }{s}, struct{ S *Store }{s}),
	} {
		if strings.Contains(got, derived) || strings.Contains(got, fmt.Sprint(s.key)) || strings.Contains(got, fmt.Sprint(testKey)) {
			t.Errorf("the key shows: %s", got)
		}
		if !strings.Contains(got, s.Dir()) {
			t.Errorf("%q does not name the directory", got)
		}
	}
}
