package httpd

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/actors"
)

const testMaxBody = 4096

// testHandler is the real middleware in front of a real mcp-go streamable
// HTTP server whose one tool answers with the caller's principal.
func testHandler(t testing.TB, ready bool, origins ...string) http.Handler {
	t.Helper()
	cfg, _ := testConfig(t, ready, origins...)
	return Handler(cfg)
}

// testConfig is testHandler's Config, and the path of its tokens file
// (alice tok-alice, bob tok-bob).
func testConfig(t testing.TB, ready bool, origins ...string) (Config, string) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(p, []byte("alice tok-alice\nbob tok-bob\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := NewReloaded("tokens", []string{p}, func() (*TokenSet, error) {
		s, _, err := LoadTokens(p)
		return s, err
	}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	mcpSrv := server.NewMCPServer("t", "1", server.WithToolCapabilities(false))
	mcpSrv.AddTool(mcp.NewTool("whoami"), func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(actors.PrincipalFrom(ctx)), nil
	})
	b := NewBindings()
	return Config{
		ListenHost: "bridge.example.com", Tokens: tokens, AllowedOrigins: origins, MaxBody: testMaxBody, BodyTimeout: 300 * time.Millisecond,
		MCP:      server.NewStreamableHTTPServer(mcpSrv, server.WithSessionIdManagerResolver(b.Resolver())),
		Bindings: b, Ready: func() bool { return ready }, Drain: &Drain{}, Metrics: NewMetrics(), Log: zerolog.Nop(),
	}, p
}

type reqOpt func(*http.Request)

func token(tok string) reqOpt {
	return func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
}
func header(k, v string) reqOpt {
	return func(r *http.Request) { r.Header.Set(k, v) }
}

func do(h http.Handler, method, path, body string, opts ...reqOpt) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	for _, o := range opts {
		o(r)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

const initBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func TestHandlerRoutesAndAuth(t *testing.T) {
	h := testHandler(t, false)
	for _, c := range []struct {
		name, method, path string
		opts               []reqOpt
		want               int
	}{
		{"healthz without auth", "GET", "/healthz", nil, 200},
		{"readyz not ready", "GET", "/readyz", nil, 503},
		{"oauth metadata", "GET", "/.well-known/oauth-protected-resource", nil, 404},
		{"oauth metadata of /mcp", "GET", "/.well-known/oauth-protected-resource/mcp", nil, 404},
		{"mcp without token", "POST", "/mcp", nil, 401},
		{"mcp basic auth", "POST", "/mcp", []reqOpt{header("Authorization", "Basic YTpi")}, 401},
		{"mcp unknown token", "POST", "/mcp", []reqOpt{token("tok-carol")}, 401},
		{"mcp token prefix", "POST", "/mcp", []reqOpt{token("tok-alic")}, 401},
		{"mcp good token", "POST", "/mcp", []reqOpt{token("tok-alice")}, 200},
		{"metrics without token", "GET", "/metrics", nil, 401},
		{"metrics with token", "GET", "/metrics", []reqOpt{token("tok-bob")}, 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := do(h, c.method, c.path, initBody, c.opts...)
			if w.Code != c.want {
				t.Fatalf("status = %d, want %d: %s", w.Code, c.want, w.Body)
			}
			if c.want == 401 {
				if got := w.Header().Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer ") {
					t.Errorf("WWW-Authenticate = %q, want a Bearer challenge", got)
				}
				if strings.Contains(w.Body.String(), "tok-") {
					t.Errorf("refusal quotes a token: %s", w.Body)
				}
			}
		})
	}
}

func TestHandlerOrigin(t *testing.T) {
	h := testHandler(t, true, "https://app.example.com")
	for _, c := range []struct {
		origin string
		want   int
	}{
		{"", 200},
		{"http://localhost:3000", 200},
		{"http://127.0.0.1:9", 200},
		{"http://[::1]:9", 200},
		{"https://bridge.example.com", 200},
		{"https://app.example.com", 200},
		{"https://app.example.com.evil.com", 403},
		{"http://evil.example.com", 403},
		{"null", 403},
	} {
		t.Run(c.origin, func(t *testing.T) {
			opts := []reqOpt{token("tok-alice")}
			if c.origin != "" {
				opts = append(opts, header("Origin", c.origin))
			}
			if got := do(h, "POST", "/mcp", initBody, opts...).Code; got != c.want {
				t.Fatalf("status = %d, want %d", got, c.want)
			}
		})
	}
}

func TestHandlerBodyCap(t *testing.T) {
	h := testHandler(t, true)
	big := initBody + strings.Repeat(" ", testMaxBody-len(initBody)+1)
	if got := do(h, "POST", "/mcp", big, token("tok-alice")).Code; got != http.StatusRequestEntityTooLarge {
		t.Errorf("over the cap with Content-Length: %d, want 413", got)
	}
	// Chunked: no Content-Length, so the cap holds while reading.
	r := httptest.NewRequest("POST", "/mcp", io.MultiReader(strings.NewReader(big)))
	r.ContentLength = -1
	r.Header.Set("Authorization", "Bearer tok-alice")
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("over the cap, chunked: %d, want 413", w.Code)
	}
	atCap := initBody + strings.Repeat(" ", testMaxBody-len(initBody))
	if got := do(h, "POST", "/mcp", atCap, token("tok-alice")).Code; got != 200 {
		t.Errorf("at the cap: %d, want 200", got)
	}
	w = do(h, "POST", "/mcp", `{"jsonrpc":`, token("tok-alice"))
	if w.Code/100 != 4 || !strings.Contains(w.Body.String(), `"error"`) {
		t.Errorf("malformed JSON: %d %s, want a 4xx JSON-RPC error", w.Code, w.Body)
	}
}

// TestHandlerSessionBoundToPrincipal checks that an MCP session id works
// for the principal that created it only: another token gets the same 404
// as a made-up id, and cannot delete it either.
func TestHandlerSessionBoundToPrincipal(t *testing.T) {
	h := testHandler(t, true)
	w := do(h, "POST", "/mcp", initBody, token("tok-alice"))
	id := w.Header().Get("Mcp-Session-Id")
	if w.Code != 200 || id == "" {
		t.Fatalf("initialize: %d, session %q", w.Code, id)
	}
	call := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"whoami","arguments":{}}}`
	sid := header("Mcp-Session-Id", id)
	proto := header("MCP-Protocol-Version", "2025-11-25")
	w = do(h, "POST", "/mcp", call, token("tok-alice"), sid, proto)
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"alice"`) {
		t.Fatalf("alice's call: %d %s", w.Code, w.Body)
	}
	for _, c := range []struct {
		name string
		opts []reqOpt
	}{
		{"bob with alice's id", []reqOpt{token("tok-bob"), sid, proto}},
		{"alice with a made-up id", []reqOpt{token("tok-alice"), header("Mcp-Session-Id", "0000"), proto}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := do(h, "POST", "/mcp", call, c.opts...)
			if w.Code != 404 || !strings.Contains(w.Body.String(), "unknown MCP session id") {
				t.Fatalf("got %d %s, want 404 unknown MCP session id", w.Code, w.Body)
			}
		})
	}
	if got := do(h, "DELETE", "/mcp", "", token("tok-bob"), sid, proto).Code; got != 404 {
		t.Errorf("bob's DELETE of alice's session: %d, want 404", got)
	}
	if got := do(h, "POST", "/mcp", call, token("tok-alice"), sid, proto).Code; got != 200 {
		t.Errorf("alice's session after bob's DELETE: %d, want 200", got)
	}
}

func TestHandlerReadyz(t *testing.T) {
	if got := do(testHandler(t, true), "GET", "/readyz", "").Code; got != 200 {
		t.Errorf("ready: %d, want 200", got)
	}
}

// TestHandlerBodyDeadline: a client that sends its headers and then
// stalls mid-body gets 408 once the body deadline passes, on a real
// connection (the deadline is the connection's).
func TestHandlerBodyDeadline(t *testing.T) {
	h := testHandler(t, true)
	srv := httptest.NewServer(h)
	defer srv.Close()
	start := time.Now()
	resp, _ := rawRequest(t, srv.Listener.Addr().String(),
		"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer tok-alice\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"jsonrpc\":")
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("stalled body: %d, want 408", resp.StatusCode)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("answered after %v, want about the 300ms body deadline", d)
	}
}

// TestBindingsCapPerPrincipal: past the cap a principal's oldest ids go,
// and only its own.
func TestBindingsCapPerPrincipal(t *testing.T) {
	b := NewBindings()
	b.max = 3
	alice := manager{b: b, principal: "alice"}
	bob := manager{b: b, principal: "bob"}
	bobID := bob.Generate()
	var ids []string
	for range 5 {
		ids = append(ids, alice.Generate())
	}
	for i, id := range ids {
		if got, want := b.Owns("alice", id), i >= 2; got != want {
			t.Errorf("alice's id %d live = %v, want %v", i, got, want)
		}
	}
	if !b.Owns("bob", bobID) {
		t.Error("alice's ids evicted bob's")
	}
	if _, err := alice.Terminate(ids[4]); err != nil {
		t.Fatal(err)
	}
	if _, err := bob.Terminate(ids[3]); err == nil {
		t.Error("bob terminated alice's id")
	}
	if got := b.Len(); got != 3 {
		t.Errorf("Len = %d, want 3 (alice 2, bob 1)", got)
	}
	for range 10 * 3 {
		if _, err := alice.Terminate(alice.Generate()); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(b.order["alice"]); got > 2*b.max+1 {
		t.Errorf("alice's order holds %d ids, want it compacted", got)
	}
}

func TestHandlerGetNeedsSession(t *testing.T) {
	h := testHandler(t, true)
	if w := do(h, "GET", "/mcp", "", token("tok-alice")); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "Mcp-Session-Id") {
		t.Errorf("GET without a session: %d %s, want 400 naming Mcp-Session-Id", w.Code, w.Body)
	}
}
