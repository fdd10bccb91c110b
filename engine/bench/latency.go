package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os/exec"
	"time"
)

// latencyFigures times run_python of print(1) over MCP stdio: warm calls,
// the first call of a new session with the spare ready, and a cold bridge
// process, each against a fresh container per call (the reference's way).
func latencyFigures(ctx context.Context, o Options, r *Report) error {
	p, stop, err := startBridge(ctx, o, nil)
	if err != nil {
		return err
	}
	defer stop()
	// Warm-up: the first call adopts the spare.
	if _, err := p.run(ctx, "print(1)", "default"); err != nil {
		return err
	}
	warm, err := sample(o.Samples, func() error { _, err := p.run(ctx, "print(1)", "default"); return err })
	if err != nil {
		return err
	}
	fresh, err := sample(max(5, o.Samples/5), func() error {
		out, err := exec.CommandContext(ctx, o.BaselineArgv[0], o.BaselineArgv[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("bench: baseline container: %w: %s", err, out)
		}
		return nil
	})
	if err != nil {
		return err
	}
	base := ms(pct(fresh, 50))
	const freshName = "fresh container per call (reference), p50"
	w50, w95 := ms(pct(warm, 50)), ms(pct(warm, 95))
	r.add(Figure{ID: "latency.warm.p50", Name: "warm run_python print(1) p50 (MCP stdio)", Value: w50, Unit: "ms",
		Baseline: freshName, BaseVal: base, RatioIs: Faster, Samples: len(warm), Target: "<= 5 ms; >= 25x faster"},
		w50 <= 5 && base/w50 >= 25)
	r.add(Figure{ID: "latency.warm.p95", Name: "warm run_python print(1) p95 (MCP stdio)", Value: w95, Unit: "ms",
		Baseline: "fresh container per call, p95", BaseVal: ms(pct(fresh, 95)), RatioIs: Faster, Samples: len(warm),
		Target: "<= 20 ms"}, w95 <= 20)

	// A new session with the spare ready: wait for the spare, then call.
	var spare []time.Duration
	for i := range max(3, o.Samples/20) {
		time.Sleep(1500 * time.Millisecond)
		start := time.Now()
		if _, err := p.run(ctx, "print(1)", fmt.Sprintf("bench-spare-%d", i)); err != nil {
			return err
		}
		spare = append(spare, time.Since(start))
	}
	s50 := ms(pct(spare, 50))
	r.add(Figure{ID: "latency.spare.p50", Name: "first call of a new session, spare ready, p50", Value: s50, Unit: "ms",
		Baseline: freshName, BaseVal: base, RatioIs: Faster, Samples: len(spare), Target: "<= 10 ms"}, s50 <= 10)

	// Cold: a new bridge process answering its first call (bridge exec),
	// timed to the result line; the process's teardown is not counted.
	env, rm, err := isolated(o, nil)
	if err != nil {
		return err
	}
	defer rm()
	var cold []time.Duration
	for range max(3, o.Samples/20) {
		d, err := timeToFirstLine(ctx, o.Bridge, env)
		if err != nil {
			return err
		}
		cold = append(cold, d)
	}
	c50 := ms(pct(cold, 50))
	r.add(Figure{ID: "latency.cold.p50", Name: "cold session: new bridge process to first result (bridge exec), p50", Value: c50,
		Unit: "ms", Baseline: freshName, BaseVal: base, RatioIs: Faster, Samples: len(cold), Target: "<= 300 ms"}, c50 <= 300)
	return nil
}

// timeToFirstLine runs `bridge exec print(1)` and returns the time until it
// printed its result line; the process's teardown is waited for but not
// counted.
func timeToFirstLine(ctx context.Context, bin string, env []string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, bin, "exec", "print(1)")
	cmd.Env = env
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	elapsed := time.Since(start)
	_, _ = io.Copy(io.Discard, out)
	werr := cmd.Wait()
	if err != nil || line != "1\n" || werr != nil {
		return 0, fmt.Errorf("bench: bridge exec printed %q: %v %v", line, err, werr)
	}
	return elapsed, nil
}
