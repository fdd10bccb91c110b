package oauth

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestCallbacks: a redirect reaches the one sign-in that registered its
// state, once, before expiry; every other redirect is refused and reaches
// no sign-in.
func TestCallbacks(t *testing.T) {
	now := time.Unix(1_000_000, 0)
	c := NewCallbacks("https://bridge.example.com/oauth/callback")
	c.Now = func() time.Time { return now }
	alice, aliceDone := c.open("state-alice", "alice", "github", time.Minute)
	bob, bobDone := c.open("state-bob", "bob", "github", time.Minute)
	_, lateDone := c.open("state-late", "carol", "github", time.Minute)

	get := func(q string) (int, string) {
		t.Helper()
		w := httptest.NewRecorder()
		c.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/oauth/callback?"+q, nil))
		return w.Code, w.Body.String()
	}
	// alice's redirect: delivered to alice's sign-in, whose outcome the
	// page reports.
	go func() {
		cb := <-alice
		if cb.code != "code-a" || cb.state != "state-alice" {
			t.Errorf("alice's sign-in got %+v", cb)
		}
		aliceDone(outcome{account: "alice@example.com"})
	}()
	if code, body := get("code=code-a&state=state-alice"); code != http.StatusOK || !strings.Contains(body, "Signed in to github for bridge principal alice. The tokens are the account github names alice@example.com") {
		t.Errorf("alice's callback: %d %s", code, body)
	}
	select {
	case cb := <-bob:
		t.Errorf("bob's sign-in got alice's redirect: %+v", cb)
	default:
	}
	now = now.Add(2 * time.Minute)
	for _, tc := range []struct {
		name, query, want string
	}{
		{"replay", "code=code-a&state=state-alice", "already used"},
		{"foreign state", "code=x&state=made-up", "started no sign-in with this state"},
		{"no state", "code=x", "carries no state"},
		{"after expiry", "code=code-b&state=state-bob", "expired"},
	} {
		code, body := get(tc.query)
		if code != http.StatusBadRequest || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %q, want 400 naming %q", tc.name, code, body, tc.want)
		}
	}
	select {
	case cb := <-bob:
		t.Errorf("bob's expired sign-in got a redirect: %+v", cb)
	default:
	}
	bobDone(outcome{err: errors.New("timed out")})
	// A sign-in that ended (timeout) forgets its state: a late redirect is
	// refused as expired.
	lateDone(outcome{err: errors.New("timed out")})
	if code, body := get("code=c&state=state-late"); code != http.StatusBadRequest || !strings.Contains(body, "expired") {
		t.Errorf("after the sign-in ended: %d %q", code, body)
	}
	if n := c.Pending(); n != 0 {
		t.Errorf("pending = %d, want 0", n)
	}
	w := httptest.NewRecorder()
	c.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/oauth/callback?state=x", nil))
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST: %d", w.Code)
	}
}

// TestCallbackPageEscapes: a server's error text cannot inject markup.
func TestCallbackPageEscapes(t *testing.T) {
	c := NewCallbacks("https://b/oauth/callback")
	codes, done := c.open("s", "alice", "gh", time.Minute)
	go func() {
		<-codes
		done(outcome{err: errors.New("<script>x</script>")})
	}()
	w := httptest.NewRecorder()
	c.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/oauth/callback?state=s&code=c", nil))
	if strings.Contains(w.Body.String(), "<script>") || w.Code != http.StatusBadGateway {
		t.Errorf("page: %d %q", w.Code, w.Body.String())
	}
}

// TestTokenAccount: the account an ID token names, for the person to check
// who they signed in as; anything malformed names none.
func TestTokenAccount(t *testing.T) {
	jwt := func(claims string) string {
		return "e30." + base64.RawURLEncoding.EncodeToString([]byte(claims)) + ".sig"
	}
	for _, tc := range []struct {
		name, idToken, want string
	}{
		{"none", "", ""},
		{"preferred_username", jwt(`{"sub":"1","email":"a@x","preferred_username":"alice"}`), "alice"},
		{"email", jwt(`{"sub":"1","email":"a@x"}`), "a@x"},
		{"sub", jwt(`{"sub":"u-1"}`), "u-1"},
		{"control characters", jwt(`{"name":"al\u001b[2Jice"}`), "al [2Jice"},
		{"not a jwt", "abc", ""},
		{"bad base64", "e30.%%%.sig", ""},
		{"not json", "e30." + base64.RawURLEncoding.EncodeToString([]byte("x")) + ".sig", ""},
		{"no string claim", jwt(`{"sub":7}`), ""},
	} {
		tr := &tokenResponse{IDToken: tc.idToken}
		if got := tr.account(); got != tc.want {
			t.Errorf("%s: account = %q, want %q", tc.name, got, tc.want)
		}
	}
}
