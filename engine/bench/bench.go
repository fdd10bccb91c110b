// Package bench measures the bridge against baselines taken in the same
// run: tokens (the tool entry and tools/list against the classic
// alternative, a discovery flow), latency (warm, spare, cold, proxied,
// search, concurrency, with the pipe floor and the cold start's parts),
// memory (bridge RSS idle, with servers, during a print flood; per-session
// container memory) and scaling (eight sessions at once).
package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/bridge-mcp/bridge/engine/kube"
)

// Options configure a run.
type Options struct {
	Bridge  string   // path of the bridge binary to measure
	Version string   // its version, for the report
	Env     []string // environment of the bridge under test
	Samples int      // warm samples; baselines take Samples/5 (at least 5)
	Quick   bool     // CI mode: small sample counts
	// BaselineArgv is the full argv of one fresh container running
	// python3 -c 'print(1)' with the production flags (the reference's way).
	BaselineArgv []string
	// ContainerArgv is BaselineArgv without its command: the runtime CLI,
	// its global flags and `run` with every production flag through the
	// image, for the pipe floor and the cold-start parts.
	ContainerArgv []string
	// SocketArgv is ContainerArgv for a container that gets the link as a
	// socket on fd 3 (podman --preserve-fds), as the bridge's sandboxes do
	// here; nil when they keep the CLI's stdio. The floor is then measured
	// on both paths.
	SocketArgv []string
	// RuntimeCLI is the container CLI (podman or docker), for machine info
	// and container memory.
	RuntimeCLI string
	// MemoryLimit is the sandbox's --memory in bytes (MCP_BRIDGE_MEMORY).
	MemoryLimit int64
	// NPMDir holds node_modules/.bin/mcp-server-{everything,filesystem,memory};
	// the real-server figures are skipped when they are missing.
	NPMDir string
	// Groups names the figure groups to run (tokens, latency, proxy,
	// memory, scaling); empty runs them all.
	Groups []string
	// HTTP runs the bridge serve figures (bridge bench --http), which no
	// other run includes: 50 live sessions are more than a default run
	// should start.
	HTTP bool
	// Previous is another build measured beside this one in the latency
	// group, its warm calls in blocks alternating with this build's
	// (bridge bench --previous): before/after figures from one run.
	Previous string
	// Kube starts the kubernetes group's own pods (the attach floor, a
	// fresh pod per call) with the sandbox's spec; nil unless that group
	// runs. The caller runs its Serve meanwhile, so those pods have a live
	// owner (its Lease) and are deleted when it ends.
	Kube *kube.Launcher
	Log  io.Writer
}

// GroupNames are the figure groups in the order a run measures them.
var GroupNames = []string{"tokens", "latency", "proxy", "memory", "scaling", "approve", "kubernetes", "durable", "audit", "traces"}

// Ratio kinds: how Figure.Ratio is computed.
const (
	Faster = "baseline/value" // times faster than the baseline (latencies)
	Of     = "value/baseline" // multiple of the baseline (tokens, memory, overhead)
)

// Figure is one measurement with its baseline and their ratio.
type Figure struct {
	ID       string  `json:"id"`
	Name     string  `json:"name"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	Baseline string  `json:"baseline"`
	BaseVal  float64 `json:"baselineValue"`
	Ratio    float64 `json:"ratio"`
	RatioIs  string  `json:"ratioIs"`
	Samples  int     `json:"samples"`
	Target   string  `json:"target,omitempty"`
	Met      *bool   `json:"met,omitempty"` // nil when the figure has no target
}

// Skipped is a figure that could not be measured on this machine, with the
// reason; it is never given a value.
type Skipped struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Reason string `json:"reason"`

	at int // its row in the table: before Figures[at]
}

// Report is a whole run.
type Report struct {
	Date    string    `json:"date"`
	Machine string    `json:"machine"`
	Bridge  string    `json:"bridge"`
	Mode    string    `json:"mode"` // "quick" or "full"
	Samples int       `json:"samples"`
	Figures []Figure  `json:"figures"`
	Skipped []Skipped `json:"skipped"`
	Seconds float64   `json:"seconds"` // wall time of the run

	err error // the first figure that could not be recorded
}

// Run measures every figure group and returns the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Samples < 10 {
		o.Samples = 10
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	start := time.Now()
	mode := "full"
	if o.Quick {
		mode = "quick"
	}
	r := &Report{
		Date: time.Now().UTC().Format("2006-01-02"), Machine: machine(ctx, o.RuntimeCLI),
		Bridge: o.Version, Mode: mode, Samples: o.Samples, Figures: []Figure{}, Skipped: []Skipped{},
	}
	fmt.Fprintf(o.Log, "bench: %s mode, %d warm samples, bridge %s\nbench: machine: %s\n", mode, o.Samples, o.Version, r.Machine)
	groups := []struct {
		name string
		run  func(context.Context, Options, *Report) error
		// named, when set, runs the group only when --groups names it:
		// the skip's id, what it measures and why it waits to be named.
		named *Skipped
	}{
		{"tokens", tokenFigures, nil},
		{"latency", latencyFigures, nil},
		{"proxy", proxyFigures, nil},
		{"memory", memoryFigures, nil},
		{"scaling", scalingFigures, nil},
		{"http", httpFigures, nil},
		{"approve", approveFigures, nil},
		{"kubernetes", kubeFigures, &Skipped{ID: "kube", Name: "Kubernetes figures", Reason: "needs a cluster"}},
		{"durable", durableFigures, &Skipped{ID: "durable", Name: "durable session figures", Reason: "writes 200 MB snapshots"}},
		{"audit", auditFigures, &Skipped{ID: "audit", Name: "the audit trail's cost per call", Reason: "two bridges side by side"}},
		{"traces", traceFigures, &Skipped{ID: "traces", Name: "the cost of exporting traces per call", Reason: "four bridges side by side"}},
	}
	for _, g := range groups {
		if g.name == "http" && !o.HTTP || g.name != "http" && (o.HTTP && len(o.Groups) == 0 || len(o.Groups) > 0 && !slices.Contains(o.Groups, g.name)) {
			continue
		}
		if g.named != nil && !slices.Contains(o.Groups, g.name) {
			r.skip(g.named.ID, g.named.Name, g.named.Reason+": run with --groups "+g.name)
			fmt.Fprintf(o.Log, "bench: %s: skipped (%s: --groups %s)\n", g.name, g.named.Reason, g.name)
			continue
		}
		t := time.Now()
		fmt.Fprintf(o.Log, "bench: %s...\n", g.name)
		if err := g.run(ctx, o, r); err != nil {
			return nil, err
		}
		if r.err != nil {
			return nil, r.err
		}
		fmt.Fprintf(o.Log, "bench: %s done in %.1fs\n", g.name, time.Since(t).Seconds())
	}
	r.Seconds = math.Round(time.Since(start).Seconds()*10) / 10
	return r, nil
}

// add records f, computing its ratio; met reports whether the target holds
// (ignored when f has no target). A non-finite value is a bug in the bench
// and fails the run.
func (r *Report) add(f Figure, met bool) {
	switch f.RatioIs {
	case Faster:
		f.Ratio = div(f.BaseVal, f.Value)
	default:
		f.RatioIs = Of
		f.Ratio = div(f.Value, f.BaseVal)
	}
	if f.Target != "" {
		f.Met = &met
	}
	if !finite(f.Value) || !finite(f.BaseVal) || !finite(f.Ratio) {
		if r.err == nil {
			r.err = fmt.Errorf("bench: figure %s is not finite: %+v", f.ID, f)
		}
		return
	}
	r.Figures = append(r.Figures, f)
}

// skip records a figure that was not measured, with the reason (the caller
// prints a note).
func (r *Report) skip(id, name, reason string) {
	r.Skipped = append(r.Skipped, Skipped{ID: id, Name: name, Reason: reason, at: len(r.Figures)})
}

// Figure returns the figure with id, if any.
func (r *Report) Figure(id string) (Figure, bool) {
	for _, f := range r.Figures {
		if f.ID == id {
			return f, true
		}
	}
	return Figure{}, false
}

// div is a/b, or 0 when b is 0.
func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// sample runs f n times and returns the durations.
func sample(n int, f func() error) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for range n {
		start := time.Now()
		if err := f(); err != nil {
			return nil, err
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

// pct is the p-th percentile (nearest rank) of d.
func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

// ms is d in milliseconds with microsecond resolution.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Markdown renders the report: a header with the machine and the run, one
// table row per figure (and per figure that was not measured).
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s on %s; bridge %s; %s mode (%d warm samples); the run took %.0f s.\n\n",
		r.Date, r.Machine, r.Bridge, r.Mode, r.Samples, r.Seconds)
	b.WriteString("| Figure | Value | Baseline (same run) | Ratio | Samples | Target | Met |\n|---|---|---|---|---|---|---|\n")
	skipped := func(at int) {
		for _, s := range r.Skipped {
			if s.at == at {
				fmt.Fprintf(&b, "| %s | not measured | %s | | 0 | | |\n", s.Name, s.Reason)
			}
		}
	}
	for i, f := range r.Figures {
		skipped(i)
		rat := fmt.Sprintf("%.3gx baseline", f.Ratio)
		switch {
		case f.RatioIs == Faster && f.Ratio >= 1:
			rat = fmt.Sprintf("%.3gx faster", f.Ratio)
		case f.RatioIs == Faster && f.Ratio > 0:
			rat = fmt.Sprintf("%.3gx slower", 1/f.Ratio)
		}
		met := ""
		if f.Met != nil {
			met = map[bool]string{true: "yes", false: "**no**"}[*f.Met]
		}
		fmt.Fprintf(&b, "| %s | %s | %s: %s | %s | %d | %s | %s |\n",
			f.Name, num(f.Value, f.Unit), f.Baseline, num(f.BaseVal, f.Unit), rat, f.Samples, f.Target, met)
	}
	skipped(len(r.Figures))
	return b.String()
}

// num formats a value with its unit: token counts as integers, the rest
// with four significant digits.
func num(v float64, unit string) string {
	if unit == "tokens" {
		return fmt.Sprintf("%.0f tokens", v)
	}
	return fmt.Sprintf("%.4g %s", v, unit)
}
