package engine

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/tiktoken-go/tokenizer"
)

// ToolName is the one tool the bridge serves.
const ToolName = "run_python"

// ToolDescription is the shipped description (SPEC §4.2). Every call it
// names is run by a test exactly as written (TOOL-2).
const ToolDescription = "Persistent offline Python sandbox: variables and /workspace files " +
	"persist per session, top-level await works. Tools: await mcp_{server}.{tool}(...). " +
	"Helpers: runtime.discovered_servers(), await runtime.search_tool_docs('query'), " +
	"print(runtime.capability_summary()). timeout in seconds."

// AlwaysLoadKey is the tool _meta key that keeps Claude Code from deferring
// the tool behind its tool search.
const AlwaysLoadKey = "anthropic/alwaysLoad"

// InventoryBudget bounds, in o200k tokens, what MCP_BRIDGE_TOOL_INVENTORY=names
// adds to the description, whatever the number of configured servers.
const InventoryBudget = 100

// inventoryDescMax bounds one server's description in the inventory, in bytes.
const inventoryDescMax = 60

// ToolOption changes the run_python entry.
type ToolOption func(*toolOptions)

type toolOptions struct {
	alwaysLoad bool
	inventory  string
}

// WithAlwaysLoad sets whether the entry carries _meta["anthropic/alwaysLoad"]
// (MCP_BRIDGE_ALWAYS_LOAD; on by default).
func WithAlwaysLoad(on bool) ToolOption {
	return func(o *toolOptions) { o.alwaysLoad = on }
}

// WithInventory appends the inventory text (see Inventory) to the
// description; "" leaves the entry as it is.
func WithInventory(text string) ToolOption {
	return func(o *toolOptions) { o.inventory = text }
}

// Tool returns the run_python entry. It is built from a raw schema so the
// property order is fixed and annotations stay {} (TOOL-3). Without an
// inventory it depends only on the timeouts and options, never on the
// configured servers (TOOL-1).
func Tool(defTimeout, maxTimeout int, opts ...ToolOption) mcp.Tool {
	o := toolOptions{alwaysLoad: true}
	for _, opt := range opts {
		opt(&o)
	}
	schema := fmt.Sprintf(`{"type":"object","properties":{"code":{"type":"string"},`+
		`"servers":{"type":"array","items":{"type":"string"},"description":"servers the code uses"},`+
		`"timeout":{"type":"integer","minimum":1,"maximum":%d,"default":%d},`+
		`"session":{"type":"string"}},"required":["code"]}`, maxTimeout, defTimeout)
	t := mcp.NewToolWithRawSchema(ToolName, ToolDescription+o.inventory, []byte(schema))
	if o.alwaysLoad {
		t.Meta = &mcp.Meta{AdditionalFields: map[string]any{AlwaysLoadKey: true}}
	}
	return t
}

// InventoryServer is one configured server as the inventory names it.
type InventoryServer struct {
	Name, Description string
}

// Inventory is the text MCP_BRIDGE_TOOL_INVENTORY=names appends to the
// description: " Servers: a (what a does), b (...)." when every name and
// one-line description fits InventoryBudget o200k tokens, else the names
// alone, as many as fit, then "+N more". No servers give "".
func Inventory(servers []InventoryServer) string {
	if len(servers) == 0 {
		return ""
	}
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		return "" // the encoding is compiled in; unreachable
	}
	fits := func(s string) bool { n, err := enc.Count(s); return err == nil && n <= InventoryBudget }
	withDesc := make([]string, len(servers))
	for i, s := range servers {
		withDesc[i] = s.Name
		if d := oneLine(s.Description); d != "" {
			withDesc[i] += " (" + d + ")"
		}
	}
	if text := " Servers: " + strings.Join(withDesc, ", ") + "."; fits(text) {
		return text
	}
	// Names only, as many as fit with the "+N more" tail.
	text := ""
	for k := len(servers); k >= 0; k-- {
		names := make([]string, 0, k+1)
		for _, s := range servers[:k] {
			names = append(names, s.Name)
		}
		if k < len(servers) {
			names = append(names, fmt.Sprintf("+%d more", len(servers)-k))
		}
		text = " Servers: " + strings.Join(names, ", ") + "."
		if fits(text) {
			return text
		}
		if k > 64 { // far over the budget: skip ahead instead of counting every prefix
			k = 65
		}
	}
	return text
}

// oneLine is the first line of s, trimmed and cut to inventoryDescMax bytes
// on a rune boundary.
func oneLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	s = strings.TrimSpace(s)
	if len(s) <= inventoryDescMax {
		return s
	}
	cut := inventoryDescMax
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.TrimSpace(s[:cut]) + "…"
}

// Capabilities resource identity, kept from the reference (SPEC §2).
const (
	ResourceURI   = "resource://mcp-server-code-execution-mode/capabilities"
	ResourceName  = "code-execution-capabilities"
	ResourceTitle = "Code Execution Sandbox Helpers"
)

// Resource returns the capabilities resource entry for text.
func Resource(text string) mcp.Resource {
	return mcp.NewResource(ResourceURI, ResourceName,
		mcp.WithResourceTitle(ResourceTitle),
		mcp.WithResourceDescription("How to use run_python: sessions, limits, discovery, proxies."),
		mcp.WithMIMEType("text/markdown"),
		mcp.WithResourceSize(int64(len(text))),
	)
}

// ResourceText is the manual followed by the resource URI line (RES-2).
func ResourceText(manual string) string {
	return manual + "\n\nResource URI: " + ResourceURI
}
