package bench

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// kubeFigures measures the kubernetes backend against the container backend
// in one run: a new session's first call with the warm pool ready, a cold
// pod (a bridge with no warm pool answering its first call), and warm
// print(1) over attach against the same over the local link. It needs a
// cluster (KUBECONFIG, and MCP_BRIDGE_K8S_NODE_NAME on one without a
// scheduler, in the environment), so it runs only when --groups names it.
func kubeFigures(ctx context.Context, o Options, r *Report) error {
	if !slices.Contains(o.Groups, "kubernetes") {
		r.skip("kube", "Kubernetes figures", "needs a cluster: run with --groups kubernetes")
		fmt.Fprintln(o.Log, "bench: kubernetes: skipped (needs a cluster: --groups kubernetes)")
		return nil
	}
	local, stopLocal, err := startBridge(ctx, o, nil)
	if err != nil {
		return err
	}
	defer stopLocal()
	if _, err := local.run(ctx, "print(1)", "default"); err != nil {
		return err
	}
	localWarm, err := sample(o.Samples, func() error { _, err := local.run(ctx, "print(1)", "default"); return err })
	if err != nil {
		return err
	}
	ko := o
	ko.Env = append(append([]string{}, o.Env...), "MCP_BRIDGE_RUNTIME=kubernetes")
	p, stop, err := startBridge(ctx, ko, nil)
	if err != nil {
		return err
	}
	defer stop()
	if _, err := p.run(ctx, "print(1)", "default"); err != nil {
		return fmt.Errorf("bench: kubernetes: %w", err)
	}
	warm, err := sample(o.Samples, func() error { _, err := p.run(ctx, "print(1)", "default"); return err })
	if err != nil {
		return err
	}
	l50, w50 := ms(pct(localWarm, 50)), ms(pct(warm, 50))
	r.add(Figure{ID: "kube.warm.p50", Name: "warm run_python print(1) p50 over a pod's attach", Value: w50, Unit: "ms",
		Baseline: "warm print(1) p50 over the local container link, same run", BaseVal: l50, Samples: len(warm)}, true)

	// Two new sessions at once, the spare and the warm pool ready: the first
	// takes the spare (a booted sandbox), the second a pool pod (started,
	// not yet attached or booted).
	var spare, first []time.Duration
	for i := range max(3, o.Samples/20) {
		time.Sleep(3 * time.Second) // the spare and the pool refill
		for _, d := range []*[]time.Duration{&spare, &first} {
			start := time.Now()
			if _, err := p.run(ctx, "print(1)", fmt.Sprintf("bench-pool-%d-%d", i, len(*d))); err != nil {
				return err
			}
			*d = append(*d, time.Since(start))
		}
	}
	s50, f50 := ms(pct(spare, 50)), ms(pct(first, 50))
	r.add(Figure{ID: "kube.pool.p50", Name: "first call of a new session from the warm pool (a started pod, attached and booted now), p50", Value: f50, Unit: "ms",
		Baseline: "warm print(1) p50 over attach", BaseVal: w50, Samples: len(first), Target: "<= 250 ms"}, f50 <= 250)
	r.add(Figure{ID: "kube.spare.p50", Name: "first call of a new session with the spare ready (a booted pod), p50", Value: s50, Unit: "ms",
		Baseline: "warm print(1) p50 over attach", BaseVal: w50, Samples: len(spare)}, true)

	// Cold: a new bridge with no warm pool answering its first call.
	env, rm, err := isolated(ko, nil)
	if err != nil {
		return err
	}
	defer rm()
	env = append(env, "MCP_BRIDGE_K8S_WARM_POOL=0")
	var cold []time.Duration
	for range max(3, o.Samples/20) {
		d, err := timeToFirstLine(ctx, o.Bridge, env)
		if err != nil {
			return err
		}
		cold = append(cold, d)
	}
	c50 := ms(pct(cold, 50))
	r.add(Figure{ID: "kube.cold.p50", Name: "cold pod: new bridge process, no warm pool, to first result (bridge exec), p50", Value: c50,
		Unit: "ms", Baseline: "first call of a new session from the warm pool, p50", BaseVal: f50, Samples: len(cold)}, true)
	return nil
}
