package engine

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/engine/oauth"
)

// identityEngine is an engine whose config dir holds servers (a JSON
// object of entries), with env on top of a local runtime.
func identityEngine(t *testing.T, servers string, env map[string]string, serving bool, log *strings.Builder) *Engine {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "s.json"), []byte(`{"mcpServers":`+servers+`}`), 0o600); err != nil {
		t.Fatal(err)
	}
	m := map[string]string{"MCP_BRIDGE_RUNTIME": "local", "MCP_BRIDGE_UNSAFE_LOCAL": "1", "MCP_BRIDGE_CONFIG_DIR": dir,
		"MCP_BRIDGE_CONFIG_SOURCES": "mcps", "MCP_BRIDGE_STATE_DIR": filepath.Join(dir, "state"), "MCP_BRIDGE_KEY_FILE": filepath.Join(dir, "key")}
	for k, v := range env {
		m[k] = v
	}
	e2, err := LoadEnv(envOf(m), dir)
	if err != nil {
		t.Fatal(err)
	}
	e2.Serving = serving
	l := zerolog.Nop()
	if log != nil {
		l = zerolog.New(log)
	}
	return New(e2, "test", l, envOf(nil), false)
}

// TestCheckIdentities: a serve start with an identity: principal server
// needs tokens and a public URL a browser can come back to.
func TestCheckIdentities(t *testing.T) {
	own := `{"gh":{"url":"https://gh.example.com/mcp","identity":"principal"}}`
	shared := `{"gh":{"url":"https://gh.example.com/mcp"}}`
	for _, tc := range []struct {
		name, servers string
		opts          HTTPOptions
		want          string
	}{
		{"shared only", shared, HTTPOptions{Listen: "0.0.0.0:8080", PublicURL: "http://x.example.com"}, ""},
		{"loopback listen", own, HTTPOptions{Listen: "127.0.0.1:8080"}, ""},
		{"https public url", own, HTTPOptions{Listen: "0.0.0.0:8080", PublicURL: "https://bridge.example.com/"}, ""},
		{"tls listen", own, HTTPOptions{Listen: "bridge.example.com:8443", TLSCert: "c", TLSKey: "k"}, ""},
		{"plain http", own, HTTPOptions{Listen: "127.0.0.1:8080", PublicURL: "http://bridge.example.com"},
			`serve: gh set "identity": "principal", but the public URL http://bridge.example.com is neither https nor loopback, and authorization servers refuse such redirects: give --public-url https://… (the address your users' browsers reach this bridge at)`},
		{"unspecified", own, HTTPOptions{Listen: "0.0.0.0:8080"}, "names no reachable host"},
		{"no auth", own, HTTPOptions{Listen: "127.0.0.1:8080", InsecureNoAuth: true}, "give MCP_BRIDGE_TOKENS_FILE instead of --insecure-no-auth"},
		{"bad url", own, HTTPOptions{Listen: "127.0.0.1:8080", PublicURL: "https://b.example.com/?x=1"}, "want the bridge's external base URL"},
	} {
		e := identityEngine(t, tc.servers, nil, true, nil)
		got := ""
		if err := e.CheckIdentities(tc.opts); err != nil {
			got = err.Error()
		}
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestIdentityAtLoad: under serve an identity: principal server gets its
// per-principal spec maker, and is skipped with the reason when no
// principal could sign in; under bridge run the field is ignored with one
// warning.
func TestIdentityAtLoad(t *testing.T) {
	servers := `{"gh":{"url":"https://gh.example.com/mcp","identity":"principal"},"jira":{"url":"https://jira.example.com/mcp","identity":"principal"},"plain":{"url":"https://p.example.com/mcp"}}`
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("alice tok-alice-0123456789abcdef0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	e := identityEngine(t, servers, map[string]string{"MCP_BRIDGE_TOKENS_FILE": tokens}, true, nil)
	e.openCallbacks(HTTPOptions{Listen: "127.0.0.1:0"}, "127.0.0.1:4242")
	if got, want := e.callbacks.Load().RedirectURI, "http://127.0.0.1:4242/oauth/callback"; got != want {
		t.Errorf("redirect = %q, want %q", got, want)
	}
	specs, _ := e.loadConfig()
	for _, s := range specs {
		if (s.ForPrincipal != nil) != (s.Name != "plain") {
			t.Errorf("%s: ForPrincipal set = %v", s.Name, s.ForPrincipal != nil)
		}
	}
	if alice := specs[0].ForPrincipal("alice"); alice.Transport == nil || alice.SignIn == nil || alice.ForPrincipal != nil {
		t.Errorf("alice's spec: transport %v, sign-in %v", alice.Transport != nil, alice.SignIn != nil)
	}

	// Without a callback endpoint a principal's spec carries no token and
	// cannot sign in (never a loopback listener), and never the shared
	// transport.
	e.callbacks.Store(nil)
	if bare := specs[0].ForPrincipal("alice"); bare.Transport != nil || bare.SignIn != nil {
		t.Errorf("without callbacks: transport %v, sign-in %v; want neither", bare.Transport != nil, bare.SignIn != nil)
	}

	// No usable callback (serve under --insecure-no-auth has no tokens):
	// skipped, with the reason.
	e = identityEngine(t, servers, nil, true, nil)
	specs, _ = e.loadConfig()
	if len(specs) != 1 || specs[0].Name != "plain" {
		t.Errorf("without tokens: %d specs, want plain only", len(specs))
	}
	if p := e.router.Skipped(); len(p) != 2 || !strings.Contains(p[0].Reason, "--insecure-no-auth") {
		t.Errorf("skipped: %+v", p)
	}

	// bridge run: one warning, both served with this machine's sign-in.
	var log strings.Builder
	e = identityEngine(t, servers, nil, false, &log)
	specs, _ = e.loadConfig()
	if len(specs) != 3 || specs[0].ForPrincipal != nil {
		t.Errorf("bridge run: %d specs", len(specs))
	}
	if n := strings.Count(log.String(), `applies under bridge serve only`); n != 1 {
		t.Errorf("bridge run warned %d times, want once: %s", n, log.String())
	}
}

// TestDoctorAuthIdentity: doctor, with a tokens file set (serve's
// environment), warns for a signed-in server left shared, and does not
// ask the operator to sign in to an identity: principal one.
func TestDoctorAuthIdentity(t *testing.T) {
	ms := server.NewMCPServer("gh", "1", server.WithToolCapabilities(false))
	ms.AddTool(mcp.NewTool("hello"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("hi"), nil
	})
	h := server.NewStreamableHTTPServer(ms)
	defer func() { _ = h.Shutdown(context.Background()) }()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok-operator" {
			w.Header().Set("WWW-Authenticate", `Bearer scope="read"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer srv.Close()
	servers := fmt.Sprintf(`{"own":{"url":%q,"identity":"principal"},"shared":{"url":%q},"unsigned":{"url":%q}}`,
		srv.URL+"/mcp", srv.URL+"/mcp/", srv.URL+"/mcp/x")
	for _, serve := range []bool{false, true} {
		env := map[string]string{}
		if serve {
			env["MCP_BRIDGE_TOKENS_FILE"] = "/nonexistent" // serve's environment
		}
		e := identityEngine(t, servers, env, false, nil)
		store, err := e.Tokens()
		if err != nil {
			t.Fatal(err)
		}
		if err := store.Save(&oauth.Record{Server: "shared", Resource: srv.URL + "/mcp/", AccessToken: "tok-operator"}); err != nil {
			t.Fatal(err)
		}
		got := map[string]Check{}
		for _, c := range e.doctorAuth(context.Background(), "") {
			got[c.Name] = c
		}
		if c := got["auth own"]; c.Status != "OK" || !strings.Contains(c.Detail, "each principal of bridge serve signs in as themselves") {
			t.Errorf("serve=%v own: %+v", serve, c)
		}
		if c := got["auth unsigned"]; c.Status != "FAIL" {
			t.Errorf("serve=%v unsigned: %+v", serve, c)
		}
		c := got["auth shared"]
		warned := c.Status == "WARN" && strings.Contains(c.Detail, `every principal acts as this one account at shared: set "identity": "principal"`)
		if warned != serve || (!serve && c.Status != "OK") {
			t.Errorf("serve=%v shared, signed in: %+v", serve, c)
		}
	}
}
