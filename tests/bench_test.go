package tests

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// benchReport is the part of bench.json the test reads.
type benchReport struct {
	Machine string `json:"machine"`
	Mode    string `json:"mode"`
	Figures []struct {
		ID       string  `json:"id"`
		Name     string  `json:"name"`
		Value    float64 `json:"value"`
		Baseline string  `json:"baseline"`
		BaseVal  float64 `json:"baselineValue"`
		Ratio    float64 `json:"ratio"`
		Samples  int     `json:"samples"`
	} `json:"figures"`
	Skipped []struct {
		ID     string `json:"id"`
		Reason string `json:"reason"`
	} `json:"skipped"`
}

// TestBenchQuick runs `bridge bench --quick --previous` (this same build)
// and asserts only facts that hold on any machine: it completes, the tool entry costs the same at 0
// and 1,000 proxied tools and stays within budget, the classic tools/list
// grows with the catalog, and every figure is a finite value with a
// baseline and at least one sample. No timing is asserted.
func TestBenchQuick(t *testing.T) {
	// --previous with this same build: the alternating blocks are measured.
	figs, bases, _ := runBenchQuick(t, "--previous", bridgeBin)
	need := func(id string) float64 {
		t.Helper()
		return needFigure(t, figs, id)
	}

	// The tool entry does not grow with the proxied catalog (o200k).
	e0, e1000 := need("tokens.entry.o200k.0"), need("tokens.entry.o200k.1000")
	if e0 != e1000 || e0 > 150 || e0 <= 0 {
		t.Errorf("tool entry: %v o200k tokens at 0 proxied tools, %v at 1,000; want equal and <= 150", e0, e1000)
	}
	if c0, c1000 := bases["tokens.entry.cl100k.1000"], need("tokens.entry.cl100k.1000"); c0 != c1000 {
		t.Errorf("tool entry: %v cl100k tokens at 0 proxied tools, %v at 1,000", c0, c1000)
	}
	// With MCP_BRIDGE_TOOL_INVENTORY=names the entry grows with the servers
	// but stays capped: budget 150 plus the 100-token inventory cap.
	i0, i1000 := need("tokens.entry.inventory.o200k.0"), need("tokens.entry.inventory.o200k.1000")
	if i0 != e0 || i1000 > 250 || i1000 <= i0 || need("tokens.entry.inventory.o200k.100") > 250 {
		t.Errorf("inventory entry: %v o200k tokens at 0 servers, %v at 1,000; want %v and <= 250", i0, i1000, e0)
	}
	// The bridge's tools/list is identical for every catalog size, while
	// the classic alternative grows with it.
	for _, enc := range []string{"o200k", "cl100k"} {
		l10, l100, l1000 := need("tokens.list."+enc+".10"), need("tokens.list."+enc+".100"), need("tokens.list."+enc+".1000")
		if l10 != l100 || l100 != l1000 {
			t.Errorf("bridge tools/list (%s): %v, %v, %v tokens at 10, 100, 1,000 tools; want equal", enc, l10, l100, l1000)
		}
		c10, c100, c1000 := bases["tokens.list."+enc+".10"], bases["tokens.list."+enc+".100"], bases["tokens.list."+enc+".1000"]
		if !(c10 < c100 && c100 < c1000) {
			t.Errorf("classic tools/list (%s): %v, %v, %v tokens at 10, 100, 1,000 tools; want growing", enc, c10, c100, c1000)
		}
		if d := need("tokens.discovery." + enc + ".1000"); d >= c1000 {
			t.Errorf("discovery flow (%s): %v tokens, not below the classic %v", enc, d, c1000)
		}
	}
	// Every group produced its figures.
	for _, id := range []string{"latency.warm.p50", "latency.floor.p50", "latency.warm.floor", "latency.spare.p50",
		"latency.cold.p50", "latency.cold.part.bridge", "latency.cold.part.sandbox", "latency.cold.part.exec",
		"latency.cold.part.container", "latency.cold.part.python", "latency.cold.part.imports",
		"proxy.echo.p50", "proxy.echo.p95", "proxy.echo.gap", "search.sandbox.p50", "proxy.concurrent3", "memory.rss.idle",
		"memory.rss.servers3", "memory.rss.flood", "memory.container.session", "scaling.sessions8", "scaling.rss8",
		"approve.roundtrip.p50"} {
		need(id)
	}
	// The warm call's parts were measured alone: the worker and the MCP hop.
	for _, id := range []string{"latency.floor.worker.p50", "latency.floor.front.p50"} {
		if v := need(id); v <= 0 {
			t.Errorf("%s = %v ms, want it measured (> 0)", id, v)
		}
	}
	need("latency.warm.parts")
	need("latency.warm.own")
	// A grant was timed against no grant, on the same bridge.
	if v := need("latency.grant.p50"); v <= 0 || bases["latency.grant.p50"] <= 0 {
		t.Errorf("latency.grant.p50: %v ms against %v ms; want both measured (> 0)", v, bases["latency.grant.p50"])
	}
	// The bridge's CPU per warm call was measured: it did some work.
	if cpu := need("latency.warm.bridgecpu"); cpu <= 0 {
		t.Errorf("the bridge's CPU per warm call: %v ms; want it measured (> 0)", cpu)
	}
	for _, id := range []string{"latency.warm.previous.p50", "latency.warm.previous.bridgecpu"} {
		if v := need(id); v <= 0 || bases[id] <= 0 {
			t.Errorf("%s: %v ms against %v ms; want both measured (> 0)", id, v, bases[id])
		}
	}
	// A denied call never reaches the server: a machine-independent fact.
	if leaks := need("approve.denied.leaks"); leaks != 0 {
		t.Errorf("%v calls reached the server beyond the approved ones in the approve/deny cycles; want 0", leaks)
	}
	// On podman the link is a socket on fd 3: its floor is measured too.
	if testRuntime() == "podman" {
		if sock, stdio := need("latency.floor.socket.p50"), need("latency.floor.p50"); !(sock > 0 && stdio > 0) {
			t.Errorf("floors: socket %v ms, stdio %v ms; want both measured", sock, stdio)
		}
		need("latency.warm.socketfloor")
	}
}

// TestBenchHTTPQuick runs `bridge bench --quick --http` (bridge serve with
// 1, 10 and 50 clients, each its own principal, and the fairness flood):
// it completes and every figure of the group is there and finite. No timing
// is asserted; the RSS figures must be positive.
func TestBenchHTTPQuick(t *testing.T) {
	figs, _, _ := runBenchQuick(t, "--http")
	for _, n := range []int{1, 10, 50} {
		for _, f := range []string{"p50", "p95", "throughput"} {
			if v := needFigure(t, figs, fmt.Sprintf("http.clients%d.%s", n, f)); v <= 0 {
				t.Errorf("http.clients%d.%s = %v, want > 0", n, f, v)
			}
		}
	}
	if v := needFigure(t, figs, "http.warm.bridgecpu"); v <= 0 {
		t.Errorf("http.warm.bridgecpu = %v ms, want it measured (> 0)", v)
	}
	if v := needFigure(t, figs, "http.rss"); v <= 0 {
		t.Errorf("http.rss = %v MiB, want > 0", v)
	}
	for _, id := range []string{"http.floor.p50", "http.warm.floor", "http.rss.per_session", "http.fairness.p95", "http.fairness.flood_rate", "http.fairness.cpu.p50"} {
		needFigure(t, figs, id)
	}
}

// TestKubeBenchQuick runs `bridge bench --quick --groups kubernetes`
// against the test cluster, with podman for the group's local baselines:
// every figure of the group is there, finite and positive (the attach
// floor and a fresh pod per call are measured on pods the bench starts
// itself), and none of the bench's own pods is left. No timing is asserted.
func TestKubeBenchQuick(t *testing.T) {
	requireKubeRuntime(t)
	figs, _, pid := runBenchQuick(t, "--groups", "kubernetes", "--runtime", "podman")
	for _, id := range []string{"kube.warm.p50", "kube.floor.p50", "kube.warm.floor", "kube.proxy.link.p50", "kube.proxy.echo.gap",
		"kube.pool.p50", "kube.spare.p50", "kube.cold.p50", "kube.cold.fresh", "kube.failover.graceful", "kube.failover.restore", "kube.failover.kill"} {
		if v := needFigure(t, figs, id); v <= 0 {
			t.Errorf("%s = %v, want > 0", id, v)
		}
	}
	assertNoPods(t, pid)
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// runBenchQuick runs `bridge bench --quick` with args and checks what
// holds for every figure: a finite value with a baseline and at least one
// sample, a unique id, a reason for each skipped one. It returns the
// figures' values and baselines by id, and the bench's pid.
func runBenchQuick(t *testing.T, args ...string) (figs, bases map[string]float64, pid int) {
	t.Helper()
	requirePodman(t)
	if testRuntime() == "local" {
		t.Skip("bridge bench measures containers; BRIDGE_TEST_RUNTIME=local has none")
	}
	out := t.TempDir()
	extra := map[string]string{"MCP_BRIDGE_LOG_LEVEL": "warn"}
	if d := os.Getenv("BRIDGE_TEST_NPM_DIR"); d != "" {
		extra["BRIDGE_TEST_NPM_DIR"] = d
	} else if home, err := os.UserHomeDir(); err == nil {
		extra["BRIDGE_TEST_NPM_DIR"] = filepath.Join(home, ".cache", "bridge-npm")
	}
	cmd := exec.Command(bridgeBin, append([]string{"bench", "--quick", "--out", out}, args...)...)
	cmd.Env = baseEnv(t, extra)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	start := time.Now()
	stdout, err := cmd.Output()
	t.Logf("bridge bench --quick %s took %s; stderr:\n%s", strings.Join(args, " "), time.Since(start).Round(time.Second), tail(stderr.String(), 4000))
	if err != nil {
		t.Fatalf("bridge bench --quick: %v\nstdout:\n%s", err, stdout)
	}

	data, err := os.ReadFile(filepath.Join(out, "bench.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep benchReport
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("bench.json: %v\n%s", err, data)
	}
	md, err := os.ReadFile(filepath.Join(out, "bench.md"))
	if err != nil || !strings.Contains(string(md), "| Figure |") {
		t.Errorf("bench.md has no table (%v):\n%s", err, md)
	}
	if rep.Mode != "quick" || rep.Machine == "" {
		t.Errorf("mode %q, machine %q", rep.Mode, rep.Machine)
	}

	figs = map[string]float64{}
	bases = map[string]float64{}
	for _, f := range rep.Figures {
		if f.Samples < 1 || !finite(f.Value) || !finite(f.BaseVal) || !finite(f.Ratio) || f.Baseline == "" {
			t.Errorf("figure %s (%s): value %v, baseline %q %v, ratio %v, samples %d",
				f.ID, f.Name, f.Value, f.Baseline, f.BaseVal, f.Ratio, f.Samples)
		}
		if _, dup := figs[f.ID]; dup || f.ID == "" {
			t.Errorf("figure id %q is empty or repeated", f.ID)
		}
		figs[f.ID], bases[f.ID] = f.Value, f.BaseVal
	}
	for _, s := range rep.Skipped {
		if s.Reason == "" {
			t.Errorf("skipped figure %s has no reason", s.ID)
		}
	}
	return figs, bases, cmd.Process.Pid
}

// needFigure is the value of figure id; a missing one fails the test.
func needFigure(t *testing.T, figs map[string]float64, id string) float64 {
	t.Helper()
	v, ok := figs[id]
	if !ok {
		t.Fatalf("bench.json has no figure %s", id)
	}
	return v
}
