package httpd

import (
	"context"
	"maps"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
)

// endpoints are every path of the mux, each with the status a plain
// request from a trusted page gets under --insecure-no-auth.
var endpoints = []struct {
	method, path string
	ok           int
}{
	{"POST", "/mcp", 200},
	{"GET", "/metrics", 200},
	{"GET", "/healthz", 200},
	{"GET", "/readyz", 200},
	{"GET", "/.well-known/oauth-protected-resource", 404},
	{"GET", "/.well-known/oauth-protected-resource/mcp", 404},
	{"GET", "/.well-known/oauth-authorization-server", 404},
	{"GET", "/.well-known/oauth-authorization-server/mcp", 404},
}

// noAuthHandler is testHandler under --insecure-no-auth.
func noAuthHandler(t *testing.T) http.Handler {
	cfg, _ := testConfig(t, true)
	cfg.Tokens = nil
	return Handler(cfg)
}

// TestHandlerOriginEveryEndpoint: a page from a foreign Origin gets 403
// from every endpoint, /metrics under --insecure-no-auth included; a
// trusted Origin gets the endpoint's answer.
func TestHandlerOriginEveryEndpoint(t *testing.T) {
	h := noAuthHandler(t)
	for _, e := range endpoints {
		for _, c := range []struct {
			origin string
			want   int
		}{
			{"http://evil.example.com", http.StatusForbidden},
			{"http://localhost:3000", e.ok},
			{"https://bridge.example.com", e.ok},
		} {
			t.Run(e.path+" "+c.origin, func(t *testing.T) {
				w := do(h, e.method, e.path, initBody, header("Origin", c.origin))
				if got := w.Code; got != c.want {
					t.Errorf("status = %d, want %d: %.200s", got, c.want, w.Body)
				}
			})
		}
	}
}

// TestHandlerHostEveryEndpoint: on a loopback connection, a Host that is
// not loopback (a domain rebound to 127.0.0.1) gets 403 from every
// endpoint, as mcp-go answers it on /mcp; on another address the Host is
// not checked.
func TestHandlerHostEveryEndpoint(t *testing.T) {
	h := noAuthHandler(t)
	on := func(local string) reqOpt {
		return func(r *http.Request) {
			addr, _ := net.ResolveTCPAddr("tcp", local)
			*r = *r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, addr))
		}
	}
	for _, e := range endpoints {
		for _, c := range []struct {
			local, host string
			want        int
		}{
			{"127.0.0.1:8080", "evil.example.com:8080", http.StatusForbidden},
			{"[::1]:8080", "evil.example.com", http.StatusForbidden},
			{"127.0.0.1:8080", "localhost:8080", e.ok},
			{"127.0.0.1:8080", "127.0.0.1:8080", e.ok},
			{"10.0.0.5:8080", "bridge.example.com", e.ok},
		} {
			t.Run(e.path+" "+c.local+" "+c.host, func(t *testing.T) {
				w := do(h, e.method, e.path, initBody, on(c.local), func(r *http.Request) { r.Host = c.host })
				if got := w.Code; got != c.want {
					t.Errorf("status = %d, want %d: %.200s", got, c.want, w.Body)
				}
			})
		}
	}
}

// TestHandlerMetricsPrincipal: with --metrics-principal only those
// principals read /metrics, any other gets 403 naming the flag; without it
// every principal does.
func TestHandlerMetricsPrincipal(t *testing.T) {
	for _, c := range []struct {
		name       string
		principals []string
		noAuth     bool
		opts       []reqOpt
		want       int
	}{
		{"no flag, alice", nil, false, []reqOpt{token("tok-alice")}, 200},
		{"no flag, bob", nil, false, []reqOpt{token("tok-bob")}, 200},
		{"alice's, alice", []string{"alice"}, false, []reqOpt{token("tok-alice")}, 200},
		{"alice's, bob", []string{"alice"}, false, []reqOpt{token("tok-bob")}, 403},
		{"alice's, no token", []string{"alice"}, false, nil, 401},
		{"alice's and bob's, bob", []string{"alice", "bob"}, false, []reqOpt{token("tok-bob")}, 200},
		{"no auth, no flag", nil, true, nil, 200},
		{"no auth, anonymous", []string{Anonymous}, true, nil, 200},
		{"no auth, alice's", []string{"alice"}, true, nil, 403},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, _ := testConfig(t, true)
			cfg.MetricsPrincipals = c.principals
			if c.noAuth {
				cfg.Tokens = nil
			}
			w := do(Handler(cfg), "GET", "/metrics", "", c.opts...)
			if got := w.Code; got != c.want {
				t.Fatalf("status = %d, want %d: %.200s", got, c.want, w.Body)
			}
			if c.want == 403 {
				if body := w.Body.String(); !strings.Contains(body, "--metrics-principal") || strings.Count(body, "\n") != 1 {
					t.Errorf("refusal = %q, want one line naming --metrics-principal", body)
				}
			}
		})
	}
}

// TestHandlerRevokedTokens: once the tokens file is emptied, every
// request that needs a token gets 401.
func TestHandlerRevokedTokens(t *testing.T) {
	cfg, p := testConfig(t, true)
	h := Handler(cfg)
	if got := do(h, "POST", "/mcp", initBody, token("tok-alice")).Code; got != 200 {
		t.Fatalf("before: %d, want 200", got)
	}
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.Tokens.Check()
	for _, c := range []struct{ method, path, token string }{
		{"POST", "/mcp", "tok-alice"},
		{"POST", "/mcp", "tok-bob"},
		{"GET", "/metrics", "tok-alice"},
	} {
		if got := do(h, c.method, c.path, initBody, token(c.token)).Code; got != http.StatusUnauthorized {
			t.Errorf("%s %s with %s after the file was emptied: %d, want 401", c.method, c.path, c.token, got)
		}
	}
}

// TestHandlerCountSkipsProbes: bridge_http_requests_total counts requests
// but the /healthz and /readyz probes (a /readyz 503 while starting is no
// server error).
func TestHandlerCountSkipsProbes(t *testing.T) {
	cfg, _ := testConfig(t, false)
	h := Handler(cfg)
	for _, r := range []struct{ method, path string }{
		{"GET", "/healthz"}, {"GET", "/readyz"}, {"GET", "/readyz"}, {"POST", "/mcp"}, {"GET", "/nope"},
	} {
		do(h, r.method, r.path, "")
	}
	got := httpCounts(t, cfg.Metrics)
	want := map[string]float64{"4xx": 2} // /mcp without a token, /nope
	if !maps.Equal(got, want) {
		t.Errorf("bridge_http_requests_total = %v, want %v", got, want)
	}
}

// httpCounts is bridge_http_requests_total by code class.
func httpCounts(t *testing.T, m *Metrics) map[string]float64 {
	t.Helper()
	families, err := m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != "bridge_http_requests_total" {
			continue
		}
		for _, s := range f.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "code" {
					out[l.GetValue()] = s.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// TestHandlerStandby: a replica standing by answers /readyz 503 "standby"
// and every /mcp request 503 before auth (no token needed to learn it);
// /healthz and /metrics answer as on the leader; draining wins over
// standing by at /readyz.
func TestHandlerStandby(t *testing.T) {
	cfg, _ := testConfig(t, true)
	cfg.Standby = func() bool { return true }
	h := Handler(cfg)
	for _, c := range []struct {
		method, path string
		want         int
		body         string
	}{
		{"GET", "/readyz", http.StatusServiceUnavailable, "standby\n"},
		{"POST", "/mcp", http.StatusServiceUnavailable, "this bridge replica is the standby"},
		{"GET", "/healthz", http.StatusOK, "ok\n"},
	} {
		w := do(h, c.method, c.path, initBody)
		if got := w.Code; got != c.want || !strings.Contains(w.Body.String(), c.body) {
			t.Errorf("%s %s = %d %q, want %d with %q", c.method, c.path, got, w.Body, c.want, c.body)
		}
	}
	cfg.Drain.Start()
	if w := do(h, "GET", "/readyz", ""); w.Body.String() != "not ready\n" {
		t.Errorf("/readyz draining on a standby: %q, want not ready", w.Body)
	}
}
