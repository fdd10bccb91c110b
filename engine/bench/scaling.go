package bench

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// scalingSessions is how many sessions the scaling figure runs at once (the
// default MCP_BRIDGE_MAX_SESSIONS).
const scalingSessions = 8

// numpyTask is the short task each session runs in the scaling figure.
const numpyTask = "import numpy as np\na = np.random.default_rng(1).random((300, 300))\nprint(round(float((a @ a).trace()), 3) > 0)"

// scalingFigures measures one bridge with scalingSessions live sessions:
// the wall time of one short numpy task in every session at once against
// the same task in one session, and the bridge's RSS with every session
// live against its RSS with one.
func scalingFigures(ctx context.Context, o Options, r *Report) error {
	p, stop, err := startBridge(ctx, o, nil)
	if err != nil {
		return err
	}
	defer stop()
	names := make([]string, scalingSessions)
	for i := range names {
		names[i] = fmt.Sprintf("scale-%d", i)
	}
	// The first session imports numpy; its RSS is the one-session baseline.
	if _, err := p.run(ctx, numpyTask, names[0]); err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // the next spare starts after the adopted one
	n := max(5, o.Samples/20)
	one, err := steadyRSS(p.pid, n)
	if err != nil {
		return err
	}
	single, err := sample(max(5, o.Samples/20), func() error { _, err := p.run(ctx, numpyTask, names[0]); return err })
	if err != nil {
		return err
	}
	for _, name := range names[1:] {
		if _, err := p.run(ctx, numpyTask, name); err != nil {
			return err
		}
	}
	var all []time.Duration
	for range max(3, o.Samples/50) {
		errs := make([]error, len(names))
		start := time.Now()
		var wg sync.WaitGroup
		for i, name := range names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = p.run(ctx, numpyTask, name)
			}()
		}
		wg.Wait()
		all = append(all, time.Since(start))
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
	}
	s50 := ms(pct(single, 50))
	r.add(Figure{ID: "scaling.sessions8", Name: fmt.Sprintf("%d sessions at once, one short numpy task each: wall time, p50", scalingSessions),
		Value: ms(pct(all, 50)), Unit: "ms", Baseline: "the same task in one session, p50", BaseVal: s50, Samples: len(all)}, true)
	eight, err := steadyRSS(p.pid, n)
	if err != nil {
		return err
	}
	r.add(Figure{ID: "scaling.rss8", Name: fmt.Sprintf("bridge RSS with %d live sessions", scalingSessions), Value: eight, Unit: "MiB",
		Baseline: "bridge RSS with one live session", BaseVal: one, Samples: n}, true)
	return nil
}
