// Package bench measures the bridge against baselines taken in the same
// run: the tool entry's tokens, warm and cold run_python latency over MCP
// stdio, and the reference's fresh-container-per-call cost.
package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/tiktoken-go/tokenizer"
)

// Options configure a run.
type Options struct {
	Bridge  string   // path of the bridge binary to measure
	Env     []string // environment of the bridge under test
	Samples int      // warm samples; baselines take Samples/5 (at least 5)
	// BaselineArgv is the full argv of one fresh container running
	// python3 -c 'print(1)' with the production flags (the reference's way).
	BaselineArgv []string
	Log          io.Writer
}

// Figure is one measurement with its baseline and their ratio.
type Figure struct {
	Name     string  `json:"name"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	Baseline string  `json:"baseline,omitempty"`
	BaseVal  float64 `json:"baselineValue,omitempty"`
	Ratio    float64 `json:"ratio,omitempty"` // baseline / value for latencies, value / baseline otherwise
	Samples  int     `json:"samples"`
	Target   string  `json:"target,omitempty"`
}

// Report is a whole run.
type Report struct {
	Date    string   `json:"date"`
	Machine string   `json:"machine"`
	Figures []Figure `json:"figures"`
}

// Run measures everything and returns the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Samples < 10 {
		o.Samples = 10
	}
	r := &Report{Date: time.Now().UTC().Format("2006-01-02"), Machine: machine()}
	c, stop, err := startClient(ctx, o.Bridge, o.Env)
	if err != nil {
		return nil, err
	}
	defer stop()

	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, fmt.Errorf("bench: tools/list: %w", err)
	}
	entry, _ := json.Marshal(tools.Tools[0])
	for _, enc := range []tokenizer.Encoding{tokenizer.O200kBase, tokenizer.Cl100kBase} {
		codec, err := tokenizer.Get(enc)
		if err != nil {
			return nil, fmt.Errorf("bench: tokenizer: %w", err)
		}
		n, _ := codec.Count(string(entry))
		f := Figure{Name: "tool entry tokens (" + string(enc) + ")", Value: float64(n), Unit: "tokens", Samples: 1}
		if enc == tokenizer.O200kBase {
			f.Baseline, f.BaseVal, f.Target = "reference entry (measured by the spec)", 209, "<= 150"
			f.Ratio = float64(n) / 209
		}
		r.Figures = append(r.Figures, f)
	}

	// Warm-up: the first call adopts the spare.
	if _, err := call(ctx, c, "print(1)", "default"); err != nil {
		return nil, err
	}
	warm, err := sample(o.Samples, func() error { _, err := call(ctx, c, "print(1)", "default"); return err })
	if err != nil {
		return nil, err
	}
	fresh, err := sample(max(5, o.Samples/5), func() error {
		out, err := exec.CommandContext(ctx, o.BaselineArgv[0], o.BaselineArgv[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("baseline container: %v: %s", err, out)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	base := pct(fresh, 50)
	r.Figures = append(r.Figures,
		Figure{Name: "warm run_python print(1) p50 (MCP stdio)", Value: ms(pct(warm, 50)), Unit: "ms",
			Baseline: "fresh container per call (reference)", BaseVal: ms(base), Ratio: ratio(base, pct(warm, 50)),
			Samples: len(warm), Target: "<= 5 ms; >= 25x"},
		Figure{Name: "warm run_python print(1) p95 (MCP stdio)", Value: ms(pct(warm, 95)), Unit: "ms",
			Baseline: "fresh container per call p95", BaseVal: ms(pct(fresh, 95)), Ratio: ratio(pct(fresh, 95), pct(warm, 95)),
			Samples: len(warm), Target: "<= 20 ms"},
	)

	// A new session with the spare ready: wait for the spare, then call.
	var spareReady []time.Duration
	for i := 0; i < max(3, o.Samples/20); i++ {
		time.Sleep(1500 * time.Millisecond)
		start := time.Now()
		if _, err := call(ctx, c, "print(1)", fmt.Sprintf("bench-spare-%d", i)); err != nil {
			return nil, err
		}
		spareReady = append(spareReady, time.Since(start))
	}
	r.Figures = append(r.Figures, Figure{Name: "first call of a new session, spare ready, p50", Value: ms(pct(spareReady, 50)),
		Unit: "ms", Baseline: "fresh container per call (reference)", BaseVal: ms(base), Ratio: ratio(base, pct(spareReady, 50)),
		Samples: len(spareReady), Target: "<= 10 ms"})

	// Cold: a new bridge process answering its first call (bridge exec),
	// timed to the result line; the process's teardown is not counted.
	var cold []time.Duration
	for i := 0; i < max(3, o.Samples/20); i++ {
		d, err := timeToFirstLine(ctx, o.Bridge, o.Env)
		if err != nil {
			return nil, fmt.Errorf("bench: %w", err)
		}
		cold = append(cold, d)
	}
	pf, err := proxyFigures(ctx, o, string(entry))
	if err != nil {
		return nil, err
	}
	defer func() { r.Figures = append(r.Figures, pf...) }()
	r.Figures = append(r.Figures, Figure{Name: "cold session: new bridge process to first result (bridge exec)",
		Value: ms(pct(cold, 50)), Unit: "ms", Baseline: "fresh container per call (reference)", BaseVal: ms(base),
		Ratio: ratio(base, pct(cold, 50)), Samples: len(cold), Target: "<= 300 ms"})
	return r, nil
}

// timeToFirstLine runs `bridge exec print(1)` and returns the time until it
// printed its result line; the process's teardown is waited for but not
// counted.
func timeToFirstLine(ctx context.Context, bin string, env []string) (time.Duration, error) {
	cmd := exec.CommandContext(ctx, bin, "exec", "print(1)")
	cmd.Env = env
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	elapsed := time.Since(start)
	_, _ = io.Copy(io.Discard, out)
	werr := cmd.Wait()
	if err != nil || line != "1\n" || werr != nil {
		return 0, fmt.Errorf("bridge exec printed %q: %v %v", line, err, werr)
	}
	return elapsed, nil
}

func startClient(ctx context.Context, bin string, env []string) (*client.Client, func(), error) {
	tr := transport.NewStdioWithOptions(bin, nil, []string{"run"},
		transport.WithCommandFunc(func(ctx context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
			cmd := exec.CommandContext(ctx, command, args...)
			cmd.Env = env
			return cmd, nil
		}))
	if err := tr.Start(ctx); err != nil {
		return nil, nil, fmt.Errorf("bench: start bridge: %w", err)
	}
	go func() { _, _ = io.Copy(io.Discard, tr.Stderr()) }()
	c := client.NewClient(tr)
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = "2025-11-25"
	req.Params.ClientInfo = mcp.Implementation{Name: "bridge-bench", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("bench: initialize: %w", err)
	}
	return c, func() { c.Close() }, nil
}

func call(ctx context.Context, c *client.Client, code, session string) (*mcp.CallToolResult, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_python"
	req.Params.Arguments = map[string]any{"code": code, "session": session}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("bench: run_python: %w", err)
	}
	if res.IsError {
		t, _ := res.Content[0].(mcp.TextContent)
		return nil, fmt.Errorf("bench: run_python failed: %s", t.Text)
	}
	return res, nil
}

func sample(n int, f func() error) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
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
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func ratio(base, v time.Duration) float64 {
	if v <= 0 {
		return 0
	}
	return float64(base) / float64(v)
}

func machine() string {
	model := ""
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				model = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	return fmt.Sprintf("%s/%s, %d cores, %s, %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), model, runtime.Version())
}

// Markdown renders the report as a table.
func (r *Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Measured %s on %s.\n\n", r.Date, r.Machine)
	b.WriteString("| Figure | Value | Baseline (same run) | Ratio | Samples | Target |\n|---|---|---|---|---|---|\n")
	for _, f := range r.Figures {
		base, rat := "", ""
		if f.Baseline != "" {
			base = fmt.Sprintf("%s: %.4g %s", f.Baseline, f.BaseVal, f.Unit)
			rat = fmt.Sprintf("%.3gx", f.Ratio)
		}
		fmt.Fprintf(&b, "| %s | %.4g %s | %s | %s | %d | %s |\n", f.Name, f.Value, f.Unit, base, rat, f.Samples, f.Target)
	}
	return b.String()
}
