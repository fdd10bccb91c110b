package tests

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestOAuthSignInRequiredFailsFast: without $BROWSER or a terminal, a call
// to a server that asks for sign-in fails at once with MCPError naming the
// command that fixes it, starts no authorization, and doctor says the same.
func TestOAuthSignInRequiredFailsFast(t *testing.T) {
	requirePodman(t)
	var authorize atomic.Int32
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/oauth-protected-resource/mcp":
			fmt.Fprintf(w, `{"resource":%q,"authorization_servers":[%q]}`, srv.URL+"/mcp", srv.URL)
		case "/authorize", "/register", "/token":
			authorize.Add(1)
			w.WriteHeader(http.StatusBadRequest)
		default:
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer scope="repo read:org", resource_metadata="%s/.well-known/oauth-protected-resource/mcp"`, srv.URL))
			w.WriteHeader(http.StatusUnauthorized)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "MCPs"), 0o700); err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf(`{"mcpServers":{"github":{"type":"http","url":%q}}}`, srv.URL+"/mcp")
	if err := os.WriteFile(filepath.Join(dir, "MCPs", "servers.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"MCP_BRIDGE_CONFIG_DIR": filepath.Join(dir, "MCPs"), "MCP_BRIDGE_STATE_DIR": filepath.Join(dir, "state"), "BROWSER": ""}
	fix := "run: bridge auth login github --scope 'repo read:org'"

	out, errOut, code := runCLI(t, env, "", "exec", "--servers", "github", `print(await runtime.call_tool("github", "x", {}))`)
	if code != 1 || !strings.Contains(out+errOut, "MCPError: Server 'github' needs sign-in: "+fix) {
		t.Errorf("exec: code %d, want 1 and MCPError naming %q; output:\n%s%s", code, fix, out, errOut)
	}
	out, errOut, code = runCLI(t, env, "", "doctor", "--server", "github")
	if code != 1 || !strings.Contains(out, "FAIL auth github: sign-in required; "+fix) {
		t.Errorf("doctor: code %d, want 1 and the auth line naming %q; output:\n%s%s", code, fix, out, errOut)
	}
	out, _, _ = runCLI(t, env, "", "auth", "status")
	if !strings.Contains(out, "github: not signed in") {
		t.Errorf("auth status: %q", out)
	}
	if n := authorize.Load(); n != 0 {
		t.Errorf("the authorization server got %d requests; a call that cannot reach a user must not start a sign-in", n)
	}
}
