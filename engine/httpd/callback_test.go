package httpd

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestHandlerCallback: /oauth/callback takes a browser's GET without a
// bearer token and from a foreign Origin, and refuses a body, a large
// header and a flood, each with Connection: close; without an endpoint it
// answers 404.
func TestHandlerCallback(t *testing.T) {
	cfg, _ := testConfig(t, true)
	var got int
	page := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got++
		fmt.Fprint(w, "page")
	})
	cfg.Callback = func() http.Handler { return page }
	h := Handler(cfg)
	w := do(h, http.MethodGet, "/oauth/callback?state=s&code=c", "", header("Origin", "https://auth.example.com"))
	if w.Code != http.StatusOK || w.Body.String() != "page" {
		t.Errorf("browser GET: %d %q", w.Code, w.Body.String())
	}
	for _, tc := range []struct {
		name string
		body string
		opts []reqOpt
		want int
	}{
		{"body", "x=1", nil, http.StatusBadRequest},
		{"large header", "", []reqOpt{header("Cookie", strings.Repeat("c", 17<<10))}, http.StatusRequestHeaderFieldsTooLarge},
	} {
		w := do(h, http.MethodGet, "/oauth/callback?state=s", tc.body, tc.opts...)
		if w.Code != tc.want || w.Header().Get("Connection") != "close" {
			t.Errorf("%s: %d (Connection %q), want %d and close", tc.name, w.Code, w.Header().Get("Connection"), tc.want)
		}
	}
	// The burst, then 429 until the rate refills.
	limited := 0
	for range callbackBurst + 5 {
		if do(h, http.MethodGet, "/oauth/callback?state=s", "").Code == http.StatusTooManyRequests {
			limited++
		}
	}
	if limited == 0 {
		t.Error("no 429 after a burst of callbacks")
	}
	if got > callbackBurst+1 {
		t.Errorf("the endpoint ran %d times, over the burst", got)
	}
	// The other endpoints keep their auth.
	if w := do(h, http.MethodPost, "/mcp", initBody); w.Code != http.StatusUnauthorized {
		t.Errorf("/mcp without a token: %d", w.Code)
	}
	for _, cb := range []func() http.Handler{nil, func() http.Handler { return nil }} {
		cfg.Callback = cb
		if w := do(Handler(cfg), http.MethodGet, "/oauth/callback?state=s", ""); w.Code != http.StatusNotFound {
			t.Errorf("no endpoint: %d", w.Code)
		}
	}
}
