package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/bridge-mcp/bridge/protocol/search"
)

// ServeEchoServer serves a stdio MCP server with `echo` and `sleep` tools
// and the synthetic catalog of n tools, for the proxy, token and memory
// figures; catalogOnly serves the synthetic tools alone, so a catalog of n
// tools has exactly n.
func ServeEchoServer(ctx context.Context, in io.Reader, out io.Writer, n int, catalogOnly bool) error {
	s := server.NewMCPServer("bench-echo", "1", server.WithToolCapabilities(false))
	if !catalogOnly {
		addEchoTools(s)
	}
	for _, d := range search.Synthetic(n) {
		name := d.Server + "_" + d.ToolAlias
		schema := json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","description":"What to look for."},"limit":{"type":"integer"}},"required":["query"]}`)
		s.AddTool(mcp.NewToolWithRawSchema(name, d.Description, schema),
			func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText(fmt.Sprintf("called %s", name)), nil
			})
	}
	stdio := server.NewStdioServer(s)
	server.WithWorkerPoolSize(16)(stdio)
	return stdio.Listen(ctx, in, out)
}

// addEchoTools adds `echo` (returns its text), `sleep` (waits seconds),
// and `count` and `calls`: the calls of count that reached this process,
// for the approval figures.
func addEchoTools(s *server.MCPServer) {
	var counted atomic.Int64
	s.AddTool(mcp.NewToolWithRawSchema("count", "Count this call.", json.RawMessage(`{"type":"object","properties":{}}`)),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(fmt.Sprint(counted.Add(1))), nil
		})
	s.AddTool(mcp.NewToolWithRawSchema("calls", "How many count calls arrived.", json.RawMessage(`{"type":"object","properties":{}}`)),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(fmt.Sprint(counted.Load())), nil
		})
	s.AddTool(mcp.NewToolWithRawSchema("echo", "Return the text.",
		json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText(req.GetString("text", "")), nil
		})
	s.AddTool(mcp.NewToolWithRawSchema("sleep", "Sleep for seconds.",
		json.RawMessage(`{"type":"object","properties":{"seconds":{"type":"number"}},"required":["seconds"]}`)),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			t := time.NewTimer(time.Duration(req.GetFloat("seconds", 0) * float64(time.Second)))
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			return mcp.NewToolResultText("slept"), nil
		})
}
