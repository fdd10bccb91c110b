package httpd

import (
	"net/http"

	"golang.org/x/time/rate"
)

// CallbackPath is where browsers come back after a principal's own
// upstream sign-in (engine/oauth.Callbacks).
const CallbackPath = "/oauth/callback"

// Bounds of the sign-in callback, which takes requests without a bearer
// token: a browser redirect is one small GET.
const (
	callbackRate   = 5  // requests per second, across all callers
	callbackBurst  = 20 // requests at once
	callbackHeader = 16 << 10
)

// callback bounds the sign-in endpoint, which is exempt from the bearer
// token and the Origin check (a browser arriving from the authorization
// server carries neither ours): a shared rate limit, a cap on the header
// size, no body, and Connection: close on every refusal. The state in the
// query is the credential; the endpoint checks it.
func (cfg Config) callback() http.Handler {
	limit := rate.NewLimiter(callbackRate, callbackBurst)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var next http.Handler
		if cfg.Callback != nil {
			next = cfg.Callback()
		}
		switch {
		case next == nil:
			closing(w)
			http.Error(w, "not found: this bridge takes no sign-in callbacks (no tokens file, or no usable --public-url)", http.StatusNotFound)
		case !limit.Allow():
			closing(w)
			w.Header().Set("Retry-After", "1")
			http.Error(w, "too many sign-in callbacks at once; reload the page in a moment", http.StatusTooManyRequests)
		case headerSize(r) > callbackHeader:
			closing(w)
			http.Error(w, "request header too large for a sign-in callback", http.StatusRequestHeaderFieldsTooLarge)
		case r.ContentLength != 0 || len(r.TransferEncoding) > 0:
			closing(w)
			http.Error(w, "a sign-in callback carries no body", http.StatusBadRequest)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// headerSize is the size of r's header lines and request URI, roughly as
// sent.
func headerSize(r *http.Request) int {
	n := len(r.RequestURI) + len(r.Host)
	for k, vs := range r.Header {
		for _, v := range vs {
			n += len(k) + len(v) + 4
		}
	}
	return n
}
