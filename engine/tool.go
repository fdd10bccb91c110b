package engine

import (
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"
)

// ToolName is the one tool the bridge serves.
const ToolName = "run_python"

// ToolDescription is the shipped description (SPEC §4.2). Every call it
// names is run by a test exactly as written (TOOL-2).
const ToolDescription = "Run Python in a persistent sandbox without network. Variables, imports and /workspace files " +
	"persist per session; top-level await works. Call tools of the servers you list: " +
	"await mcp_{server}.{tool}(...). runtime is pre-imported: runtime.discovered_servers(), " +
	"await runtime.search_tool_docs('query'), print(runtime.capability_summary()). timeout is in seconds."

// Tool returns the run_python entry. It is built from a raw schema so the
// property order is fixed and annotations stay {} (TOOL-3); it depends only
// on the timeouts, never on the configured servers (TOOL-1).
func Tool(defTimeout, maxTimeout int) mcp.Tool {
	schema := fmt.Sprintf(`{"type":"object","properties":{"code":{"type":"string"},`+
		`"servers":{"type":"array","items":{"type":"string"}},`+
		`"timeout":{"type":"integer","minimum":1,"maximum":%d,"default":%d},`+
		`"session":{"type":"string"}},"required":["code"]}`, maxTimeout, defTimeout)
	return mcp.NewToolWithRawSchema(ToolName, ToolDescription, []byte(schema))
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
