package bench

import (
	"context"
	"slices"
	"time"
)

// auditFigures measures what the audit trail costs each call: under bridge
// serve (where it is on by default, and each record is fsynced before the
// result returns), warm print(1) and a proxied echo with the trail on,
// against the same with it off, in the same run (target: within 5%); and
// bridge run's warm print(1) with it on against off, reported without a
// target. The calls alternate between the two bridges in blocks, so both
// see the same machine over the same seconds.
func auditFigures(ctx context.Context, o Options, r *Report) error {
	hs, stop, err := serveSideBySide(ctx, o, [][]string{{"MCP_BRIDGE_AUDIT=off"}, {"MCP_BRIDGE_AUDIT=on"}})
	defer stop()
	if err != nil {
		return err
	}
	n := sideBySideSamples(o)
	for _, c := range []struct{ id, name, code string }{
		{"audit.serve.print", "bridge serve, warm print(1) with the audit trail on, p50", "print(1)"},
		{"audit.serve.echo", "bridge serve, a call with one proxied echo, audit trail on, p50", `await mcp_bench.echo("x")`},
	} {
		lats, err := alternate(2, n, func(i int) error { return hs[i].runWith(ctx, c.code, "bench") })
		if err != nil {
			return err
		}
		off, on := ms(pct(lats[0], 50)), ms(pct(lats[1], 50))
		r.add(Figure{ID: c.id, Name: c.name, Value: on, Unit: "ms", Baseline: "the same with the trail off, p50", BaseVal: off,
			Samples: len(lats[1]), Target: "<= 1.05x"}, on <= off*1.05)
	}

	var ps [2]*proc
	for i, mode := range []string{"off", "on"} {
		oo := o
		oo.Env = append(slices.Clone(o.Env), "MCP_BRIDGE_AUDIT="+mode)
		p, stop, err := startBridge(ctx, oo, nil)
		if err != nil {
			return err
		}
		defer stop()
		if _, err := p.run(ctx, "print(1)", "default"); err != nil {
			return err
		}
		ps[i] = p
	}
	lats, err := alternate(2, n, func(i int) error { _, err := ps[i].run(ctx, "print(1)", "default"); return err })
	if err != nil {
		return err
	}
	r.add(Figure{ID: "audit.run.print", Name: "bridge run, warm print(1) with MCP_BRIDGE_AUDIT=on, p50", Value: ms(pct(lats[1], 50)),
		Unit: "ms", Baseline: "the same with it off, p50", BaseVal: ms(pct(lats[0], 50)), Samples: len(lats[1])}, true)
	return nil
}

// alternate times n calls of f(i) for each of k subjects, in blocks of 10
// that take turns.
func alternate(k, n int, f func(i int) error) ([][]time.Duration, error) {
	const block = 10
	out := make([][]time.Duration, k)
	for done := 0; done < n; done += block {
		for i := range k {
			d, err := sample(min(block, n-done), func() error { return f(i) })
			if err != nil {
				return nil, err
			}
			out[i] = append(out[i], d...)
		}
	}
	return out, nil
}

// serveSideBySide starts one bridge serve per entry of envs (its extra
// variables), each with the bench server, and returns a warm client of
// principal "a" for each; stop ends them all, also after an error.
func serveSideBySide(ctx context.Context, o Options, envs [][]string) (_ []*httpProc, stop func(), _ error) {
	servers := map[string]any{"bench": benchServer(o, 10, false)}
	var stops []func()
	stop = func() {
		for _, f := range slices.Backward(stops) {
			f()
		}
	}
	hs := make([]*httpProc, len(envs))
	for i, env := range envs {
		s, err := startServeWith(ctx, o, servers, []string{"a"}, env...)
		if err != nil {
			return nil, stop, err
		}
		stops = append(stops, s.stop)
		if hs[i], err = s.client(ctx, "a"); err != nil {
			return nil, stop, err
		}
		stops = append(stops, func() { hs[i].c.Close() })
		if err := hs[i].runWith(ctx, `await mcp_bench.echo("x")`, "bench"); err != nil {
			return nil, stop, err
		}
	}
	return hs, stop, nil
}

// sideBySideSamples is how many calls each of the bridges side by side
// gets: the run's samples, and 50 at least (quick runs too), since their
// differences are small.
func sideBySideSamples(o Options) int {
	if o.Quick {
		return 50
	}
	return max(o.Samples, 50)
}
