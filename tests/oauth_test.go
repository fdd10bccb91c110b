package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
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

// stepUpServer is a minimal streamable HTTP MCP server that starts and
// lists one tool without a token but refuses tools/call for scope (403
// insufficient_scope); authorize counts requests to its authorization
// server.
func stepUpServer(t *testing.T, authorize *atomic.Int32) *httptest.Server {
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/.well-known/oauth-protected-resource/mcp":
			fmt.Fprintf(w, `{"resource":%q,"authorization_servers":[%q]}`, srv.URL+"/mcp", srv.URL)
			return
		case "/.well-known/oauth-authorization-server":
			fmt.Fprintf(w, `{"issuer":%q,"authorization_endpoint":%q,"token_endpoint":%q,"registration_endpoint":%q}`,
				srv.URL, srv.URL+"/authorize", srv.URL+"/token", srv.URL+"/register")
			return
		case "/authorize", "/register", "/token":
			authorize.Add(1)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/json")
		switch req.Method {
		case "initialize":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"gh","version":"1"}}}`, req.ID)
		case "tools/list":
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"repo","inputSchema":{"type":"object"}}]}}`, req.ID)
		case "tools/call":
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope="repo:write", resource_metadata="%s/.well-known/oauth-protected-resource/mcp"`, srv.URL))
			w.WriteHeader(http.StatusForbidden)
		default:
			if len(req.ID) == 0 {
				w.WriteHeader(http.StatusAccepted)
				return
			}
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{}}`, req.ID)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestOAuthServeNoLazySignIn: under bridge serve a call that needs more
// scope fails at once naming the fix, even for an HTTP client that takes
// sign-in links: the callback would land on the server's host and the
// identity is the operator's.
func TestOAuthServeNoLazySignIn(t *testing.T) {
	var authorize atomic.Int32
	srv := stepUpServer(t, &authorize)
	env := withServers(t, map[string]any{"gh": map[string]any{"type": "http", "url": srv.URL + "/mcp"}}, nil)
	env["MCP_BRIDGE_TOKENS_FILE"] = writeTokens(t, "alice "+aliceToken)
	s := startServe(t, env)
	h := newHuman(t, func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept}}, nil
	})
	c, err := s.clientVersion(aliceToken, "2025-11-25", client.WithElicitationHandler(h),
		client.WithClientCapabilities(mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{Form: &struct{}{}, URL: &struct{}{}}}))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	got := text(t, callHTTP(t, c, map[string]any{"code": `print(await runtime.call_tool("gh", "repo", {}))`, "servers": []string{"gh"}}))
	if !strings.Contains(got, "MCPError: Server 'gh' needs sign-in with more scope: run: bridge auth login gh --scope 'repo:write'") {
		t.Errorf("serve call: %s", got)
	}
	if n, q := authorize.Load(), len(h.questions()); n != 0 || q != 0 {
		t.Errorf("authorization server requests %d, sign-in links sent %d; want none under serve", n, q)
	}
}
