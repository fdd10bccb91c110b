package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// firstCallFigures times the everything server's first call in a bridge
// that has its catalog (so nothing starts it before the call): the start
// of the server, its initialize and tools/list, and get_sum. A legacy
// server's start must not get slower for the modern era's sake (issue 38),
// so with --previous it is this build against the previous one, in turns
// within one run.
func firstCallFigures(ctx context.Context, o Options, r *Report) error {
	const id, name = "latency.everything.first.previous.p50", "the everything server's first call (its start, initialize, tools/list and get_sum), this build against the previous one, p50"
	if o.Previous == "" {
		return nil
	}
	bin := filepath.Join(o.NPMDir, "node_modules", ".bin", "mcp-server-everything")
	if _, err := os.Stat(bin); err != nil {
		r.skip(id, name, fmt.Sprintf("mcp-server-everything is not installed in %s (--npm-dir)", o.NPMDir))
		return nil
	}
	servers := map[string]any{"everything": map[string]any{"command": bin}}
	builds := []string{o.Bridge, o.Previous}
	envs := make([][]string, len(builds))
	for i := range builds {
		env, rm, err := isolated(o, servers)
		if err != nil {
			return err
		}
		defer rm()
		envs[i] = env
		// The first bridge on this state writes the catalog.
		if _, err := firstCall(ctx, builds[i], env); err != nil {
			return err
		}
	}
	times := make([][]time.Duration, len(builds))
	for n := range max(5, o.Samples/10) {
		for k := range builds {
			i := (n + k) % len(builds) // alternate which build goes first
			d, err := firstCall(ctx, builds[i], envs[i])
			if err != nil {
				return err
			}
			times[i] = append(times[i], d)
		}
	}
	this, prev := ms(pct(times[0], 50)), ms(pct(times[1], 50))
	r.add(Figure{ID: id, Name: name, Value: this, Unit: "ms",
		Baseline: "the previous build (--previous), p50, in turns with this build's", BaseVal: prev, RatioIs: Faster,
		Samples: len(times[0]), Target: "<= 1.1x the previous build"}, this <= 1.1*prev)
	return nil
}

// firstCall starts bridge on env, warms its session, and times the first
// call of the everything server.
func firstCall(ctx context.Context, bridge string, env []string) (time.Duration, error) {
	p, err := startMCP(ctx, []string{bridge, "run"}, env)
	if err != nil {
		return 0, err
	}
	defer p.close()
	if _, err := p.run(ctx, "print(1)", "default"); err != nil {
		return 0, err
	}
	start := time.Now()
	if _, err := p.runWith(ctx, "await mcp_everything.get_sum(a=1, b=2)", "everything"); err != nil {
		return 0, fmt.Errorf("bench: the everything server's first call: %w", err)
	}
	return time.Since(start), nil
}
