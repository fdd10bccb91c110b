package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// proc is a running MCP server (a bridge or a proxied server) under an
// initialized mcp-go client.
type proc struct {
	c   *client.Client
	pid int
	env []string // its environment (its state directory, for the durable group)
}

// startMCP starts argv with env as a stdio MCP server and initializes it
// with the pinned legacy protocol version; opts configure the client (its
// handlers, which it then declares).
func startMCP(ctx context.Context, argv, env []string, opts ...client.ClientOption) (*proc, error) {
	p := &proc{env: env}
	var cmd *exec.Cmd
	tr := transport.NewStdioWithOptions(argv[0], nil, argv[1:],
		transport.WithCommandFunc(func(ctx context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
			cmd = exec.CommandContext(ctx, command, args...)
			cmd.Env = env
			return cmd, nil
		}))
	if err := tr.Start(ctx); err != nil {
		return nil, fmt.Errorf("bench: start %s: %w", argv[0], err)
	}
	if stderr := tr.Stderr(); stderr != nil {
		go func() { _, _ = io.Copy(io.Discard, stderr) }()
	}
	p.pid = cmd.Process.Pid
	p.c = client.NewClient(tr, opts...)
	if len(opts) > 0 {
		if err := p.c.Start(ctx); err != nil { // the handlers answer the server's requests
			p.close()
			return nil, fmt.Errorf("bench: start %s: %w", argv[0], err)
		}
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = "2025-11-25"
	req.Params.ClientInfo = mcp.Implementation{Name: "bridge-bench", Version: "1"}
	if _, err := p.c.Initialize(ctx, req); err != nil {
		p.close()
		return nil, fmt.Errorf("bench: initialize %s: %w", argv[0], err)
	}
	return p, nil
}

// isolated writes a config dir holding servers (name → config entry) and
// returns the environment of a bridge that reads only it and keeps its
// state there; cleanup removes the directory.
func isolated(o Options, servers map[string]any) (env []string, cleanup func(), err error) {
	dir, err := os.MkdirTemp("", "bridge-bench-")
	if err != nil {
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	if servers == nil {
		servers = map[string]any{}
	}
	data, _ := json.Marshal(map[string]any{"mcpServers": servers})
	if err := os.WriteFile(filepath.Join(dir, "bench.json"), data, 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, nil, fmt.Errorf("bench: %w", err)
	}
	env = append(append([]string{}, o.Env...), "MCP_BRIDGE_CONFIG_DIR="+dir, "MCP_BRIDGE_STATE_DIR="+dir,
		"MCP_SERVERS_CONFIG=", "MCP_BRIDGE_ALLOW_SELF_SERVER=1")
	return env, func() { os.RemoveAll(dir) }, nil
}

// startBridge starts `bridge run` proxying exactly servers (none when
// nil), isolated from the user's config and state; cleanup stops it.
func startBridge(ctx context.Context, o Options, servers map[string]any) (*proc, func(), error) {
	env, rm, err := isolated(o, servers)
	if err != nil {
		return nil, nil, err
	}
	p, err := startMCP(ctx, []string{o.Bridge, "run"}, env)
	if err != nil {
		rm()
		return nil, nil, err
	}
	return p, func() { p.close(); rm() }, nil
}

// benchServer is the config entry of the bench server with n synthetic
// tools; catalogOnly leaves out echo and sleep.
func benchServer(o Options, n int, catalogOnly bool) map[string]any {
	return map[string]any{"command": o.Bridge, "args": benchServerArgs(n, catalogOnly)}
}

func benchServerArgs(n int, catalogOnly bool) []string {
	args := []string{"bench-server", "--tools", fmt.Sprint(n)}
	if catalogOnly {
		args = append(args, "--catalog-only")
	}
	return args
}

func (p *proc) close() { _ = p.c.Close() }

var rawID atomic.Int64

// toolsList returns every page of tools/list exactly as the server sent it
// (compact JSON, one result object per page) and the tool objects.
func (p *proc) toolsList(ctx context.Context) (pages, tools []string, err error) {
	var cursor string
	for {
		var params any
		if cursor != "" {
			params = map[string]any{"cursor": cursor}
		}
		resp, err := p.c.GetTransport().SendRequest(ctx, transport.JSONRPCRequest{
			JSONRPC: "2.0", ID: mcp.NewRequestId(fmt.Sprintf("bench-%d", rawID.Add(1))), Method: "tools/list", Params: params,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("bench: tools/list: %w", err)
		}
		if resp.Error != nil {
			return nil, nil, fmt.Errorf("bench: tools/list: %s", resp.Error.Message)
		}
		var page bytes.Buffer
		if err := json.Compact(&page, resp.Result); err != nil {
			return nil, nil, fmt.Errorf("bench: tools/list: %w", err)
		}
		pages = append(pages, page.String())
		var res struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(resp.Result, &res); err != nil {
			return nil, nil, fmt.Errorf("bench: tools/list: %w", err)
		}
		for _, t := range res.Tools {
			var b bytes.Buffer
			_ = json.Compact(&b, t)
			tools = append(tools, b.String())
		}
		if res.NextCursor == "" {
			return pages, tools, nil
		}
		cursor = res.NextCursor
	}
}

// runPython calls run_python and returns content[0].text; a result with
// isError fails.
func (p *proc) runPython(ctx context.Context, args map[string]any) (string, error) {
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_python"
	req.Params.Arguments = args
	res, err := p.c.CallTool(ctx, req)
	if err != nil {
		return "", fmt.Errorf("bench: run_python: %w", err)
	}
	var text string
	if len(res.Content) > 0 {
		t, _ := res.Content[0].(mcp.TextContent)
		text = t.Text
	}
	if res.IsError {
		return "", fmt.Errorf("bench: run_python failed: %s", text)
	}
	return text, nil
}

// run runs code in session with the default timeout.
func (p *proc) run(ctx context.Context, code, session string) (string, error) {
	return p.runPython(ctx, map[string]any{"code": code, "session": session})
}

// runWith runs code in the default session with servers and a 120 s timeout.
func (p *proc) runWith(ctx context.Context, code string, servers ...string) (string, error) {
	return p.runPython(ctx, map[string]any{"code": code, "servers": servers, "timeout": 120})
}

// awaitCatalogs waits, up to a minute, until search covers every configured
// server: search answers from the catalogs at hand and names the servers
// still starting, so a figure taken before would measure an empty search.
func (p *proc) awaitCatalogs(ctx context.Context) error {
	const probe = `import warnings
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    await runtime.search_tool_docs("x", limit=1)
print(sum("search did not cover" in str(x.message) for x in w))`
	deadline := time.Now().Add(time.Minute)
	for {
		out, err := p.runPython(ctx, map[string]any{"code": probe, "session": "bench-catalogs"})
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) == "0" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: search still misses %s servers after a minute", strings.TrimSpace(out))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}
