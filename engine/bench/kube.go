package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"time"
)

// kubeFigures measures the kubernetes backend against the container backend
// in one run: a new session's first call with the warm pool ready, a cold
// pod (a bridge with no warm pool answering its first call), and warm
// print(1) over attach against the same over the local link; and, as the
// latency and proxy groups do for containers, against their own floors:
// warm print(1) against an attach's round trip, the cold pod against a
// fresh pod per call, a proxied echo against its parts. It needs a
// cluster (KUBECONFIG, and MCP_BRIDGE_K8S_NODE_NAME on one without a
// scheduler, in the environment), so it runs only when --groups names it.
func kubeFigures(ctx context.Context, o Options, r *Report) error {
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
	p, stop, err := startBridge(ctx, ko, map[string]any{"bench": benchServer(o, 10, false)})
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
	floor, err := attachFloor(ctx, o, o.Samples)
	if err != nil {
		return err
	}
	f50 := ms(pct(floor, 50))
	r.add(Figure{ID: "kube.warm.floor", Name: "warm run_python print(1) p50 over attach against the attach floor", Value: w50, Unit: "ms",
		Baseline: "a pod's attach round trip, p50", BaseVal: f50, Samples: len(warm), Target: "<= 2.5x baseline"}, w50 <= 2.5*f50)

	// A proxied echo from a pod against its parts: the direct call and the
	// pod->host link's round trip.
	direct, err := startMCP(ctx, append([]string{o.Bridge}, benchServerArgs(10, false)...), o.Env)
	if err != nil {
		return err
	}
	e, err := measureEcho(ctx, p, direct, max(50, o.Samples))
	direct.close()
	if err != nil {
		return fmt.Errorf("bench: kubernetes: %w", err)
	}
	r.add(Figure{ID: "kube.proxy.link.p50", Name: "pod->host RPC without a server call (query_tool_docs) over attach, p50", Value: ms(pct(e.link, 50)),
		Unit: "ms", Baseline: "a pod's attach round trip, p50", BaseVal: f50, Samples: len(e.link)}, true)
	r.add(e.gap("kube.proxy.echo.gap", ", from a pod"))

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
	s50, p50 := ms(pct(spare, 50)), ms(pct(first, 50))
	r.add(Figure{ID: "kube.pool.p50", Name: "first call of a new session from the warm pool (a started pod, attached and booted now), p50", Value: p50, Unit: "ms",
		Baseline: "warm print(1) p50 over attach", BaseVal: w50, Samples: len(first), Target: "<= 250 ms"}, p50 <= 250)
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
		Unit: "ms", Baseline: "first call of a new session from the warm pool, p50", BaseVal: p50, Samples: len(cold)}, true)
	var fresh []time.Duration
	for range max(3, o.Samples/20) {
		d, err := freshPod(ctx, o)
		if err != nil {
			return err
		}
		fresh = append(fresh, d)
	}
	const freshName = "a fresh pod per call running print(1) (the reference's way on a cluster), p50"
	fr50 := ms(pct(fresh, 50))
	r.add(Figure{ID: "kube.floor.p50", Name: "a pod's attach round trip (one line echoed by Python in a pod with the sandbox's spec), p50",
		Value: f50, Unit: "ms", Baseline: freshName, BaseVal: fr50, RatioIs: Faster, Samples: len(floor)}, true)
	r.add(Figure{ID: "kube.cold.fresh", Name: "cold pod (bridge exec) against a fresh pod per call", Value: c50, Unit: "ms",
		Baseline: freshName, BaseVal: fr50, Samples: len(cold), Target: "<= 0.8x baseline"}, c50 <= 0.8*fr50)
	return failoverFigures(ctx, ko, r)
}

// attachFloor times n round trips of one short line through a pod with the
// sandbox's spec that echoes its stdin: bridge → API server → kubelet →
// container runtime → Python and back, the path every frame of a pod's
// link takes. The pod is deleted before it returns.
func attachFloor(ctx context.Context, o Options, n int) ([]time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	a, err := o.Kube.StartCommand(ctx, []string{"python3", "-u", "-c", echoLoop})
	if err != nil {
		return nil, fmt.Errorf("bench: attach floor: %w", err)
	}
	defer a.Close()
	return echoRounds(bufio.NewReader(a.Out), a.In, n)
}

// freshPod is one call the reference's way on a cluster: a new pod with
// the sandbox's spec that runs print(1) (once its stdin gives it a line:
// the attach must be there to read it), from its creation to the output,
// deleted.
func freshPod(ctx context.Context, o Options) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	start := time.Now()
	a, err := o.Kube.StartCommand(ctx, []string{"python3", "-c", "import sys; sys.stdin.readline(); print(1)"})
	if err != nil {
		return 0, fmt.Errorf("bench: fresh pod: %w", err)
	}
	defer a.Close()
	if _, err := io.WriteString(a.In, "\n"); err != nil {
		return 0, fmt.Errorf("bench: fresh pod: %w", err)
	}
	line, err := bufio.NewReader(a.Out).ReadString('\n')
	if err != nil || line != "1\n" {
		return 0, fmt.Errorf("bench: fresh pod printed %q: %v", line, err)
	}
	a.Close()
	return time.Since(start), nil
}
