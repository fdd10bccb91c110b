package oauth

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// seen records the Authorization header of each request a server got.
type seen struct {
	mu   sync.Mutex
	auth []string
}

func (s *seen) add(r *http.Request) {
	s.mu.Lock()
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	s.mu.Unlock()
}

func (s *seen) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auth...)
}

func signedInTransport(t *testing.T, serverURL string) (*Transport, *http.Transport) {
	t.Helper()
	s := NewStore(t.TempDir(), testKey)
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	tr, err := New("mine", serverURL, nil, s, nil)
	if err != nil {
		t.Fatal(err)
	}
	tr.Base = base
	if err := s.Save(&Record{Server: "mine", Resource: tr.Canonical(), AccessToken: "tok-mine", Scope: "read", ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	return tr, base
}

func TestTokenNeverSentToAnotherOrigin(t *testing.T) {
	var other, mine seen
	otherSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { other.add(r) }))
	defer otherSrv.Close()
	mineSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mine.add(r)
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, otherSrv.URL+"/landed", http.StatusFound)
		}
	}))
	defer mineSrv.Close()
	tr, _ := signedInTransport(t, mineSrv.URL+"/mcp")
	hc := &http.Client{Transport: tr}
	for _, u := range []string{mineSrv.URL + "/mcp", otherSrv.URL + "/mcp", mineSrv.URL + "/redirect"} {
		resp, err := hc.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if got := mine.all(); len(got) != 2 || got[0] != "Bearer tok-mine" || got[1] != "Bearer tok-mine" {
		t.Errorf("own server got %q, want the token twice", got)
	}
	for _, a := range other.all() {
		if a != "" {
			t.Errorf("another origin got Authorization %q (direct or after a redirect)", a)
		}
	}
	if n := len(other.all()); n != 2 {
		t.Errorf("other server requests = %d, want 2", n)
	}
	// The same host on another port is another origin.
	u, _ := url.Parse(mineSrv.URL)
	u.Host = "localhost:" + u.Port()
	if sameOrigin(u, tr.URL) {
		t.Errorf("%s counts as the origin of %s", u, tr.URL)
	}
}

func TestChallengeWithoutSignInFailsFastNamingTheFix(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") == "" {
			w.Header().Set("WWW-Authenticate", `Bearer scope="repo read:org", resource_metadata="http://x/.well-known/oauth-protected-resource"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="admin' $(id) write"`)
		w.WriteHeader(http.StatusForbidden)
	}))
	defer srv.Close()
	base := &http.Transport{}
	defer base.CloseIdleConnections()
	tr, err := New("github", srv.URL+"/mcp", nil, NewStore(t.TempDir(), testKey), nil)
	if err != nil {
		t.Fatal(err)
	}
	tr.Base = base
	_, err = (&http.Client{Transport: tr}).Post(srv.URL+"/mcp", "application/json", strings.NewReader(`{}`))
	re, ok := AsRequired(err)
	if !ok {
		t.Fatalf("err = %v, want a *RequiredError", err)
	}
	if got, want := re.Fix(), "bridge auth login github --scope 'repo read:org'"; got != want {
		t.Errorf("Fix = %q, want %q", got, want)
	}
	// Signed in, the server wants more scope: still no browser here, and
	// the server's text never reaches the suggested shell command.
	tr2, _ := signedInTransport(t, srv.URL+"/mcp")
	_, err = (&http.Client{Transport: tr2}).Post(srv.URL+"/mcp", "application/json", strings.NewReader(`{}`))
	re, ok = AsRequired(err)
	if !ok {
		t.Fatalf("step-up err = %v, want a *RequiredError", err)
	}
	if got, want := re.Fix(), "bridge auth login mine --scope 'read write'"; got != want {
		t.Errorf("step-up Fix = %q, want %q", got, want)
	}
	if strings.Contains(err.Error(), "tok-mine") {
		t.Errorf("the error text carries the token: %v", err)
	}
}

func TestParseChallenge(t *testing.T) {
	got := parseChallenge([]string{`Basic realm="x"`, `Bearer error="insufficient_scope", scope="a b", resource_metadata="https://h/.well-known/oauth-protected-resource/mcp", error_description="need \"more\""`})
	want := challenge{ResourceMetadata: "https://h/.well-known/oauth-protected-resource/mcp", Scope: "a b", Error: "insufficient_scope"}
	if got != want {
		t.Errorf("parseChallenge = %+v, want %+v", got, want)
	}
}

func TestResourceCovers(t *testing.T) {
	server, _ := url.Parse("https://api.example.com/v1/mcp")
	for _, tc := range []struct {
		resource string
		want     bool
	}{
		{"https://api.example.com/v1/mcp", true},
		{"https://api.example.com", true},
		{"https://api.example.com/v1", true},
		{"https://api.example.com/v1/mcp/", true},
		{"https://api.example.com/v", false},
		{"https://evil.example.com/v1/mcp", false},
		{"http://api.example.com/v1/mcp", false},
		{"https://api.example.com:8443/v1/mcp", false},
	} {
		if got := resourceCovers(tc.resource, server); got != tc.want {
			t.Errorf("resourceCovers(%q) = %v, want %v", tc.resource, got, tc.want)
		}
	}
}

func TestNoSignInOverPlainHTTP(t *testing.T) {
	s := &signIn{server: "remote", ui: &Interaction{}}
	s.url, _ = url.Parse("http://mcp.example.com/mcp")
	_, err := s.run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "must be an https URL") {
		t.Errorf("sign-in over plain http: err = %v, want a refusal", err)
	}
}

func TestOneLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"invalid_client", "invalid_client"},
		{"bad\x1b]52;c;ZXZpbA==\x07 thing\r\nnext", "bad ]52;c;ZXZpbA== thing next"},
		{"\u009b31m red", "31m red"},
		{strings.Repeat("a", 300), strings.Repeat("a", 200) + "…"},
	} {
		if got := oneLine(tc.in); got != tc.want {
			t.Errorf("oneLine(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestRejectedTokenRefreshedOnce: a token the server rejects before its
// expiry (revoked, rotated) is refreshed once and the request resent,
// without a sign-in.
func TestRejectedTokenRefreshedOnce(t *testing.T) {
	var refreshes seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/token":
			_ = r.ParseForm()
			refreshes.add(r)
			if r.Form.Get("grant_type") != "refresh_token" || r.Form.Get("refresh_token") != "r1" || r.Form.Get("resource") != "https://indicator.example/mcp" {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			_, _ = w.Write([]byte(`{"access_token":"new","token_type":"bearer","expires_in":60}`))
		default:
			if r.Header.Get("Authorization") != "Bearer new" {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			_, _ = w.Write([]byte("ok"))
		}
	}))
	defer srv.Close()
	tr, _ := signedInTransport(t, srv.URL+"/mcp")
	rec, _ := tr.Store.Load("mine", tr.Canonical())
	rec.RefreshToken, rec.TokenEndpoint, rec.ClientID, rec.AuthMethod, rec.Indicator = "r1", srv.URL+"/token", "c", "none", "https://indicator.example/mcp"
	if err := tr.Store.Save(rec); err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: tr}).Post(srv.URL+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatalf("after a rejected token: %v", err)
	}
	resp.Body.Close()
	// A second request uses the new 60 s token: refreshed at half its
	// life, not on every request.
	resp, err = (&http.Client{Transport: tr}).Post(srv.URL+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatalf("second request: %v", err)
	}
	resp.Body.Close()
	if n := len(refreshes.all()); n != 1 {
		t.Errorf("refresh requests = %d, want 1", n)
	}
	if got, _ := tr.Store.Load("mine", tr.Canonical()); got.AccessToken != "new" || got.RefreshToken != "r1" {
		t.Errorf("stored after refresh: token rotated=%v, refresh kept=%v", got.AccessToken == "new", got.RefreshToken == "r1")
	}
}

// TestPlainHTTPOnlyAtServerOrigin: a challenge's resource_metadata may be
// plain http only at the configured server's exact origin on loopback
// (issue 36): one that names another loopback port is refused before
// anything is fetched from it.
func TestPlainHTTPOnlyAtServerOrigin(t *testing.T) {
	server, _ := url.Parse("http://127.0.0.1:5000/mcp")
	for _, tc := range []struct {
		raw  string
		want string // "" for allowed, else part of the error
	}{
		{"http://127.0.0.1:5000/.well-known/oauth-protected-resource/mcp", ""},
		{"https://auth.example.com/.well-known/oauth-protected-resource", ""},
		{"http://127.0.0.1:5001/.well-known/oauth-protected-resource", "plain http is allowed only at the server's own origin http://127.0.0.1:5000"},
		{"http://localhost:5000/.well-known/oauth-protected-resource", "plain http is allowed only at the server's own origin"},
		{"http://auth.example.com/.well-known/oauth-protected-resource", "must be an https URL"},
	} {
		err := challengeURL(tc.raw, server)
		if got := err; (tc.want == "") != (got == nil) || (got != nil && !strings.Contains(got.Error(), tc.want)) {
			t.Errorf("challengeURL(%s): got %v, want %q", tc.raw, got, tc.want)
		}
	}

	var fetched atomic.Int32
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		fmt.Fprint(w, `{"authorization_servers":["http://127.0.0.1:1"]}`)
	}))
	defer other.Close()
	f := newFakeAuth(t, "read")
	serverURL, _ := url.Parse(f.srv.URL + "/mcp")
	_, err := discoverResource(t.Context(), f.srv.Client(), serverURL, challenge{ResourceMetadata: other.URL + "/.well-known/oauth-protected-resource"})
	if err == nil || !strings.Contains(err.Error(), "only at the server's own origin") || fetched.Load() != 0 {
		t.Errorf("resource_metadata on another loopback port: err %v, fetched %d times; want a refusal and no fetch", err, fetched.Load())
	}
}
