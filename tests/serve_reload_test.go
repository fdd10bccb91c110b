package tests

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestServeTokensReload: an edit of the tokens file takes effect without a
// restart; an invalid edit keeps the previous tokens and logs one error.
func TestServeTokensReload(t *testing.T) {
	tokens := writeTokens(t, "alice "+aliceToken)
	s := startServe(t, map[string]string{"MCP_BRIDGE_TOKENS_FILE": tokens})
	status := func(tok string) int {
		code, _, _ := s.raw("POST", "/mcp", initializeBody, bearerHeader(tok))
		return code
	}
	replace := func(body string) {
		t.Helper()
		if err := os.WriteFile(tokens+".new", []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tokens+".new", tokens); err != nil {
			t.Fatal(err)
		}
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(100 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within 10s", what)
			}
		}
	}
	if got := status(bobToken); got != http.StatusUnauthorized {
		t.Fatalf("bob before: %d, want 401", got)
	}
	replace("bob " + bobToken + "\n")
	waitFor("bob's new token accepted", func() bool { return status(bobToken) == 200 })
	if got := status(aliceToken); got != http.StatusUnauthorized {
		t.Errorf("alice's removed token: %d, want 401", got)
	}
	replace("bob\n") // an empty token: invalid
	waitFor("the invalid edit logged", func() bool { return strings.Contains(s.stderr.String(), "reload failed") })
	time.Sleep(2500 * time.Millisecond) // two more polls: still one error
	if got := status(bobToken); got != 200 {
		t.Errorf("bob after an invalid edit: %d, want 200 (the previous tokens)", got)
	}
	if n := strings.Count(s.stderr.String(), "reload failed"); n != 1 {
		t.Errorf("%d reload errors logged, want 1", n)
	}
}

// TestServeReadyzImageMissing: /readyz says not ready while the sandbox
// image is missing; /healthz still answers.
func TestServeReadyzImageMissing(t *testing.T) {
	s := startServe(t, map[string]string{"MCP_BRIDGE_IMAGE": "localhost/bridge-no-such-image:none"}, "--insecure-no-auth")
	time.Sleep(3 * time.Second) // the readiness probe has run
	if code, _, _ := s.raw("GET", "/readyz", "", nil); code != http.StatusServiceUnavailable {
		t.Errorf("/readyz with the image missing: %d, want 503", code)
	}
	if code, _, _ := s.raw("GET", "/healthz", "", nil); code != 200 {
		t.Errorf("/healthz: %d, want 200", code)
	}
}
