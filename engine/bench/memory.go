package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// floodCode prints 1,000-character lines for 3 seconds.
const floodCode = "import time\nt=time.time()\nwhile time.time()-t<3: print('x'*1000)"

// omitted finds how much of the flood's output was cut (TRN-1).
var omitted = regexp.MustCompile(`\[\.\.\. ([0-9]+) bytes omitted`)

// floodBudgetMiB is how far the bridge's RSS may rise over idle during the
// flood (SPEC §18).
const floodBudgetMiB = 50

// memoryFigures measures the RSS of a `bridge run` process idle, with three
// servers started and at its peak during a 3 s print flood, and the memory
// of the session's container.
func memoryFigures(ctx context.Context, o Options, r *Report) error {
	names := []string{"bench-a", "bench-b", "bench-c"}
	servers := map[string]any{}
	for _, name := range names {
		servers[name] = benchServer(o, 100, false)
	}
	p, cleanup, err := startBridge(ctx, o, servers)
	if err != nil {
		return err
	}
	defer cleanup()
	n := max(5, o.Samples/20) // RSS samples of a steady state, 100 ms apart

	// Baseline: a minimal Go MCP server on stdio (the bench server, no
	// synthetic tools), built from the same binary.
	mini, err := startMCP(ctx, append([]string{o.Bridge}, benchServerArgs(0, false)...), o.Env)
	if err != nil {
		return err
	}
	miniRSS, err := steadyRSS(mini.pid, n)
	mini.close()
	if err != nil {
		return err
	}

	host, err := p.run(ctx, "import socket\nprint(socket.gethostname())", "default")
	if err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // the first call adopted the spare; let the next one start
	idle, err := steadyRSS(p.pid, n)
	if err != nil {
		return err
	}
	r.add(Figure{ID: "memory.rss.idle", Name: "bridge RSS idle (one session, spare ready)", Value: idle, Unit: "MiB",
		Baseline: "a minimal mcp-go stdio server (bench-server, 0 tools)", BaseVal: miniRSS, Samples: n}, true)

	if err := containerMemory(ctx, o, r, p.pid, strings.TrimSpace(host)); err != nil {
		return err
	}

	code := ""
	for _, name := range names {
		code += fmt.Sprintf("await mcp_%s.echo('x')\n", strings.ReplaceAll(name, "-", "_"))
	}
	if _, err := p.runWith(ctx, code, names...); err != nil {
		return err
	}
	time.Sleep(500 * time.Millisecond)
	three, err := steadyRSS(p.pid, n)
	if err != nil {
		return err
	}
	r.add(Figure{ID: "memory.rss.servers3", Name: "bridge RSS with 3 proxied servers started (100 tools each)", Value: three,
		Unit: "MiB", Baseline: "bridge RSS idle", BaseVal: idle, Samples: n}, true)

	var text string
	peak, k, err := peakRSS(p.pid, 50*time.Millisecond, func() error {
		var err error
		text, err = p.runPython(ctx, map[string]any{"code": floodCode, "timeout": 60})
		return err
	})
	if err != nil {
		return err
	}
	printed := int64(len(text))
	if m := omitted.FindStringSubmatch(text); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		printed += n
	}
	r.add(Figure{ID: "memory.rss.flood",
		Name:  fmt.Sprintf("bridge RSS peak during a 3 s print flood (%.0f MB printed; 3 servers up)", float64(printed)/1e6),
		Value: peak, Unit: "MiB", Baseline: "bridge RSS idle", BaseVal: idle, Samples: k,
		Target: fmt.Sprintf("<= idle + %d MiB", floodBudgetMiB)}, peak <= idle+floodBudgetMiB)
	return nil
}

// containerMemory reads the memory of the session container whose
// hostname (podman and docker use the short container id) is host, among
// the containers of the bridge with pid.
func containerMemory(ctx context.Context, o Options, r *Report, pid int, host string) error {
	name, err := containerName(ctx, o.RuntimeCLI, pid, host)
	if err != nil {
		return err
	}
	var vals []float64
	for range 3 {
		out, err := exec.CommandContext(ctx, o.RuntimeCLI, "stats", "--no-stream", "--format", "{{.MemUsage}}", name).Output()
		if err != nil {
			return fmt.Errorf("bench: %s stats %s: %w", o.RuntimeCLI, name, err)
		}
		b, err := parseSize(strings.TrimSpace(strings.SplitN(string(out), "/", 2)[0]))
		if err != nil {
			return fmt.Errorf("bench: %s stats %s: %w", o.RuntimeCLI, name, err)
		}
		vals = append(vals, float64(b)/(1<<20))
		time.Sleep(200 * time.Millisecond)
	}
	sort.Float64s(vals)
	r.add(Figure{ID: "memory.container.session", Name: "session container memory, idle after one call (" + filepath.Base(o.RuntimeCLI) + " stats)",
		Value: vals[len(vals)/2], Unit: "MiB", Baseline: "the container's --memory limit (MCP_BRIDGE_MEMORY)",
		BaseVal: float64(o.MemoryLimit) / (1 << 20), Samples: len(vals)}, true)
	return nil
}

// containerName finds the container named bridge-<pid>-* whose id starts
// with host.
func containerName(ctx context.Context, cli string, pid int, host string) (string, error) {
	prefix := fmt.Sprintf("bridge-%d-", pid)
	out, err := exec.CommandContext(ctx, cli, "ps", "--no-trunc", "--format", "{{.ID}} {{.Names}}").Output()
	if err != nil {
		return "", fmt.Errorf("bench: %s ps: %w", cli, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) == 2 && strings.HasPrefix(f[1], prefix) && host != "" && strings.HasPrefix(f[0], host) {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("bench: no container %s* with id %s:\n%s", prefix, host, out)
}

var sizeRe = regexp.MustCompile(`^([0-9.]+)\s*([kKMGT]?i?B)$`)

// parseSize parses podman's and docker's sizes: 3.9MB, 512MiB, 10kB.
func parseSize(s string) (int64, error) {
	m := sizeRe.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("unexpected size %q", s)
	}
	v, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		return 0, fmt.Errorf("unexpected size %q", s)
	}
	mult := map[string]float64{"B": 1, "kB": 1e3, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"KiB": 1 << 10, "kiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40}[m[2]]
	if mult == 0 {
		return 0, fmt.Errorf("unexpected size %q", s)
	}
	return int64(v * mult), nil
}

// rss reads VmRSS of pid in MiB.
func rss(pid int) (float64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("bench: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("bench: VmRSS %q: %w", v, err)
			}
			return float64(kb) / 1024, nil
		}
	}
	return 0, fmt.Errorf("bench: no VmRSS in /proc/%d/status", pid)
}

// steadyRSS is the median of n RSS readings of pid, 100 ms apart.
func steadyRSS(pid, n int) (float64, error) {
	vals := make([]float64, 0, n)
	for i := range n {
		if i > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		v, err := rss(pid)
		if err != nil {
			return 0, err
		}
		vals = append(vals, v)
	}
	sort.Float64s(vals)
	return vals[len(vals)/2], nil
}

// peakRSS runs f while reading the RSS of pid every interval, and returns
// the highest reading and the number of readings (one before f starts and
// one after it ends included).
func peakRSS(pid int, interval time.Duration, f func() error) (float64, int, error) {
	peak, err := rss(pid)
	if err != nil {
		return 0, 0, err
	}
	count := 1
	var mu sync.Mutex
	note := func() {
		if v, err := rss(pid); err == nil {
			mu.Lock()
			peak, count = max(peak, v), count+1
			mu.Unlock()
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				note()
			}
		}
	}()
	err = f()
	close(done)
	wg.Wait()
	note()
	return peak, count, err
}
