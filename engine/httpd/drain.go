package httpd

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// Drain tracks the MCP requests in flight and refuses new ones once
// draining has started: the listener stays open, so /readyz can answer 503
// and a load balancer takes the replica out while its calls finish.
type Drain struct {
	mu       sync.Mutex
	draining bool
	n        int
}

// Start refuses every request from now on.
func (d *Drain) Start() {
	d.mu.Lock()
	d.draining = true
	d.mu.Unlock()
}

// Draining reports whether Start was called.
func (d *Drain) Draining() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.draining
}

// InFlight is the number of requests being served.
func (d *Drain) InFlight() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.n
}

// Wait returns nil once no request is in flight, or ctx's error.
func (d *Drain) Wait(ctx context.Context) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for d.InFlight() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	return nil
}

// wrap counts next's requests, except the standalone SSE streams (GET),
// which last until they are closed and carry no call; once draining it
// answers 503.
func (d *Drain) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		if d.draining {
			d.mu.Unlock()
			closing(w)
			w.Header().Set("Retry-After", "1")
			writeRPCError(w, http.StatusServiceUnavailable, -32000, "the bridge is shutting down; retry with another instance or once it is back")
			return
		}
		counted := r.Method != http.MethodGet
		if counted {
			d.n++
		}
		d.mu.Unlock()
		if counted {
			defer func() {
				d.mu.Lock()
				d.n--
				d.mu.Unlock()
			}()
		}
		next.ServeHTTP(w, r)
	})
}
