package bench

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"
)

// httpfair.go measures fairness between principals over bridge serve: one
// principal's calls alone and while another runs loops at its call cap,
// each in a session of its own. The unloaded and loaded samples alternate
// in blocks, so both percentiles see the same machine over the same minute
// (other work on a shared machine would otherwise land in one of them
// only); the ratio is still loaded over unloaded, from one run.

// fairBlocks is how many alternating unloaded/loaded blocks a fairness
// figure takes.
const fairBlocks = 5

// floodSettle is how long the flood runs before a loaded block: its
// sessions are warm, so its loops are at full speed by then.
const floodSettle = 300 * time.Millisecond

// cpuCell is the CPU-bound cell of the CPU fairness figure: about 10 ms
// of one core's Python, every millisecond of it in the sandbox.
const cpuCell = "sum(range(1_000_000))"

// fairness samples probe running code alone and while every flood client
// runs code in a loop, per samples in each condition, in fairBlocks
// alternating blocks. floodRate is the flood's completed calls per second
// while the probe was sampled.
func fairness(ctx context.Context, probe *httpProc, flood []*httpProc, code string, per int) (alone, loaded []time.Duration, floodRate float64, err error) {
	n := max(1, per/fairBlocks)
	var floodCalls int64
	var floodTime time.Duration
	for range fairBlocks {
		a, err := sample(n, func() error { return probe.run(ctx, code) })
		if err != nil {
			return nil, nil, 0, err
		}
		alone = append(alone, a...)
		var l []time.Duration
		calls, took, err := flooding(ctx, flood, code, func() error {
			var err error
			l, err = sample(n, func() error { return probe.run(ctx, code) })
			return err
		})
		if err != nil {
			return nil, nil, 0, err
		}
		loaded = append(loaded, l...)
		floodCalls += calls
		floodTime += took
	}
	return alone, loaded, float64(floodCalls) / floodTime.Seconds(), nil
}

// flooding runs code in a loop on every flood client, lets it settle, runs
// f, then stops the loops and waits for them. It returns the flood's calls
// completed while f ran and how long f took.
func flooding(ctx context.Context, flood []*httpProc, code string, f func() error) (int64, time.Duration, error) {
	fctx, stop := context.WithCancel(ctx)
	var counting atomic.Bool
	var calls atomic.Int64
	done := make(chan struct{}, len(flood))
	for _, h := range flood {
		go func() {
			defer func() { done <- struct{}{} }()
			for fctx.Err() == nil {
				if h.run(fctx, code) == nil && counting.Load() {
					calls.Add(1)
				}
			}
		}()
	}
	time.Sleep(floodSettle)
	counting.Store(true)
	start := time.Now()
	err := f()
	took := time.Since(start)
	counting.Store(false)
	stop()
	for range flood {
		<-done
	}
	return calls.Load(), took, err
}

// fairnessFigures adds the fairness figures: probe's warm print(1) p95
// alone and while flood runs print(1) loops at its cap (target: at most
// 2×), the flood's call rate meanwhile, and the p50 of a CPU-bound cell
// alone and while flood runs the same cell in every session.
func fairnessFigures(ctx context.Context, o Options, r *Report, probe *httpProc, flood []*httpProc) error {
	// The p95s need more samples than the per-client figures: 20 calls
	// make the 95th percentile their second slowest.
	per := max(200, o.Samples)
	if o.Quick {
		per = 50
	}
	alone, loaded, rate, err := fairness(ctx, probe, flood, "print(1)", per)
	if err != nil {
		return err
	}
	a95, l95 := ms(pct(alone, 95)), ms(pct(loaded, 95))
	r.add(Figure{ID: "http.fairness.p95", Name: fmt.Sprintf("HTTP: one principal's warm p95 while another floods print(1) loops up to its cap (%d)", len(flood)),
		Value: l95, Unit: "ms", Baseline: "the same principal's warm p95, unloaded (blocks alternating with the loaded ones)", BaseVal: a95, Samples: len(loaded),
		Target: "<= 2x baseline"}, l95 <= 2*a95)
	probeRate := float64(len(alone)) / sum(alone).Seconds()
	r.add(Figure{ID: "http.fairness.flood_rate", Name: "HTTP: the flooder's print(1) calls/s while the probe was measured",
		Value: rate, Unit: "calls/s", Baseline: "the probe's own calls/s alone", BaseVal: probeRate, Samples: len(loaded)}, true)

	cells := 20
	if o.Quick {
		cells = 10
	}
	alone, loaded, _, err = fairness(ctx, probe, flood, cpuCell, cells)
	if err != nil {
		return err
	}
	a50, l50 := ms(pct(alone, 50)), ms(pct(loaded, 50))
	r.add(Figure{ID: "http.fairness.cpu.p50", Name: fmt.Sprintf("HTTP: one principal's CPU-bound cell (%s) p50 while another runs it in %d sessions", cpuCell, len(flood)),
		Value: l50, Unit: "ms", Baseline: "the same cell's p50, unloaded", BaseVal: a50, Samples: len(loaded)}, true)
	return nil
}

func sum(d []time.Duration) time.Duration {
	var t time.Duration
	for _, x := range d {
		t += x
	}
	return t
}
