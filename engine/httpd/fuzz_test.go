package httpd

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// FuzzHTTPRequest drives the whole request path (middleware and mcp-go's
// streamable HTTP server) with arbitrary methods, paths, headers and
// bodies: it must never panic, never answer /mcp without a valid token,
// and never answer 5xx.
func FuzzHTTPRequest(f *testing.F) {
	f.Add("POST", "/mcp", "tok-alice", "", "", initBody)
	f.Add("POST", "/mcp", "tok-alice", "", "x", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"whoami"}}`)
	f.Add("POST", "/mcp", "tok-bob", "http://evil.example.com", "", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`)
	f.Add("GET", "/mcp", "tok-alice", "", "abc", "")
	f.Add("DELETE", "/mcp", "", "", "abc", "")
	f.Add("POST", "/mcp", "tok-alice", "", "", `{"jsonrpc":"2.0","id":{},"method":null}`)
	f.Add("GET", "/metrics", "tok-bob", "", "", "")
	f.Add("PUT", "/.well-known/oauth-protected-resource/mcp", "", "", "", "{")
	h := testHandler(f, true)
	f.Fuzz(func(t *testing.T, method, path, tok, origin, session, body string) {
		if !validMethod(method) || !strings.HasPrefix(path, "/") || strings.ContainsAny(path, " \r\n\t#?%") {
			return
		}
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Method, r.URL.Path, r.RequestURI = method, path, path
		r.Body = http.NoBody
		if body != "" {
			r.Body = httpBody(body)
			r.ContentLength = int64(len(body))
		}
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Accept", "application/json, text/event-stream")
		if tok != "" {
			r.Header.Set("Authorization", "Bearer "+tok)
		}
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		if session != "" {
			r.Header.Set("Mcp-Session-Id", session)
		}
		// A GET opens an SSE stream that lasts as long as its request.
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		r = r.WithContext(ctx)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code >= 500 {
			t.Fatalf("%s %s: %d %s", method, path, w.Code, w.Body)
		}
		authed := tok == "tok-alice" || tok == "tok-bob"
		if path == "/mcp" && !authed && w.Code/100 == 2 {
			t.Fatalf("%s /mcp answered %d without a valid token", method, w.Code)
		}
	})
}

func validMethod(m string) bool {
	if m == "" || len(m) > 16 {
		return false
	}
	for _, c := range m {
		if c < 'A' || c > 'Z' {
			return false
		}
	}
	return true
}

type body struct{ *bytes.Reader }

func (body) Close() error { return nil }

func httpBody(s string) body { return body{bytes.NewReader([]byte(s))} }
