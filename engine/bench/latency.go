package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"
)

// latencyFigures times run_python of print(1) over MCP stdio: warm calls,
// the first call of a new session with the spare ready, and a cold bridge
// process, each against a fresh container per call (the reference's way).
func latencyFigures(ctx context.Context, o Options, r *Report) error {
	// The bench server is only granted by grantFigures' calls.
	servers := map[string]any{"bench": benchServer(o, grantTools, false)}
	p, stop, err := startBridge(ctx, o, servers)
	if err != nil {
		return err
	}
	defer stop()
	// Warm-up: the first call adopts the spare.
	if _, err := p.run(ctx, "print(1)", "default"); err != nil {
		return err
	}
	procs := []*proc{p}
	if o.Previous != "" {
		po := o
		po.Bridge = o.Previous
		q, stopQ, err := startBridge(ctx, po, servers)
		if err != nil {
			return fmt.Errorf("bench: --previous: %w", err)
		}
		defer stopQ()
		if _, err := q.run(ctx, "print(1)", "default"); err != nil {
			return fmt.Errorf("bench: --previous: %w", err)
		}
		procs = append(procs, q)
	}
	lats, cpus, err := warmBlocks(ctx, procs, o.Samples)
	if err != nil {
		return err
	}
	warm := lats[0]
	// The bridge's own CPU per warm call: far steadier than a latency on a
	// shared machine, so it is the figure to compare builds by.
	cpu := ms(cpus[0] / time.Duration(len(warm)))
	if o.Previous != "" {
		prevCPU := ms(cpus[1] / time.Duration(len(lats[1])))
		r.add(Figure{ID: "latency.warm.previous.p50", Name: "warm run_python print(1) p50, this build against the previous one",
			Value: ms(pct(warm, 50)), Unit: "ms", Baseline: "the previous build (--previous), p50, in blocks alternating with this build's",
			BaseVal: ms(pct(lats[1], 50)), Samples: len(warm)}, true)
		r.add(Figure{ID: "latency.warm.previous.bridgecpu", Name: "the bridge's CPU time per warm print(1), this build against the previous one",
			Value: cpu, Unit: "ms", Baseline: "the previous build (--previous), CPU per call, in blocks alternating with this build's",
			BaseVal: prevCPU, Samples: len(warm)}, true)
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
	floor, err := pipeFloor(ctx, o, o.Samples)
	if err != nil {
		return err
	}
	f50 := ms(pct(floor, 50))
	r.add(Figure{ID: "latency.floor.p50", Name: "stdio pipe round trip into a container (production flags, through the runtime CLI's relay), p50",
		Value: f50, Unit: "ms", Baseline: freshName, BaseVal: base, RatioIs: Faster, Samples: len(floor)}, true)
	w50, w95 := ms(pct(warm, 50)), ms(pct(warm, 95))
	r.add(Figure{ID: "latency.warm.p50", Name: "warm run_python print(1) p50 (MCP stdio)", Value: w50, Unit: "ms",
		Baseline: freshName, BaseVal: base, RatioIs: Faster, Samples: len(warm), Target: "<= 5 ms; >= 25x faster"},
		w50 <= 5 && base/w50 >= 25)
	r.add(Figure{ID: "latency.warm.floor", Name: "warm run_python print(1) p50 against the stdio pipe floor", Value: w50, Unit: "ms",
		Baseline: "stdio pipe round trip into a container, p50", BaseVal: f50, Samples: len(warm),
		Target: "<= 2.5x baseline"}, w50 <= 2.5*f50)
	r.add(Figure{ID: "latency.warm.bridgecpu", Name: "the bridge's CPU time per warm run_python print(1) (all its threads)", Value: cpu,
		Unit: "ms", Baseline: "warm run_python print(1), p50", BaseVal: w50, Samples: len(warm)}, true)
	if o.SocketArgv != nil {
		sock, err := socketFloor(ctx, o, o.Samples)
		if err != nil {
			return err
		}
		s50 := ms(pct(sock, 50))
		r.add(Figure{ID: "latency.floor.socket.p50", Name: "socket round trip into a container (fd 3, the bridge's link here; its floor), p50",
			Value: s50, Unit: "ms", Baseline: "stdio pipe round trip into a container, p50", BaseVal: f50, RatioIs: Faster, Samples: len(sock)}, true)
		r.add(Figure{ID: "latency.warm.socketfloor", Name: "warm run_python print(1) p50 against the socket floor", Value: w50, Unit: "ms",
			Baseline: "socket round trip into a container, p50", BaseVal: s50, Samples: len(warm)}, true)
	}
	if err := partsFigures(ctx, o, r, w50, f50); err != nil {
		return err
	}
	r.add(Figure{ID: "latency.warm.p95", Name: "warm run_python print(1) p95 (MCP stdio)", Value: w95, Unit: "ms",
		Baseline: "fresh container per call, p95", BaseVal: ms(pct(fresh, 95)), RatioIs: Faster, Samples: len(warm),
		Target: "<= 20 ms"}, w95 <= 20)

	if err := grantFigures(ctx, o, r, p); err != nil {
		return err
	}
	if err := firstCallFigures(ctx, o, r); err != nil {
		return err
	}

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
		Baseline: "warm run_python print(1), p50", BaseVal: w50, Samples: len(spare), Target: "<= 5 ms"}, s50 <= 5)

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
		Unit: "ms", Baseline: freshName, BaseVal: base, Samples: len(cold), Target: "<= 0.8x baseline"}, c50 <= 0.8*base)
	return coldParts(ctx, o, r, p, env, c50)
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

// sandboxImports are the modules the sandbox imports at start
// (entrypoint/*.py: what the bootstrap, the supervisor and the worker's
// modules import at their top level; asyncio, concurrent.futures, inspect
// and socket load on first use), timed in a fresh interpreter for the
// cold-start parts.
const sandboxImports = "import __future__, ast, base64, builtins, collections, contextvars, errno, io, itertools, json, " +
	"keyword, linecache, os, queue, re, select, signal, sys, textwrap, threading, time, traceback, types, warnings"

// coldParts breaks the cold start (c50, the cold p50) into where the time
// goes. From the bridge's own debug log (`bridge exec` with JSON logs, each
// line timed as it arrives): bridge process start to the container CLI's
// spawn, spawn to the sandbox's ready frame, and ready to the result line.
// Measured apart in the same run: a fresh container that runs `true` (the
// runtime CLI, container create, start and remove, no Python), and, timed
// inside the warm session p, an interpreter start and the sandbox's imports.
func coldParts(ctx context.Context, o Options, r *Report, p *proc, env []string, c50 float64) error {
	env = append(append([]string{}, env...), "MCP_BRIDGE_LOG_LEVEL=debug", "MCP_BRIDGE_LOG_FORMAT=json")
	var spawn, ready, result []time.Duration
	for range max(3, o.Samples/20) {
		t, err := coldTimeline(ctx, o.Bridge, env)
		if err != nil {
			return err
		}
		spawn, ready, result = append(spawn, t.spawn), append(ready, t.ready-t.spawn), append(result, t.result-t.ready)
	}
	const coldName = "cold session (bridge exec), p50"
	for _, part := range []struct {
		id, name string
		d        []time.Duration
	}{
		{"latency.cold.part.bridge", "cold part: new bridge process to the container CLI's spawn, p50", spawn},
		{"latency.cold.part.sandbox", "cold part: container CLI spawn to the sandbox's ready frame, p50", ready},
		{"latency.cold.part.exec", "cold part: ready frame to the result line, p50", result},
	} {
		r.add(Figure{ID: part.id, Name: part.name, Value: ms(pct(part.d, 50)), Unit: "ms", Baseline: coldName,
			BaseVal: c50, Samples: len(part.d)}, true)
	}

	argv := append(append([]string{}, o.ContainerArgv...), "true")
	bare, err := sample(max(3, o.Samples/20), func() error {
		out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("bench: container running true: %w: %s", err, out)
		}
		return nil
	})
	if err != nil {
		return err
	}
	r.add(Figure{ID: "latency.cold.part.container", Name: "cold part: fresh container running `true` (runtime CLI, create, start, remove; no Python), p50",
		Value: ms(pct(bare, 50)), Unit: "ms", Baseline: coldName, BaseVal: c50, Samples: len(bare)}, true)

	code := fmt.Sprintf(`import json as _j, subprocess as _s, sys as _y, time as _t
def _run(c):
    s = _t.perf_counter()
    _s.run([_y.executable, "-u", "-c", c], check=True)
    return _t.perf_counter() - s
_p, _i = [], []
for _ in range(%d):
    _p.append(_run("pass"))
    _i.append(_run(%q))
print(_j.dumps([_p, _i]))`, max(5, o.Samples/20), sandboxImports)
	res, err := p.run(ctx, code, "default")
	if err != nil {
		return err
	}
	// The first line: notes (a state loss after the spare figure's
	// sessions evicted this one) may follow.
	var secs [2][]float64
	if err := json.Unmarshal([]byte(strings.SplitN(strings.TrimSpace(res), "\n", 2)[0]), &secs); err != nil {
		return fmt.Errorf("bench: interpreter timings %q: %w", res, err)
	}
	toD := func(v []float64) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, s := range v {
			out[i] = time.Duration(s * float64(time.Second))
		}
		return out
	}
	start, imports := toD(secs[0]), toD(secs[1])
	s50 := ms(pct(start, 50))
	r.add(Figure{ID: "latency.cold.part.python", Name: "cold part: Python interpreter start in the container (python3 -c pass, timed inside), p50",
		Value: s50, Unit: "ms", Baseline: coldName, BaseVal: c50, Samples: len(start)}, true)
	r.add(Figure{ID: "latency.cold.part.imports", Name: "cold part: the sandbox's imports (timed inside, interpreter start deducted), p50",
		Value: max(0, ms(pct(imports, 50))-s50), Unit: "ms", Baseline: coldName, BaseVal: c50, Samples: len(imports)}, true)
	return nil
}

// timeline is when a cold `bridge exec` reached each step, from its start.
type timeline struct{ spawn, ready, result time.Duration }

// coldTimeline runs `bridge exec print(1)` with JSON debug logs and times
// its steps: the "sandbox ready" line (whose sinceSpawn dates the container
// CLI's spawn) and the result line, each when it arrives.
func coldTimeline(ctx context.Context, bin string, env []string) (timeline, error) {
	cmd := exec.CommandContext(ctx, bin, "exec", "print(1)")
	cmd.Env = env
	out, err := cmd.StdoutPipe()
	if err != nil {
		return timeline{}, fmt.Errorf("bench: %w", err)
	}
	errPipe, err := cmd.StderrPipe()
	if err != nil {
		return timeline{}, fmt.Errorf("bench: %w", err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return timeline{}, fmt.Errorf("bench: %w", err)
	}
	var t timeline
	readyAt := make(chan time.Duration, 1)
	spawnAt := make(chan time.Duration, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(errPipe)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		found := false
		for sc.Scan() {
			at := time.Since(start)
			var line struct {
				Message    string  `json:"message"`
				SinceSpawn float64 `json:"sinceSpawn"` // milliseconds
			}
			if !found && json.Unmarshal(sc.Bytes(), &line) == nil && line.Message == "sandbox ready" {
				found = true
				readyAt <- at
				spawnAt <- at - time.Duration(line.SinceSpawn*float64(time.Millisecond))
			}
		}
		if !found {
			readyAt <- -1
			spawnAt <- -1
		}
	}()
	line, rerr := bufio.NewReader(out).ReadString('\n')
	t.result = time.Since(start)
	_, _ = io.Copy(io.Discard, out)
	<-done // stderr ends when the bridge exits
	t.ready, t.spawn = <-readyAt, <-spawnAt
	werr := cmd.Wait()
	if rerr != nil || line != "1\n" || werr != nil || t.ready < 0 {
		return timeline{}, fmt.Errorf("bench: bridge exec (debug log) printed %q, ready line found %v: %v %v", line, t.ready >= 0, rerr, werr)
	}
	return t, nil
}

// warmBlocks runs n warm print(1) calls on each of procs, in blocks of 50
// alternating between them, so that each sees the same machine over the
// same seconds: a before/after comparison in one run is then fair even on
// a shared machine. It returns each one's latencies and the CPU time its
// bridge process spent in its blocks.
func warmBlocks(ctx context.Context, procs []*proc, n int) (lats [][]time.Duration, cpus []time.Duration, err error) {
	const block = 50
	lats, cpus = make([][]time.Duration, len(procs)), make([]time.Duration, len(procs))
	for done := 0; done < n; done += block {
		for i, p := range procs {
			c0 := processCPU(p.pid)
			d, err := sample(min(block, n-done), func() error { _, err := p.run(ctx, "print(1)", "default"); return err })
			if err != nil {
				return nil, nil, err
			}
			cpus[i] += processCPU(p.pid) - c0
			lats[i] = append(lats[i], d...)
		}
	}
	return lats, cpus, nil
}

// partsFigures splits warm print(1) (p50 w50) by the floors of its two
// required parts, each measured alone: the MCP hop (a tool call that does
// nothing, on the bridge's MCP library) and the sandbox worker (exec
// straight over its link). What is left is the bridge's own work between
// them. Against the stdio pipe floor (f50), the parts' sum says how much of
// the warm target's 2.5x they leave to the bridge. A sum of p50s is not the
// p50 of a sum: the split is an estimate, which is why it has no target.
func partsFigures(ctx context.Context, o Options, r *Report, w50, f50 float64) error {
	worker, err := workerFloor(ctx, o, o.Samples)
	if err != nil {
		return err
	}
	front, err := frontFloor(ctx, o, o.Samples)
	if err != nil {
		return err
	}
	wk, fr := ms(pct(worker, 50)), ms(pct(front, 50))
	const warmName = "warm run_python print(1), p50"
	r.add(Figure{ID: "latency.floor.worker.p50", Name: "the sandbox worker alone: exec print(1) sent straight over its link by the bench (no bridge, no MCP), p50",
		Value: wk, Unit: "ms", Baseline: warmName, BaseVal: w50, Samples: len(worker)}, true)
	r.add(Figure{ID: "latency.floor.front.p50", Name: "the MCP hop alone: a tool call that does nothing, on a stdio server built on the bridge's MCP library, p50",
		Value: fr, Unit: "ms", Baseline: warmName, BaseVal: w50, Samples: len(front)}, true)
	r.add(Figure{ID: "latency.warm.parts", Name: "the floors of a warm call's parts (MCP hop + sandbox worker) against the stdio pipe floor",
		Value: wk + fr, Unit: "ms", Baseline: "stdio pipe round trip into a container, p50", BaseVal: f50, Samples: len(worker)}, true)
	r.add(Figure{ID: "latency.warm.own", Name: "the bridge's own part of a warm call: warm print(1) p50 less the floors of its parts",
		Value: w50 - wk - fr, Unit: "ms", Baseline: warmName, BaseVal: w50, Samples: len(worker)}, true)
	return nil
}

// grantTools is the size of the catalog grantFigures grants.
const grantTools = 20

// grantFigures times warm print(1) with a server granted but unused against
// the same call without the grant, in alternating blocks on one bridge and
// session (issue 35: a grant of a server whose catalog is known costs
// at most 0.05 ms).
func grantFigures(ctx context.Context, o Options, r *Report, p *proc) error {
	plain := map[string]any{"code": "print(1)", "session": "default"}
	granted := map[string]any{"code": "print(1)", "session": "default", "servers": []string{"bench"}}
	if _, err := p.runPython(ctx, granted); err != nil { // starts the server
		return err
	}
	const block = 50
	var with, without []time.Duration
	for done := 0; done < o.Samples; done += block {
		for _, v := range []struct {
			args map[string]any
			into *[]time.Duration
		}{{plain, &without}, {granted, &with}} {
			d, err := sample(min(block, o.Samples-done), func() error { _, err := p.runPython(ctx, v.args); return err })
			if err != nil {
				return err
			}
			*v.into = append(*v.into, d...)
		}
	}
	g50, n50 := ms(pct(with, 50)), ms(pct(without, 50))
	r.add(Figure{ID: "latency.grant.p50", Name: fmt.Sprintf("warm run_python print(1) with a server of %d tools granted but unused, p50", grantTools),
		Value: g50, Unit: "ms", Baseline: "the same call without the grant, p50, in blocks alternating with it", BaseVal: n50,
		Samples: len(with), Target: "<= baseline + 0.05 ms"}, g50 <= n50+0.05)
	return nil
}
