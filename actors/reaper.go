package actors

import (
	"context"
	"time"
)

// Reaper ticks the sessions manager once a second, so idle sessions and the
// spare end at most a few seconds late (SES-3); the sessions decide
// themselves. Shortly after start it sweeps containers left by dead bridges
// (CTR-4); the delay keeps the sweep's CLI calls off the first container
// start, which shares the same cores.
type Reaper struct {
	Sessions   *Sessions
	Sweep      func(ctx context.Context)
	SweepAfter time.Duration
	Every      time.Duration
}

func (r *Reaper) String() string { return "reaper" }

// Serve runs until ctx ends.
func (r *Reaper) Serve(ctx context.Context) error {
	every := r.Every
	if every <= 0 {
		every = time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var sweep <-chan time.Time
	if r.Sweep != nil {
		st := time.NewTimer(r.SweepAfter)
		defer st.Stop()
		sweep = st.C
	}
	for {
		select {
		case <-sweep:
			r.Sweep(ctx)
		case now := <-t.C:
			r.Sessions.Tick(now)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
