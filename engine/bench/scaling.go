package bench

import (
	"context"
	"fmt"
	"runtime"
	"slices"
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
	// As before the one-session samples: the spare that replaces the last
	// adopted one starts up to 1.1 s after its call, and its container
	// start (the runtime CLI's CPU) would land in the first burst.
	time.Sleep(2 * time.Second)
	boxes := boxCgroups(ctx, p, names)
	var all []time.Duration
	var split cpuSplit
	for range max(3, o.Samples/50) {
		errs := make([]error, len(names))
		each := make([]time.Duration, len(names))
		before := snapCPU(p.pid, boxes)
		start := time.Now()
		var wg sync.WaitGroup
		for i, name := range names {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = p.run(ctx, numpyTask, name)
				each[i] = time.Since(start)
			}()
		}
		wg.Wait()
		all = append(all, time.Since(start))
		split = split.add(before, snapCPU(p.pid, boxes))
		slices.Sort(each)
		fmt.Fprintf(o.Log, "bench: scaling: %d sessions at once: %.1f ms; each session's call ended at %v\n",
			len(names), ms(all[len(all)-1]), each)
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
	}
	s50, a50 := ms(pct(single, 50)), ms(pct(all, 50))
	r.add(Figure{ID: "scaling.sessions8", Name: fmt.Sprintf("%d sessions at once, one short numpy task each: wall time, p50", scalingSessions),
		Value: a50, Unit: "ms", Baseline: "the same task in one session, p50", BaseVal: s50, Samples: len(all),
		Target: "<= 5x baseline"}, a50 <= 5*s50)
	if err := scalingCPUFigures(ctx, o, r, p, names[0], boxes, split, all); err != nil {
		return err
	}
	eight, err := steadyRSS(p.pid, n)
	if err != nil {
		return err
	}
	r.add(Figure{ID: "scaling.rss8", Name: fmt.Sprintf("bridge RSS with %d live sessions", scalingSessions), Value: eight, Unit: "MiB",
		Baseline: "bridge RSS with one live session", BaseVal: one, Samples: n}, true)
	return nil
}

// scalingCPUFigures splits the bursts' CPU time (split, over the bursts
// all): the containers' per task against one task alone (measured here, in
// session alone), the bridge's and the bench client's per burst, and the
// rest of the machine's busy time per burst.
func scalingCPUFigures(ctx context.Context, o Options, r *Report, p *proc, alone string, boxes []string, split cpuSplit, all []time.Duration) error {
	var wall time.Duration
	for _, d := range all {
		wall += d
	}
	bursts := float64(len(all))
	cores := float64(runtime.NumCPU())
	avail := ms(wall) * cores / bursts
	perBurst := func(d time.Duration) float64 { return ms(d) / bursts }
	const burstName = "CPU time the cores offered during one burst (its wall time x cores)"
	if len(boxes) > 0 {
		var one cpuSplit
		n := max(5, o.Samples/20)
		for range n {
			before := snapCPU(p.pid, boxes[:1])
			if _, err := p.run(ctx, numpyTask, alone); err != nil {
				return err
			}
			one = one.add(before, snapCPU(p.pid, boxes[:1]))
		}
		r.add(Figure{ID: "scaling.cpu.box", Name: fmt.Sprintf("container CPU time per task during the %d-session bursts", scalingSessions),
			Value: ms(split.boxes) / bursts / scalingSessions, Unit: "ms", Baseline: "the same task's container CPU time alone",
			BaseVal: ms(one.boxes) / float64(n), Samples: len(all)}, true)
	}
	r.add(Figure{ID: "scaling.cpu.bridge", Name: "bridge CPU time per burst", Value: perBurst(split.bridge), Unit: "ms",
		Baseline: burstName, BaseVal: avail, Samples: len(all)}, true)
	r.add(Figure{ID: "scaling.cpu.bench", Name: "bench client CPU time per burst (the MCP client sending the calls)", Value: perBurst(split.bench),
		Unit: "ms", Baseline: burstName, BaseVal: avail, Samples: len(all)}, true)
	r.add(Figure{ID: "scaling.cpu.other", Name: "other busy CPU time per burst (the runtime's processes, the rest of the machine)",
		Value: perBurst(split.other), Unit: "ms", Baseline: burstName, BaseVal: avail, Samples: len(all)}, true)
	fmt.Fprintf(o.Log, "bench: scaling: CPU per burst: containers %.1f ms, bridge %.1f ms, bench %.1f ms, other %.1f ms; busy %.1f of %.1f ms\n",
		perBurst(split.boxes), perBurst(split.bridge), perBurst(split.bench), perBurst(split.other), perBurst(split.busy), avail)
	return nil
}
