package bench

import (
	"context"
	"fmt"
	"time"
)

// spareQuiet is how long a figure waits after new sessions were started,
// for the spare container that replaces the adopted one to be up.
const spareQuiet = 4 * time.Second

// httpFigures measures bridge serve: warm p50/p95 and throughput at each
// concurrency level against one client in the same run, the bridge's RSS
// with every client's session live and its growth per session, and the
// fairness figure.
func httpFigures(ctx context.Context, o Options, r *Report) error {
	top := httpClientCounts[len(httpClientCounts)-1]
	var principals []string
	for i := range top {
		principals = append(principals, fmt.Sprintf("c%d", i))
	}
	// Every measured client is a principal of its own; the flooder is one
	// principal whose loops each use a session of their own.
	principals = append(principals, "probe", "flood")
	s, err := startServe(ctx, o, principals,
		fmt.Sprintf("MCP_BRIDGE_MAX_SESSIONS=%d", top+floodCap*2+8),
		fmt.Sprintf("MCP_BRIDGE_MAX_CALLS_PER_PRINCIPAL=%d", floodCap))
	if err != nil {
		return err
	}
	defer s.stop()
	pid := s.cmd.Process.Pid
	per := max(10, o.Samples/10)
	if o.Quick {
		per = 10
	}

	hs, err := s.clients(ctx, "c", 0, 1)
	if err != nil {
		return err
	}
	defer func() { closeAll(hs) }()
	time.Sleep(spareQuiet)
	rssOne, err := steadyRSS(pid, 5)
	if err != nil {
		return err
	}
	more, err := s.clients(ctx, "c", 1, top-1)
	hs = append(hs, more...)
	if err != nil {
		return err
	}
	time.Sleep(spareQuiet)
	var p50one, p95one, tputOne float64
	for _, n := range httpClientCounts {
		lat, wall, err := concurrently(ctx, hs[:n], per)
		if err != nil {
			return err
		}
		p50, p95 := ms(pct(lat, 50)), ms(pct(lat, 95))
		tput := float64(len(lat)) / wall.Seconds()
		if n == 1 {
			p50one, p95one, tputOne = p50, p95, tput
		}
		r.add(Figure{ID: fmt.Sprintf("http.clients%d.p50", n), Name: fmt.Sprintf("HTTP, %d concurrent clients, warm print(1), p50", n),
			Value: p50, Unit: "ms", Baseline: "1 client, p50", BaseVal: p50one, Samples: len(lat)}, true)
		r.add(Figure{ID: fmt.Sprintf("http.clients%d.p95", n), Name: fmt.Sprintf("HTTP, %d concurrent clients, warm print(1), p95", n),
			Value: p95, Unit: "ms", Baseline: "1 client, p95", BaseVal: p95one, Samples: len(lat)}, true)
		r.add(Figure{ID: fmt.Sprintf("http.clients%d.throughput", n), Name: fmt.Sprintf("HTTP, %d concurrent clients: throughput", n),
			Value: tput, Unit: "calls/s", Baseline: "1 client", BaseVal: tputOne, Samples: len(lat)}, true)
	}

	// The bridge's CPU per call, one client: steadier than its latency on a
	// shared machine, so the figure to compare builds by over HTTP too.
	nCPU := max(per, 100)
	cpu0 := processCPU(pid)
	if _, _, err := concurrently(ctx, hs[:1], nCPU); err != nil {
		return err
	}
	r.add(Figure{ID: "http.warm.bridgecpu", Name: "the bridge's CPU time per warm print(1) over HTTP, 1 client (all its threads)",
		Value: ms((processCPU(pid) - cpu0) / time.Duration(nCPU)), Unit: "ms", Baseline: "HTTP, 1 client, warm print(1), p50",
		BaseVal: p50one, Samples: nCPU}, true)

	// The floors of one call over bridge serve: the loopback HTTP round
	// trip it rides on, plus the sandbox link's own (the socket where the
	// runtime passes one, else the stdio pipe), measured now.
	hf, err := httpFloor(ctx, max(per, 100))
	if err != nil {
		return err
	}
	link, linkName := socketFloor, "socket"
	if o.SocketArgv == nil {
		link, linkName = pipeFloor, "stdio pipe"
	}
	lf, err := link(ctx, o, max(per, 100))
	if err != nil {
		return err
	}
	h50, l50 := ms(pct(hf, 50)), ms(pct(lf, 50))
	r.add(Figure{ID: "http.floor.p50", Name: "loopback HTTP/1.1 round trip of a short JSON POST to an echoing Go server (keep-alive), p50",
		Value: h50, Unit: "ms", Baseline: "HTTP, 1 client, warm print(1), p50", BaseVal: p50one, RatioIs: Faster, Samples: len(hf)}, true)
	r.add(Figure{ID: "http.warm.floor", Name: "HTTP, 1 client, warm print(1) p50 against its floor (loopback HTTP round trip + the " + linkName + " link round trip)",
		Value: p50one, Unit: "ms", Baseline: "loopback HTTP round trip + " + linkName + " round trip into a container, p50s", BaseVal: h50 + l50,
		Samples: len(hf), Target: "<= 2.5x baseline"}, p50one <= 2.5*(h50+l50))

	// RSS with every client's session live against one.
	rssAll, err := steadyRSS(pid, 5)
	if err != nil {
		return err
	}
	r.add(Figure{ID: "http.rss", Name: fmt.Sprintf("bridge serve RSS with %d live sessions (after the runs)", top), Value: rssAll, Unit: "MiB",
		Baseline: "with one live session", BaseVal: rssOne, Samples: 5}, true)
	growth := (rssAll - rssOne) / float64(top-1) * 1024
	r.add(Figure{ID: "http.rss.per_session", Name: "bridge serve RSS growth per live session", Value: growth, Unit: "KiB",
		Baseline: "RSS with one session, per session", BaseVal: rssOne * 1024, Samples: 5}, true)

	// Fairness: the probe's warm p95 alone, then while "flood" runs as
	// many print(1) loops as its cap lets run at once.
	probe, err := s.client(ctx, "probe")
	if err != nil {
		return err
	}
	defer probe.c.Close()
	if err := probe.run(ctx, "print(1)"); err != nil {
		return err
	}
	// A new session adopts the spare and a new spare starts beside it:
	// a container start would weigh on the figures, so they wait for it.
	time.Sleep(spareQuiet)
	flood := make([]*httpProc, 0, floodCap)
	for i := range floodCap {
		h, err := s.client(ctx, "flood")
		if err != nil {
			closeAll(flood)
			return err
		}
		h.session = fmt.Sprintf("flood-%d", i)
		flood = append(flood, h)
		if err := h.run(ctx, "print(1)"); err != nil {
			closeAll(flood)
			return err
		}
	}
	defer closeAll(flood)
	// One more call in each flood session, now that all are live, sets
	// their CPU weights (in the background: the wait covers it), so the
	// figures measure the steady state rather than the updates.
	for _, h := range flood {
		if err := h.run(ctx, "print(1)"); err != nil {
			return err
		}
	}
	time.Sleep(spareQuiet)
	return fairnessFigures(ctx, o, r, probe, flood)
}
