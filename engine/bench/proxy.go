package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/tiktoken-go/tokenizer"

	"github.com/bridge-mcp/bridge/engine/search"
)

// proxyFigures measures a bridge that proxies the bench server with n
// synthetic tools: the tool entry's tokens against the classic alternative,
// proxy overhead against a direct client, search, and concurrency.
func proxyFigures(ctx context.Context, o Options, entry0 string) ([]Figure, error) {
	const n = 1000
	dir, err := os.MkdirTemp("", "bridge-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cfg := map[string]any{"mcpServers": map[string]any{"bench": map[string]any{
		"command": o.Bridge, "args": []string{"bench-server", "--tools", fmt.Sprint(n)}}}}
	data, _ := json.Marshal(cfg)
	if err := os.WriteFile(filepath.Join(dir, "bench.json"), data, 0o600); err != nil {
		return nil, err
	}
	env := append(append([]string{}, o.Env...), "MCP_BRIDGE_CONFIG_DIR="+dir, "MCP_BRIDGE_STATE_DIR="+dir, "MCP_BRIDGE_ALLOW_SELF_SERVER=1")
	c, stop, err := startClient(ctx, o.Bridge, env)
	if err != nil {
		return nil, err
	}
	defer stop()
	var figs []Figure
	codec, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		return nil, err
	}

	// Tokens: the entry must not change with the proxied catalog (G5).
	tools, err := c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, err
	}
	entryN, _ := json.Marshal(tools.Tools[0])
	t0, _ := codec.Count(entry0)
	tn, _ := codec.Count(string(entryN))
	if string(entryN) != entry0 {
		return nil, fmt.Errorf("bench: the tool entry changed with %d proxied tools", n)
	}
	direct, dstop, err := startDirect(ctx, o.Bridge, n)
	if err != nil {
		return nil, err
	}
	defer dstop()
	classic := map[int]int{}
	all, err := direct.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		return nil, err
	}
	for _, k := range []int{10, 100, 1000} {
		raw, _ := json.Marshal(all.Tools[:min(k, len(all.Tools))])
		classic[k], _ = codec.Count(string(raw))
	}
	figs = append(figs,
		Figure{Name: "tool entry tokens with 0 proxied tools (o200k)", Value: float64(t0), Unit: "tokens", Samples: 1, Target: "identical at 0 and 1,000"},
		Figure{Name: fmt.Sprintf("tool entry tokens with %d proxied tools (o200k)", n), Value: float64(tn), Unit: "tokens",
			Baseline: "classic: every tool schema in context", BaseVal: float64(classic[1000]), Ratio: float64(tn) / float64(classic[1000]), Samples: 1, Target: "identical at 0 and 1,000"},
		Figure{Name: "classic tools/list tokens, 10 / 100 tools (o200k)", Value: float64(classic[10]), Unit: "tokens",
			Baseline: "100 tools", BaseVal: float64(classic[100]), Ratio: float64(classic[10]) / float64(classic[100]), Samples: 1},
	)

	// Proxy overhead: N sequential echo calls timed inside the sandbox
	// against the same calls from a direct MCP client.
	samples := max(50, o.Samples)
	code := fmt.Sprintf(`import time, json
d = []
for i in range(%d):
    t = time.perf_counter()
    await mcp_bench.echo("x")
    d.append(time.perf_counter() - t)
print(json.dumps(d))`, samples+5)
	res, err := callServers(ctx, c, code, "bench")
	if err != nil {
		return nil, err
	}
	proxied, err := secondsList(res)
	if err != nil {
		return nil, err
	}
	proxied = proxied[5:]
	var directD []time.Duration
	for i := 0; i < samples+5; i++ {
		req := mcp.CallToolRequest{}
		req.Params.Name = "echo"
		req.Params.Arguments = map[string]any{"text": "x"}
		start := time.Now()
		if _, err := direct.CallTool(ctx, req); err != nil {
			return nil, err
		}
		if i >= 5 {
			directD = append(directD, time.Since(start))
		}
	}
	figs = append(figs, Figure{Name: "proxied echo from the sandbox, p50", Value: ms(pct(proxied, 50)), Unit: "ms",
		Baseline: "direct MCP client call to the same server", BaseVal: ms(pct(directD, 50)),
		Ratio: float64(pct(proxied, 50)) / float64(pct(directD, 50)), Samples: len(proxied), Target: "ratio <= 1.5"})

	// Search over the 1,000-tool catalog, from the sandbox and in-process,
	// against a substring scan of the same catalog (the reference's way).
	code = fmt.Sprintf(`import time, json
qs = ["read file", "list records", "send message", "delete user", "rdfile", "create issue"]
await runtime.search_tool_docs("warm up")
d = []
for i in range(%d):
    t = time.perf_counter()
    await runtime.search_tool_docs(qs[i %% len(qs)], limit=5)
    d.append(time.perf_counter() - t)
print(json.dumps(d))`, samples)
	if res, err = callServers(ctx, c, code); err != nil {
		return nil, err
	}
	sandboxSearch, err := secondsList(res)
	if err != nil {
		return nil, err
	}
	docs := search.Synthetic(n)
	ix := search.NewIndex(docs)
	queries := []string{"read file", "list records", "send message", "delete user", "rdfile", "create issue"}
	var inproc, scan []time.Duration
	for i := 0; i < samples; i++ {
		q := queries[i%len(queries)]
		start := time.Now()
		ix.Search(q, 5)
		inproc = append(inproc, time.Since(start))
		start = time.Now()
		substringScan(docs, q)
		scan = append(scan, time.Since(start))
	}
	figs = append(figs,
		Figure{Name: "search_tool_docs over 1,000 tools from the sandbox, p50", Value: ms(pct(sandboxSearch, 50)), Unit: "ms",
			Baseline: "in-process substring scan (reference ranking)", BaseVal: ms(pct(scan, 50)),
			Ratio: float64(pct(sandboxSearch, 50)) / float64(max(pct(scan, 50), time.Microsecond)), Samples: len(sandboxSearch), Target: "<= 5 ms"},
		Figure{Name: "BM25+fuzzy search over 1,000 tools in-process, p50", Value: ms(pct(inproc, 50)), Unit: "ms",
			Baseline: "in-process substring scan", BaseVal: ms(pct(scan, 50)),
			Ratio: float64(pct(inproc, 50)) / float64(max(pct(scan, 50), time.Microsecond)), Samples: len(inproc)},
	)

	// Three concurrent 1 s calls from one run_python call.
	code = `import asyncio, time
t = time.perf_counter()
await asyncio.gather(*[mcp_bench.sleep(1) for _ in range(3)])
print(time.perf_counter() - t)`
	if res, err = callServers(ctx, c, code, "bench"); err != nil {
		return nil, err
	}
	var took float64
	fmt.Sscanf(strings.TrimSpace(res), "%g", &took)
	figs = append(figs, Figure{Name: "three concurrent 1 s tool calls from one run_python", Value: took * 1000, Unit: "ms",
		Baseline: "the same calls one at a time (reference)", BaseVal: 3000, Ratio: 3000 / (took * 1000), Samples: 1, Target: "<= 1100 ms"})
	return figs, nil
}

// startDirect starts the bench server under a plain MCP client.
func startDirect(ctx context.Context, bin string, n int) (*client.Client, func(), error) {
	c, err := client.NewStdioMCPClient(bin, nil, "bench-server", "--tools", fmt.Sprint(n))
	if err != nil {
		return nil, nil, err
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = "2025-11-25"
	req.Params.ClientInfo = mcp.Implementation{Name: "bridge-bench-direct", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		c.Close()
		return nil, nil, err
	}
	return c, func() { c.Close() }, nil
}

func callServers(ctx context.Context, c *client.Client, code string, servers ...string) (string, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_python"
	req.Params.Arguments = map[string]any{"code": code, "servers": servers, "timeout": 120}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		return "", err
	}
	t, _ := res.Content[0].(mcp.TextContent)
	if res.IsError {
		return "", fmt.Errorf("bench: run_python failed: %s", t.Text)
	}
	return t.Text, nil
}

func secondsList(text string) ([]time.Duration, error) {
	var secs []float64
	if err := json.Unmarshal([]byte(strings.TrimSpace(text)), &secs); err != nil {
		return nil, fmt.Errorf("bench: %q: %w", text, err)
	}
	out := make([]time.Duration, len(secs))
	for i, s := range secs {
		out[i] = time.Duration(s * float64(time.Second))
	}
	return out, nil
}

// substringScan is the reference's search: every query word must appear
// in the name or description, in catalog order.
func substringScan(docs []search.Doc, q string) []int {
	words := strings.Fields(strings.ToLower(q))
	var out []int
	for i, d := range docs {
		hay := strings.ToLower(d.Tool + " " + d.Description)
		ok := true
		for _, w := range words {
			if !strings.Contains(hay, w) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, i)
		}
	}
	sort.Ints(out)
	return out
}
