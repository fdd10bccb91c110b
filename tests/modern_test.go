package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// modernLine is one message a modernserver logged (tests/modernserver).
type modernLine struct {
	Event    string            `json:"event"`
	Method   string            `json:"method"`
	ID       json.RawMessage   `json:"id"`
	Version  string            `json:"version"`
	Caps     bool              `json:"caps"`
	Info     bool              `json:"info"`
	TasksExt bool              `json:"tasksExt"`
	Headers  map[string]string `json:"headers"`
}

// modernLog reads a modernserver's log.
func modernLog(t *testing.T, path string) []modernLine {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("modern server log: %v", err)
	}
	defer f.Close()
	var out []modernLine
	in := bufio.NewScanner(f)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	for in.Scan() {
		var l modernLine
		if err := json.Unmarshal(in.Bytes(), &l); err != nil {
			t.Fatalf("modern server log line %q: %v", in.Text(), err)
		}
		out = append(out, l)
	}
	return out
}

// checkModernRequests fails for each request after discovery that lacked
// the 2026-07-28 _meta (and, over HTTP, the standard headers); it returns
// the methods seen, in order.
func checkModernRequests(t *testing.T, name string, lines []modernLine, http bool) []string {
	t.Helper()
	var methods []string
	discovered := false
	for _, l := range lines {
		if l.Event != "" {
			continue
		}
		methods = append(methods, l.Method)
		if l.Method == "server/discover" {
			discovered = true
		}
		if !discovered || l.ID == nil || string(l.ID) == "null" || strings.HasPrefix(l.Method, "notifications/") {
			continue
		}
		if l.Version != "2026-07-28" || !l.Caps || !l.Info {
			t.Errorf("%s: %s after discovery carried version %q, capabilities %v, client info %v; want all three", name, l.Method, l.Version, l.Caps, l.Info)
		}
		if l.Method == "tools/call" && !l.TasksExt {
			t.Errorf("%s: tools/call did not declare the tasks extension", name)
		}
		if http && (l.Headers["Mcp-Protocol-Version"] != "2026-07-28" || l.Headers["Mcp-Method"] != l.Method) {
			t.Errorf("%s: %s headers %v; want Mcp-Protocol-Version and Mcp-Method", name, l.Method, l.Headers)
		}
	}
	if !discovered {
		t.Errorf("%s: no server/discover in %v", name, methods)
	}
	return methods
}

// TestModernServers: two servers that speak only MCP 2026-07-28 (refusing
// initialize with -32022, and any request without its _meta), one over
// stdio and one over streamable HTTP, beside the legacy everything server.
// Cells mix the eras; search covers the modern tools; structured content,
// an x-mcp-header parameter, resources, progress, cancel, input_required
// rounds relayed to an elicitation-capable client, tasks (with and without
// input), and tool list changes on the subscriptions/listen stream work;
// describe_server shows each era; and on the servers' side every request
// after discovery carried the _meta version.
func TestModernServers(t *testing.T) {
	requirePodman(t)
	dir := t.TempDir()
	stdioLog, httpLog := filepath.Join(dir, "stdio.jsonl"), filepath.Join(dir, "http.jsonl")
	url := httpFixture(t, modernBin, "--log", httpLog, "--name", "modern-web")
	h := newHuman(t, func(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
		if strings.Contains(req.Params.Message, "Continue the task?") {
			return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
				Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"ok": true}}}, nil
		}
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{
			Action: mcp.ElicitationResponseActionAccept, Content: map[string]any{"colour": "teal"}}}, nil
	})
	env := withServers(t, map[string]any{
		"everything": map[string]any{"command": npmBin(t, "mcp-server-everything")},
		"modern":     map[string]any{"command": modernBin, "args": []string{"--log", stdioLog}},
		"modernweb":  map[string]any{"type": "http", "url": url},
	}, map[string]string{"MCP_BRIDGE_STATE_DIR": filepath.Join(dir, "state")})
	b := startBridgeDir(t, "", env, bridgeBin, []string{"run"}, "bridge-e2e", client.WithElicitationHandler(h))
	all := []string{"everything", "modern", "modernweb"}

	// Mixed eras in one cell.
	got := b.mustOK(`s = await mcp_everything.get_sum(a=1, b=2)
a = await mcp_modern.echo(text='hi')
w = await mcp_modernweb.echo(text='web')
print(s, '|', a, '|', w)`, all...)
	if !strings.Contains(got, "3") || !strings.Contains(got, "hi") || !strings.Contains(got, "web") {
		t.Errorf("mixed-era cell: %s", got)
	}
	// Search covers the modern tools.
	got = b.eventually(`print([d["server"] + "." + d["tool"] for d in await runtime.search_tool_docs("region lookup", limit=10)])`,
		func(s string) bool {
			return strings.Contains(s, "modern.lookup") && strings.Contains(s, "modernweb.lookup")
		}, all...)
	if !strings.Contains(got, "modernweb.lookup") {
		t.Errorf("search over the modern servers: %s", got)
	}
	// An x-mcp-header parameter reaches the HTTP server as its header (it
	// refuses the call otherwise), resources work, and describe_server
	// names the era.
	got = b.mustOK(`print(await mcp_modernweb.lookup(region='eu-west'))
print(await runtime.read_resource('modern', 'modern://note'))
print(runtime.describe_server('modernweb')['protocol'])
print(runtime.describe_server('everything')['protocol'])`, all...)
	for _, want := range []string{"region eu-west", "a modern note", "modern (2026-07-28), probed ", "legacy (2025-"} {
		if !strings.Contains(got, want) {
			t.Errorf("lookup, resource, describe_server: %q lacks %q", got, want)
		}
	}
	// input_required rounds, relayed to the client, on both transports.
	got = b.mustOK("print(await mcp_modern.ask())\nprint(await mcp_modernweb.ask())", all...)
	if strings.Count(got, "answer: accept teal") != 2 {
		t.Errorf("input_required round trips: %s", got)
	}
	qs := h.questions()
	if len(qs) != 2 || !strings.HasPrefix(qs[0].Params.Message, "modern.ask asks: Pick a colour") {
		t.Errorf("questions relayed: %d, first %q; want 2 naming the server and tool", len(qs), firstMessage(qs))
	}
	// Tasks: one that just runs, one that asks for input on the way.
	got = b.mustOK("print(await mcp_modern.task(seconds=0.5))\nprint(await mcp_modernweb.task(seconds=-0.3))", all...)
	if !strings.Contains(got, "task done") || !strings.Contains(got, "task answered: accept") {
		t.Errorf("modern tasks: %s", got)
	}
	// A tool list change reaches the bridge on the server's
	// subscriptions/listen stream (2026-07-28 sends it nowhere else), and
	// the new tool becomes callable.
	got = b.mustOK("print(await mcp_modern.grow())\nprint(await mcp_modernweb.grow())", all...)
	if strings.Count(got, "grown; 1 listeners told") != 2 {
		t.Errorf("grow: %s; want each server to have one listener (the bridge's subscriptions/listen)", got)
	}
	got = b.eventually("print(hasattr(mcp_modern, 'extra'), hasattr(mcp_modernweb, 'extra'))",
		func(s string) bool { return strings.Contains(s, "True True") }, all...)
	if !strings.Contains(got, "True True") {
		t.Errorf("the tool added after list_changed: %s", got)
	}
	// Progress reaches the client; a cell timeout cancels the request on
	// stdio (notifications/cancelled) and over HTTP (the stream closes).
	rec := &progressRecorder{token: "tok-modern"}
	b.c.OnNotification(rec.handle)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := b.callTokenCtx(ctx, map[string]any{"code": "print(await mcp_modern.slow(seconds=0.6))", "servers": all, "timeout": 30}, "tok-modern")
	if err != nil || r.IsError || !strings.Contains(text(t, r), "slow done") {
		t.Fatalf("slow: %v %v", err, r)
	}
	if ps, _ := rec.snapshot(); !anyProgress(ps, "modern.slow: ") {
		t.Errorf("no progress from the modern server reached the client: %v", ps)
	}
	r = b.call(map[string]any{"code": "import asyncio\nawait asyncio.gather(mcp_modern.slow(seconds=30), mcp_modernweb.slow(seconds=30))",
		"servers": all, "timeout": 2})
	if got := text(t, r); !strings.Contains(got, "timed out") {
		t.Errorf("cell timeout: %s", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, path := range []string{stdioLog, httpLog} {
		for !hasEvent(modernLog(t, path), "cancelled") && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		if !hasEvent(modernLog(t, path), "cancelled") {
			t.Errorf("%s: the abandoned slow call was not cancelled", filepath.Base(path))
		}
	}
	b.Close()

	for _, c := range []struct {
		name, path string
		http       bool
	}{{"stdio", stdioLog, false}, {"http", httpLog, true}} {
		methods := checkModernRequests(t, c.name, modernLog(t, c.path), c.http)
		t.Logf("%s server saw %v", c.name, methods)
	}
}

func firstMessage(qs []mcp.ElicitationRequest) string {
	if len(qs) == 0 {
		return ""
	}
	return qs[0].Params.Message
}

func anyProgress(ps []mcp.ProgressNotificationParams, prefix string) bool {
	for _, p := range ps {
		if strings.HasPrefix(p.Message, prefix) {
			return true
		}
	}
	return false
}

func hasEvent(lines []modernLine, event string) bool {
	for _, l := range lines {
		if l.Event == event {
			return true
		}
	}
	return false
}

// TestModernServerUpgraded: a server remembered as legacy (its catalog
// says so) that is now modern-only is reached in one start: initialize is
// refused, and server/discover follows in the same start. The next bridge
// goes straight to server/discover, with no initialize at all.
func TestModernServerUpgraded(t *testing.T) {
	requirePodman(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	log := filepath.Join(dir, "modern.jsonl")
	// The config names a script whose target changes between runs, so the
	// config hash (the catalog's key) stays the same.
	target := filepath.Join(dir, "target")
	script := filepath.Join(dir, "server.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\nexec $(cat "+target+") \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	env := withServers(t, map[string]any{"up": map[string]any{"command": script}}, map[string]string{"MCP_BRIDGE_STATE_DIR": state})
	setTarget := func(argv ...string) {
		if err := os.WriteFile(target, []byte(strings.Join(argv, " ")), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	setTarget(fakeBin)
	b := startBridge(t, env)
	b.mustOK("print(await mcp_up.echo(text='legacy'))", "up")
	got := b.mustOK("print(runtime.describe_server('up')['protocol'])", "up")
	b.Close()
	if !strings.HasPrefix(got, "legacy") {
		t.Fatalf("the fake server was reached as %q, want legacy", got)
	}

	setTarget(modernBin, "--log", log)
	b = startBridge(t, env)
	got = b.mustOK("print(await mcp_up.echo(text='upgraded'))\nprint(runtime.describe_server('up')['protocol'])", "up")
	b.Close()
	if !strings.Contains(got, "upgraded") || !strings.Contains(got, "modern (2026-07-28)") {
		t.Fatalf("the upgraded server: %s", got)
	}
	if starts := strings.Count(b.stderr.String(), `"server ready"`); starts != 1 {
		t.Errorf("the upgraded server started %d times, want once:\n%s", starts, tail(b.stderr.String(), 3000))
	}
	first := checkModernRequests(t, "upgraded", modernLog(t, log), false)
	if len(first) < 2 || first[0] != "initialize" || first[1] != "server/discover" {
		t.Errorf("the upgraded server saw %v; want initialize, then server/discover", first)
	}

	_ = os.Remove(log)
	b = startBridge(t, env)
	b.mustOK("print(await mcp_up.echo(text='again'))", "up")
	b.Close()
	again := checkModernRequests(t, "remembered", modernLog(t, log), false)
	if len(again) == 0 || again[0] != "server/discover" || contains(again, "initialize") {
		t.Errorf("a server remembered as modern saw %v; want server/discover first and no initialize", again)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
