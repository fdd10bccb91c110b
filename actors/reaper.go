package actors

import (
	"context"
	"time"
)

// Reaper ticks the sessions manager once a second, so idle sessions and the
// spare end at most a few seconds late (SES-3); the sessions decide
// themselves. At start it sweeps containers left by dead bridges (CTR-4).
type Reaper struct {
	Sessions *Sessions
	Sweep    func(ctx context.Context)
	Every    time.Duration
}

func (r *Reaper) String() string { return "reaper" }

// Serve runs until ctx ends.
func (r *Reaper) Serve(ctx context.Context) error {
	if r.Sweep != nil {
		r.Sweep(ctx)
	}
	every := r.Every
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case now := <-t.C:
			r.Sessions.Tick(now)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
