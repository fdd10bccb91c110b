package tests

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// Client shapes: what the model sees of a tool result depends on which
// fields the client shows it.

// seenStructuredOnly is what a client that reads only structuredContent
// shows: the JSON of structuredContent, nothing when there is none.
func seenStructuredOnly(r *mcp.CallToolResult) string {
	if r.StructuredContent == nil {
		return ""
	}
	raw, _ := json.Marshal(r.StructuredContent)
	return string(raw)
}

// seenContentOnly is what a client that reads only content shows: the text
// blocks, and a line per image block.
func seenContentOnly(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		switch v := c.(type) {
		case mcp.TextContent:
			parts = append(parts, v.Text)
		case mcp.ImageContent:
			parts = append(parts, "[image "+v.MIMEType+"]")
		}
	}
	return strings.Join(parts, "\n")
}

// seenBoth is what a client that shows content and structuredContent shows.
func seenBoth(r *mcp.CallToolResult) string {
	return seenContentOnly(r) + "\n" + seenStructuredOnly(r)
}

// seenPreferStructured is Claude Code's shape: structuredContent when the
// result has it (content, images included, is then dropped), else content.
func seenPreferStructured(r *mcp.CallToolResult) string {
	if s := seenStructuredOnly(r); s != "" {
		return s
	}
	return seenContentOnly(r)
}

// TestClientShapes checks, end to end with the default
// MCP_BRIDGE_STRUCTURED=auto, that a client reading only structuredContent,
// one reading only content, one reading both, and a Claude-Code-like
// client (prefers structuredContent, recognised by clientInfo) all see the
// output, the value and the error of a call.
func TestClientShapes(t *testing.T) {
	requirePodman(t)
	cases := []struct {
		client string
		seen   func(*mcp.CallToolResult) string
		// structured: whether the result carries structuredContent.
		structured bool
		// wantOK and wantErr are substrings the model must see.
		wantOK, wantErr []string
	}{
		{"structured-only-client", seenStructuredOnly, true,
			[]string{`"stdout":["hi"]`, `"result":"42"`}, []string{`"status":"error"`, `"error":"ValueError: bad"`}},
		{"content-only-client", seenContentOnly, true,
			[]string{"hi\n42"}, []string{"ValueError: bad", "stderr:"}},
		{"both-client", seenBoth, true,
			[]string{"hi\n42", `"result":"42"`}, []string{"ValueError: bad", `"error":"ValueError: bad"`}},
		{"claude-code", seenPreferStructured, false,
			[]string{"hi\n42"}, []string{"ValueError: bad", "stderr:"}},
	}
	for _, tc := range cases {
		t.Run(tc.client, func(t *testing.T) {
			b := startBridgeAs(t, nil, []string{"run"}, tc.client)
			ok := b.run("print('hi')\n6 * 7")
			bad := b.run("raise ValueError('bad')")
			for _, r := range []*mcp.CallToolResult{ok, bad} {
				if got := r.StructuredContent != nil; got != tc.structured {
					t.Errorf("structuredContent present = %v, want %v: %s", got, tc.structured, seenBoth(r))
				}
			}
			if ok.IsError || !bad.IsError {
				t.Errorf("isError = %v, %v; want false, true", ok.IsError, bad.IsError)
			}
			for _, w := range tc.wantOK {
				if got := tc.seen(ok); !strings.Contains(got, w) {
					t.Errorf("success: the model sees %q, want it to contain %q", got, w)
				}
			}
			for _, w := range tc.wantErr {
				if got := tc.seen(bad); !strings.Contains(got, w) {
					t.Errorf("error: the model sees %q, want it to contain %q", got, w)
				}
			}
		})
	}
}

// TestStructuredModes checks MCP_BRIDGE_STRUCTURED=always and never against
// a Claude-Code-like client and a generic one.
func TestStructuredModes(t *testing.T) {
	requirePodman(t)
	for _, tc := range []struct {
		mode, client string
		want         bool
	}{
		{"always", "claude-code", true},
		{"never", "bridge-e2e", false},
		{"never", "claude-code", false},
	} {
		t.Run(tc.mode+"/"+tc.client, func(t *testing.T) {
			b := startBridgeAs(t, map[string]string{"MCP_BRIDGE_STRUCTURED": tc.mode}, []string{"run"}, tc.client)
			r := b.run("print('hi')")
			if got := r.StructuredContent != nil; got != tc.want {
				t.Errorf("structuredContent present = %v, want %v", got, tc.want)
			}
			if got := text(t, r); got != "hi" {
				t.Errorf("text = %q, want hi", got)
			}
		})
	}
}

// callWithin calls run_python with a client-side request timeout, as a
// client with a short request limit does.
func (b *bridge) callWithin(limit time.Duration, code string) (*mcp.CallToolResult, error) {
	return b.callArgsWithin(limit, map[string]any{"code": code})
}

func (b *bridge) callArgsWithin(limit time.Duration, args map[string]any) (*mcp.CallToolResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_python"
	req.Params.Arguments = args
	return b.c.CallTool(ctx, req)
}

// TestBackgroundJobOutlivesClientTimeout checks "start now, collect later":
// a 4 s job started by one call survives a client whose requests time out
// after 2 s, and later short calls collect its output and value. Output
// the job writes while other calls run stays out of their results.
func TestBackgroundJobOutlivesClientTimeout(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, nil)
	const limit = 2 * time.Second
	b.expectText("'warm'", "'warm'", false) // the session's container is up before the limit applies
	// The client limit is real: a plain 4 s call (in another session) does
	// not come back in time.
	if _, err := b.callArgsWithin(limit, map[string]any{"code": "import time; time.sleep(4)", "session": "plain"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a 4 s call under a 2 s client limit: err = %v, want a deadline error", err)
	}
	r, err := b.callWithin(limit, "job = runtime.start(\"import time\\nprint('started')\\ntime.sleep(4)\\nprint('finished')\\n6 * 7\")\njob")
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	if got := text(t, r); r.IsError || !strings.HasPrefix(got, "<Job job-1: running for ") {
		t.Fatalf("start returned %q (isError=%v), want a running job", got, r.IsError)
	}
	start := time.Now()
	b.expectText("print('other call')", "other call", false)
	var collected []string
	running := 0
	for {
		r, err := b.callWithin(limit, "runtime.result(job, wait=1)")
		if err != nil {
			t.Fatalf("collect: %v", err)
		}
		got := text(t, r)
		if r.IsError {
			t.Fatalf("collect failed: %s", got)
		}
		if strings.Contains(got, "<Job job-1: running for ") {
			running++
		}
		collected = append(collected, got)
		if strings.HasSuffix(got, "42") {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("the job was never collected: %q", collected)
		}
	}
	all := strings.Join(collected, "\n")
	if !strings.Contains(all, "started") || !strings.Contains(all, "finished\n42") || strings.Count(all, "started") != 1 {
		t.Errorf("collected %q, want started once, then finished and 42", collected)
	}
	if running == 0 {
		t.Errorf("no collection saw the job running: %q", collected)
	}
	// Collected again: the value again, the output not twice.
	b.expectText("runtime.result('job-1')", "42", false)
	if got := text(t, b.run("runtime.jobs()")); !strings.HasPrefix(got, "[<Job job-1: done in ") {
		t.Errorf("runtime.jobs() = %q", got)
	}
}

// TestBackgroundJobErrorsAndCap checks that a failing job re-raises when
// collected, and that a job's flood is capped like a call's output, with the
// full text saved under /workspace/.bridge/.
func TestBackgroundJobErrorsAndCap(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, map[string]string{"MCP_BRIDGE_MAX_OUTPUT_BYTES": "4096"})
	r := b.run("def boom():\n    raise KeyError('x')\nruntime.result(runtime.start(boom), wait=10)")
	if got := text(t, r); !r.IsError || !strings.Contains(got, "KeyError: 'x'") || !strings.Contains(got, "in boom") {
		t.Errorf("failed job: isError=%v %q", r.IsError, got)
	}
	r = b.run("async def co():\n    import asyncio\n    await asyncio.sleep(0.1)\n    return 'co'\nruntime.result(runtime.start(co()), wait=10)")
	if got := text(t, r); r.IsError || got != "'co'" {
		t.Errorf("coroutine job: %q", got)
	}
	r = b.run("j = runtime.start(\"for i in range(20000): print('line', i)\")\nruntime.result(j, wait=30)")
	got := text(t, r)
	if r.IsError || !strings.HasPrefix(got, "line 0\n") || !strings.HasSuffix(got, "line 19999") ||
		!strings.Contains(got, "bytes omitted; full output in /workspace/.bridge/job-3.txt") || len(got) > 4096+256 {
		t.Errorf("flooding job: isError=%v, %d bytes: %s ... %s", r.IsError, len(got), got[:min(len(got), 300)], tail(got, 300))
	}
	b.expectText("open('/workspace/.bridge/job-3.txt').read().count('\\n')", "20000", false)
	r = b.run("runtime.result('job-9')")
	if got := text(t, r); !r.IsError || !strings.Contains(got, "No background job 'job-9'") {
		t.Errorf("unknown job: %q", got)
	}
	r = b.run("runtime.start('def (')")
	if got := text(t, r); !r.IsError || !strings.Contains(got, "SyntaxError") {
		t.Errorf("job with a syntax error: %q", got)
	}
	b.expectText("len(runtime.jobs())", "3", false)
}

// toolEntry starts a bridge with env (no container runtime: tools/list
// never needs one) and returns its run_python entry as raw JSON.
func toolEntry(t *testing.T, env map[string]string) (string, map[string]any) {
	t.Helper()
	env["PATH"] = t.TempDir()
	b := startBridge(t, env)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tools, err := b.c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil || len(tools.Tools) != 1 {
		t.Fatalf("tools/list: %v %+v", err, tools)
	}
	raw, _ := json.Marshal(tools.Tools[0])
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return string(raw), m
}

// TestToolEntryMetaAndInventory checks that the entry carries
// _meta["anthropic/alwaysLoad"] unless MCP_BRIDGE_ALWAYS_LOAD=0, is
// byte-identical with 0, 1 and 50 configured servers, and lists the servers
// only with MCP_BRIDGE_TOOL_INVENTORY=names.
func TestToolEntryMetaAndInventory(t *testing.T) {
	servers := func(n int) map[string]any {
		m := map[string]any{}
		for i := 0; i < n; i++ {
			m[fmt.Sprintf("srv%02d", i)] = fake("--name", "x")
		}
		return m
	}
	var entries []string
	for _, n := range []int{0, 1, 50} {
		raw, m := toolEntry(t, withServers(t, servers(n), nil))
		if meta, _ := json.Marshal(m["_meta"]); string(meta) != `{"anthropic/alwaysLoad":true}` {
			t.Errorf("%d servers: _meta = %s", n, meta)
		}
		entries = append(entries, raw)
	}
	if entries[0] != entries[1] || entries[0] != entries[2] {
		t.Errorf("entries differ with 0, 1 and 50 servers:\n%s\n%s\n%s", entries[0], entries[1], entries[2])
	}
	if _, m := toolEntry(t, map[string]string{"MCP_BRIDGE_ALWAYS_LOAD": "0"}); m["_meta"] != nil {
		t.Errorf("MCP_BRIDGE_ALWAYS_LOAD=0: _meta = %v", m["_meta"])
	}
	withDesc := map[string]any{"github": map[string]any{"command": fakeBin, "description": "Issues and pull requests"}, "fs": fake()}
	_, m := toolEntry(t, withServers(t, withDesc, map[string]string{"MCP_BRIDGE_TOOL_INVENTORY": "names"}))
	desc, _ := m["description"].(string)
	if !strings.HasPrefix(desc, "Persistent offline Python sandbox") ||
		!(strings.HasSuffix(desc, " Servers: fs, github (Issues and pull requests).") || strings.HasSuffix(desc, " Servers: github (Issues and pull requests), fs.")) {
		t.Errorf("inventory description = %q", desc)
	}
}

// TestAutoModeDropsStructuredForImages: in the default auto mode a generic
// client keeps structuredContent on a text result, but a result carrying a
// figure is sent without it, so clients that prefer structuredContent still
// show the image (issue 15).
func TestAutoModeDropsStructuredForImages(t *testing.T) {
	requirePodman(t)
	b := startBridgeAs(t, nil, []string{"run"}, "bridge-e2e")
	if r := b.run("print('hi')"); r.StructuredContent == nil {
		t.Errorf("text result: structuredContent missing, want it kept for a generic client")
	}
	r := b.run("import matplotlib.pyplot as plt\nplt.plot([1, 2])\nplt.show()")
	images := 0
	for _, c := range r.Content {
		if _, ok := c.(mcp.ImageContent); ok {
			images++
		}
	}
	if images != 1 || r.StructuredContent != nil {
		t.Errorf("figure result: %d image blocks, structuredContent present = %v; want 1 image and no structuredContent", images, r.StructuredContent != nil)
	}
}
