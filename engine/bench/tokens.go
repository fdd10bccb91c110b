package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/tiktoken-go/tokenizer"

	"github.com/bridge-mcp/bridge/engine"
)

// referenceEntryO200k is the reference's tool entry in o200k_base tokens,
// as SPEC TOOL-1 measured it (the reference is not installed here).
const referenceEntryO200k = 209

// entryBudget is the TOOL-1 budget for the run_python entry (o200k).
const entryBudget = 150

// encodings are the tokenizers every token figure is counted with.
var encodings = []struct {
	short string
	enc   tokenizer.Encoding
}{{"o200k", tokenizer.O200kBase}, {"cl100k", tokenizer.Cl100kBase}}

// catalog is a set of servers the bridge proxies and the same servers as
// direct clients (the classic alternative puts every tools/list in
// context).
type catalog struct {
	id      string         // figure id suffix: 10, 100, 1000, real
	name    string         // for figure names
	servers map[string]any // the bridge's config entries
	direct  [][]string     // argv of each server for a direct client
	env     [][]string     // extra env of each direct server
	query   string         // the discovery flow's search
}

// catalogTokens is what one catalog costs in context, as text.
type catalogTokens struct {
	entry   string   // the bridge's run_python entry with the catalog loaded
	list    string   // the bridge's whole tools/list result
	classic string   // every server's tools/list result, concatenated
	tools   int      // tools in the classic lists
	flow    []string // a discovery flow: each call's request and result text
}

// tokenFigures counts, in o200k and cl100k, the bridge's tool entry and
// tools/list against the classic alternative for synthetic catalogs of 10,
// 100 and 1,000 tools and for the real npm servers, plus a discovery flow.
func tokenFigures(ctx context.Context, o Options, r *Report) error {
	count := map[string]func(string) int{}
	for _, e := range encodings {
		codec, err := tokenizer.Get(e.enc)
		if err != nil {
			return fmt.Errorf("bench: tokenizer: %w", err)
		}
		count[e.short] = func(s string) int { n, _ := codec.Count(s); return n }
	}

	p, stop, err := startBridge(ctx, o, nil)
	if err != nil {
		return err
	}
	pages, tools, err := p.toolsList(ctx)
	stop()
	if err != nil {
		return err
	}
	if len(tools) != 1 {
		return fmt.Errorf("bench: the bridge lists %d tools, want 1", len(tools))
	}
	entry0, list0 := tools[0], strings.Join(pages, "\n")
	n0 := count["o200k"](entry0)
	r.add(Figure{ID: "tokens.entry.o200k.0", Name: "run_python tool entry, 0 proxied tools (o200k)", Value: float64(n0), Unit: "tokens",
		Baseline: "reference entry (the Python project's published figure, not re-measured)", BaseVal: referenceEntryO200k, Samples: 1,
		Target: fmt.Sprintf("<= %d", entryBudget)}, n0 <= entryBudget)

	if err := inventoryFigures(ctx, o, r, count["o200k"], n0); err != nil {
		return err
	}

	cats := []catalog{}
	for _, k := range []int{10, 100, 1000} {
		cats = append(cats, catalog{
			id: fmt.Sprint(k), name: fmt.Sprintf("%s synthetic tools", map[int]string{10: "10", 100: "100", 1000: "1,000"}[k]),
			servers: map[string]any{"synthetic": benchServer(o, k, true)},
			direct:  [][]string{append([]string{o.Bridge}, benchServerArgs(k, true)...)}, env: [][]string{nil},
			query: "search milestone", // the first synthetic tool, in every catalog size
		})
	}
	realCat, cleanup, missing := realCatalog(o)
	defer cleanup()
	if missing != "" {
		fmt.Fprintf(o.Log, "bench: note: real-server token figures not measured: %s\n", missing)
	} else {
		cats = append(cats, realCat)
	}

	measured := make([]catalogTokens, len(cats))
	for i, cat := range cats {
		if measured[i], err = measureCatalog(ctx, o, cat); err != nil {
			return err
		}
	}
	for _, e := range encodings {
		c := count[e.short]
		for i, cat := range cats {
			m := measured[i]
			r.add(Figure{ID: "tokens.list." + e.short + "." + cat.id,
				Name:  fmt.Sprintf("bridge tools/list, %s (%s)", cat.name, e.short),
				Value: float64(c(m.list)), Unit: "tokens", Samples: 1,
				Baseline: fmt.Sprintf("classic: the proxied servers' tools/list (%d tools)", m.tools), BaseVal: float64(c(m.classic)),
				Target: "identical to 0 proxied tools"}, m.list == list0)
			if cat.id == "1000" {
				n := c(m.entry)
				target := "identical to 0 proxied tools"
				if e.short == "o200k" {
					target = fmt.Sprintf("<= %d; %s", entryBudget, target)
				}
				r.add(Figure{ID: "tokens.entry." + e.short + ".1000", Name: fmt.Sprintf("run_python tool entry, 1,000 proxied tools (%s)", e.short),
					Value: float64(n), Unit: "tokens", Baseline: "the same entry with 0 proxied tools", BaseVal: float64(c(entry0)),
					Samples: 1, Target: target}, m.entry == entry0 && (e.short != "o200k" || n <= entryBudget))
			}
		}
		if missing != "" {
			r.skip("tokens.list."+e.short+".real", "bridge tools/list, real npm servers ("+e.short+")", missing)
		}
		for i, cat := range cats {
			if cat.id != "1000" && cat.id != "real" {
				continue
			}
			m := measured[i]
			flow := c(m.entry)
			for _, s := range m.flow {
				flow += c(s)
			}
			r.add(Figure{ID: "tokens.discovery." + e.short + "." + cat.id,
				Name:  fmt.Sprintf("discovery flow: entry + search + full docs of one tool, %s (%s)", cat.name, e.short),
				Value: float64(flow), Unit: "tokens", Samples: 1,
				Baseline: "classic: the proxied servers' tools/list", BaseVal: float64(c(m.classic))}, true)
		}
		if missing != "" {
			r.skip("tokens.discovery."+e.short+".real", "discovery flow, real npm servers ("+e.short+")", missing)
		}
	}
	return nil
}

// realCatalog is the three npm test servers (everything, filesystem over a
// temporary root, memory with its file in that root); missing says which
// one is not installed.
func realCatalog(o Options) (cat catalog, cleanup func(), missing string) {
	cleanup = func() {}
	bin := filepath.Join(o.NPMDir, "node_modules", ".bin")
	for _, name := range []string{"mcp-server-everything", "mcp-server-filesystem", "mcp-server-memory"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			return cat, cleanup, fmt.Sprintf("%s is not installed in %s (npm install --prefix %s @modelcontextprotocol/server-everything @modelcontextprotocol/server-filesystem @modelcontextprotocol/server-memory, or --npm-dir)", name, bin, o.NPMDir)
		}
	}
	root, err := os.MkdirTemp("", "bridge-bench-fs-")
	if err != nil {
		return cat, cleanup, err.Error()
	}
	cleanup = func() { os.RemoveAll(root) }
	memFile := filepath.Join(root, "memory.jsonl")
	cat = catalog{
		id: "real", name: "real npm servers (everything, filesystem, memory)",
		servers: map[string]any{
			"everything": map[string]any{"command": filepath.Join(bin, "mcp-server-everything")},
			"filesystem": map[string]any{"command": filepath.Join(bin, "mcp-server-filesystem"), "args": []string{root}},
			"memory":     map[string]any{"command": filepath.Join(bin, "mcp-server-memory"), "env": map[string]string{"MEMORY_FILE_PATH": memFile}},
		},
		direct: [][]string{
			{filepath.Join(bin, "mcp-server-everything")},
			{filepath.Join(bin, "mcp-server-filesystem"), root},
			{filepath.Join(bin, "mcp-server-memory")},
		},
		env:   [][]string{nil, nil, {"MEMORY_FILE_PATH=" + memFile}},
		query: "read file",
	}
	return cat, cleanup, ""
}

// topHit finds the first hit's server and tool in a search result's repr.
var topHit = regexp.MustCompile(`'server': '([^']+)'.*?'tool': '([^']+)'`)

// measureCatalog runs the discovery flow against a bridge proxying cat (which
// loads every catalog), then takes the bridge's tools/list, and the classic
// tools/list from a direct client of each server.
func measureCatalog(ctx context.Context, o Options, cat catalog) (catalogTokens, error) {
	var m catalogTokens
	p, cleanup, err := startBridge(ctx, o, cat.servers)
	if err != nil {
		return m, err
	}
	defer cleanup()
	if err := p.awaitCatalogs(ctx); err != nil {
		return m, err
	}
	flowCall := func(code string) (string, error) {
		req, _ := json.Marshal(map[string]any{"name": "run_python", "arguments": map[string]any{"code": code}})
		text, err := p.runPython(ctx, map[string]any{"code": code})
		if err != nil {
			return "", err
		}
		m.flow = append(m.flow, string(req), text)
		return text, nil
	}
	hits, err := flowCall(fmt.Sprintf("await runtime.search_tool_docs(%q, limit=3)", cat.query))
	if err != nil {
		return m, err
	}
	top := topHit.FindStringSubmatch(hits)
	if top == nil {
		return m, fmt.Errorf("bench: search %q found nothing: %s", cat.query, hits)
	}
	if _, err := flowCall(fmt.Sprintf("await runtime.query_tool_docs(%q, %q, detail=\"full\")", top[1], top[2])); err != nil {
		return m, err
	}
	pages, tools, err := p.toolsList(ctx)
	if err != nil {
		return m, err
	}
	if len(tools) != 1 {
		return m, fmt.Errorf("bench: the bridge lists %d tools with %s, want 1", len(tools), cat.name)
	}
	m.entry, m.list = tools[0], strings.Join(pages, "\n")

	var classic []string
	for i, argv := range cat.direct {
		d, err := startMCP(ctx, argv, append(append([]string{}, o.Env...), cat.env[i]...))
		if err != nil {
			return m, err
		}
		pages, tools, err := d.toolsList(ctx)
		d.close()
		if err != nil {
			return m, err
		}
		classic = append(classic, pages...)
		m.tools += len(tools)
	}
	m.classic = strings.Join(classic, "\n")
	return m, nil
}

// inventoryFigures measures the run_python entry with
// MCP_BRIDGE_TOOL_INVENTORY=names at 0, 10, 100 and 1,000 configured
// servers (never started: the entry is built from the config alone). The
// inventory is capped, so the entry stays within the budget plus
// engine.InventoryBudget at any count; n0 is the entry without it.
func inventoryFigures(ctx context.Context, o Options, r *Report, count func(string) int, n0 int) error {
	limit := entryBudget + engine.InventoryBudget
	for _, k := range []int{0, 10, 100, 1000} {
		servers := map[string]any{}
		for i := 0; i < k; i++ {
			entry := benchServer(o, 1, true)
			entry["description"] = fmt.Sprintf("Synthetic bench server number %d", i)
			servers[fmt.Sprintf("server-%04d", i)] = entry
		}
		io := o
		io.Env = append(append([]string{}, o.Env...), "MCP_BRIDGE_TOOL_INVENTORY=names")
		p, stop, err := startBridge(ctx, io, servers)
		if err != nil {
			return err
		}
		_, tools, err := p.toolsList(ctx)
		stop()
		if err != nil {
			return err
		}
		if len(tools) != 1 {
			return fmt.Errorf("bench: the bridge lists %d tools with the inventory on, want 1", len(tools))
		}
		n := count(tools[0])
		r.add(Figure{ID: fmt.Sprintf("tokens.entry.inventory.o200k.%d", k),
			Name:  fmt.Sprintf("run_python entry with MCP_BRIDGE_TOOL_INVENTORY=names, %d servers (o200k)", k),
			Value: float64(n), Unit: "tokens", Samples: 1,
			Baseline: "the entry without the inventory", BaseVal: float64(n0),
			Target: fmt.Sprintf("<= %d (budget + inventory cap)", limit)}, n <= limit)
	}
	return nil
}
