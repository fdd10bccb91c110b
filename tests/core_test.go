package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/tiktoken-go/tokenizer"
)

// TestHandshake checks serverInfo, capabilities and the one tool entry
// (MCP-1, TOOL-1, TOOL-3), including its o200k token budget.
func TestHandshake(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, nil)
	ver, err := exec.Command(bridgeBin, "version").Output()
	if err != nil {
		t.Fatalf("bridge version: %v", err)
	}
	if got, want := b.init.ServerInfo.Name, "bridge"; got != want {
		t.Errorf("serverInfo.name = %q, want %q", got, want)
	}
	if !strings.HasPrefix(string(ver), "bridge "+b.init.ServerInfo.Version+" (") {
		t.Errorf("serverInfo.version %q does not match `bridge version` output %q", b.init.ServerInfo.Version, ver)
	}
	if b.init.Capabilities.Tools == nil || b.init.Capabilities.Resources == nil || b.init.Capabilities.Prompts != nil {
		t.Errorf("capabilities = %+v, want tools and resources only", b.init.Capabilities)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tools, err := b.c.ListTools(ctx, mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 1 || tools.Tools[0].Name != "run_python" {
		t.Fatalf("tools = %+v, want exactly run_python", tools.Tools)
	}
	entry, _ := json.Marshal(tools.Tools[0])
	var generic map[string]any
	_ = json.Unmarshal(entry, &generic)
	if ann, _ := json.Marshal(generic["annotations"]); string(ann) != "{}" {
		t.Errorf("annotations = %s, want {}", ann)
	}
	props, _ := json.Marshal(generic["inputSchema"])
	for _, k := range []string{`"code"`, `"servers"`, `"timeout"`, `"session"`} {
		if !strings.Contains(string(props), k) {
			t.Errorf("inputSchema lacks %s: %s", k, props)
		}
	}
	enc, err := tokenizer.Get(tokenizer.O200kBase)
	if err != nil {
		t.Fatal(err)
	}
	n, err := enc.Count(string(entry))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("tool entry: %d o200k tokens", n)
	if n > 150 {
		t.Errorf("tool entry costs %d o200k tokens, budget 150: %s", n, entry)
	}
}

// TestHandshakeWithoutRuntime checks that initialize and tools/list answer
// at once with no container runtime, and that a call then gets the
// reference's one-line error while the server stays up (RT-1, SES-2).
func TestHandshakeWithoutRuntime(t *testing.T) {
	start := time.Now()
	b := startBridge(t, map[string]string{"PATH": t.TempDir(), "MCP_BRIDGE_RUNTIME": "", "MCP_BRIDGE_UNSAFE_LOCAL": ""})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := b.c.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
		t.Fatal(err)
	}
	t.Logf("spawn to tools/list: %v", time.Since(start))
	want := "No container runtime found. Install podman or rootless docker and set MCP_BRIDGE_RUNTIME if multiple runtimes are available."
	for i := 0; i < 2; i++ {
		r := b.run("print(1)")
		sc := structured(t, r)
		if !r.IsError || sc["error"] != want {
			t.Fatalf("call %d: isError=%v structured=%v, want error %q", i, r.IsError, sc, want)
		}
	}
	if err := b.c.Ping(ctx); err != nil {
		t.Fatalf("bridge not serving after the failed calls: %v", err)
	}
}

// TestHelloWorld checks the reference's byte-for-byte compact forms (§8.5).
func TestHelloWorld(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, nil)
	b.expectText(`print("hello"); print("world")`, "hello\nworld", false)
	b.expectText(`import sys; print("err", file=sys.stderr)`, "stderr:\nerr", false)
	b.expectText(`import sys; print("a", end=""); print("c"); print("b", file=sys.stderr)`, "ac\nstderr:\nb", false)
	b.expectText(`x = 1`, "Success (no output)", false)
	b.expectText(`print("  x"); print(); print(())`, "  x\n\n()", false)
	b.expectText(`1 + 1`, "2", false)
	r := b.run(`print("hi")`)
	sc := structured(t, r)
	if lines, _ := sc["stdout"].([]any); len(lines) != 1 || lines[0] != "hi" {
		t.Errorf("structured stdout = %v, want [hi]", sc["stdout"])
	}
	if _, ok := sc["status"]; ok {
		t.Errorf("compact structuredContent has status on success: %v", sc)
	}
}

// TestLinkTransport checks which link a sandbox gets: a socket of its own
// on podman (fd 3 through --preserve-fds, no stdio relay), the container's
// stdio on Docker and with MCP_BRIDGE_LINK=stdio; calls, output and
// proxied requests work over each.
func TestLinkTransport(t *testing.T) {
	requirePodman(t)
	const probe = "import os, stat, sys\nL = sys.modules['mcp.runtime'].LINK\n" +
		"print(stat.S_ISSOCK(os.fstat(L._wfd).st_mode), stat.S_ISSOCK(os.fstat(L._r).st_mode), type(await runtime.list_servers()).__name__)"
	// Docker's and Kubernetes' (attach) links are always stdio.
	socket := testRuntime() != "docker" && testRuntime() != "kubernetes"
	for _, c := range []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"auto", nil, socket},
		{"stdio", map[string]string{"MCP_BRIDGE_LINK": "stdio"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := startBridge(t, c.env)
			want := fmt.Sprintf("%v %v tuple", pyBool(c.want), pyBool(c.want))
			b.expectText(probe, want, false)
			b.expectText("print('again')", "again", false)
		})
	}
}

func pyBool(v bool) string {
	if v {
		return "True"
	}
	return "False"
}

// TestPersistence checks that globals, imports, functions, classes and
// /workspace files persist across calls of one session (SES-1).
func TestPersistence(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, nil)
	b.expectText("import json\nx = 41\ndef inc(v):\n    return v + 1\nclass P:\n    pass\n_ = open('/workspace/f.txt', 'w').write('kept')", "Success (no output)", false)
	b.expectText("print(inc(x), json.dumps([1]), P.__name__, open('/workspace/f.txt').read())", "42 [1] P kept", false)
	b.expectText("import pickle\nlen(pickle.dumps(P())) > 0", "True", false)
}

// TestSessionsAreIndependent checks that named sessions share nothing.
func TestSessionsAreIndependent(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, nil)
	b.call(map[string]any{"code": "v = 'a'", "session": "a"})
	b.call(map[string]any{"code": "v = 'b'", "session": "b"})
	ra := b.call(map[string]any{"code": "v", "session": "a"})
	rb := b.call(map[string]any{"code": "v", "session": "b"})
	if text(t, ra) != "'a'" || text(t, rb) != "'b'" {
		t.Fatalf("session a = %q, b = %q", text(t, ra), text(t, rb))
	}
	rd := b.run("'v' in globals()")
	if text(t, rd) != "False" {
		t.Fatalf("default session sees v: %q", text(t, rd))
	}
	if sc := structured(t, ra); sc["session"] != "a" {
		t.Errorf("structured session = %v, want a", sc["session"])
	}
}

// TestExecutionSemantics covers EXE-2..6: top-level await, asyncio.run,
// __main__, input() at EOF and SystemExit.
func TestExecutionSemantics(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, nil)
	b.expectText("import asyncio\nawait asyncio.sleep(0.01)\n'awaited'", "'awaited'", false)
	b.expectText("import asyncio\nasync def main():\n    return 7\nasyncio.run(main())", "7", false)
	b.expectText("await asyncio.sleep(0)\nasyncio.run(main())", "7", false)
	b.expectText("await main()", "7", false)
	b.expectText("if __name__ == '__main__':\n    print('main')", "main", false)
	r := b.run("input()")
	if sc := structured(t, r); sc["error"] != "EOFError: EOF when reading a line" {
		t.Errorf("input(): %v", sc)
	}
	b.expectText("import sys\nsys.exit()", "Success (no output)", false)
	r = b.run("import sys\nsys.exit(3)")
	if sc := structured(t, r); sc["exitCode"] != 3.0 || sc["error"] != "SystemExit: 3" {
		t.Errorf("sys.exit(3): %v", sc)
	}
	b.expectText("import os\nos.write(1, b'fd out\\n')\nos.system('echo from shell')", "stderr:\nfd out\nfrom shell\n0", false)
}

// TestExceptions checks the error string, exit code and a traceback of user
// frames only (EXE-7).
func TestExceptions(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, nil)
	r := b.run("def f():\n    raise ValueError('bad')\nf()")
	sc := structured(t, r)
	if !r.IsError || sc["status"] != "error" || sc["exitCode"] != 1.0 || sc["error"] != "ValueError: bad" {
		t.Fatalf("structured = %v", sc)
	}
	got := text(t, r)
	for _, want := range []string{"status: error", "exit: 1", `File "<cell-1>", line 3, in <module>`, `File "<cell-1>", line 2, in f`, "ValueError: bad"} {
		if !strings.Contains(got, want) {
			t.Errorf("text lacks %q:\n%s", want, got)
		}
	}
	for _, bad := range []string{"<bridge/", "worker.py", "asyncio"} {
		if strings.Contains(got, bad) {
			t.Errorf("traceback shows entrypoint frames (%q):\n%s", bad, got)
		}
	}
	r = b.run("import asyncio\nawait asyncio.sleep(0)\nraise KeyError()")
	if sc := structured(t, r); sc["error"] != "KeyError" || strings.Contains(text(t, r), "asyncio/") {
		t.Errorf("async exception: %v\n%s", sc, text(t, r))
	}
	r = b.run("x = (")
	if got := text(t, r); !strings.Contains(got, `File "<cell-3>", line 1`) || !strings.Contains(got, "SyntaxError") {
		t.Errorf("syntax error text:\n%s", got)
	}
	b.expectText("print('still alive')", "still alive", false)
}

// TestTimeoutKeepsSession checks TMO-2's first branch: an interruptible cell
// ends with the output so far and the session keeps its state.
func TestTimeoutKeepsSession(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, nil)
	b.run("kept = 'yes'")
	start := time.Now()
	r := b.call(map[string]any{"code": "import time\nprint('start')\ntime.sleep(30)", "timeout": 2})
	if el := time.Since(start); el > 6*time.Second {
		t.Errorf("timeout took %v", el)
	}
	// One line: the timeout, the state kept, how high timeout may go
	// (MCP_BRIDGE_MAX_TIMEOUT: 120 by default) and runtime.start.
	if got, want := text(t, r), "status: timeout\nstart\nerror: "+timeoutKept(2, 120); got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	sc := structured(t, r)
	if sc["timeoutSeconds"] != 2.0 || sc["stateLost"] != nil {
		t.Errorf("structured = %v", sc)
	}
	b.expectText("kept", "'yes'", false)
	r = b.call(map[string]any{"code": "while True:\n    pass", "timeout": 1})
	if sc := structured(t, r); sc["status"] != "timeout" || sc["stateLost"] != nil {
		t.Errorf("busy loop: %v", sc)
	}
	// Without output the error alone says it: no summary repeating it.
	if got, want := text(t, r), "status: timeout\nerror: "+timeoutKept(1, 120); got != want {
		t.Errorf("busy loop: got %q, want %q", got, want)
	}
	b.expectText("kept", "'yes'", false)
}

// timeoutKept is the error of a timeout of t seconds, under a ceiling of
// max, that kept the session's state and had no tool call in flight.
func timeoutKept(t, max int) string {
	return fmt.Sprintf("Execution timed out after %ds; the session kept its state. For longer work, pass a larger timeout (at most %d, MCP_BRIDGE_MAX_TIMEOUT) or start it in the background: job = runtime.start(code), then runtime.result(job) in later calls.", t, max)
}

// TestTimeoutNamesToolCall checks that a timeout during a proxied tool call
// names it, and that a timeout at the ceiling offers runtime.start alone
// (issue 35).
func TestTimeoutNamesToolCall(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, withServers(t, map[string]any{"slow": fake()}, map[string]string{"MCP_BRIDGE_MAX_TIMEOUT": "3"}))
	b.mustOK("await mcp_slow.add(1, 1)", "slow") // session and server warm
	r := b.call(map[string]any{"code": "print('start')\nawait mcp_slow.sleep(30)", "servers": []string{"slow"}, "timeout": 2})
	want := "status: timeout\nstart\nerror: Execution timed out after 2s during the tool call slow.sleep; the session kept its state. " +
		"For longer work, pass a larger timeout (at most 3, MCP_BRIDGE_MAX_TIMEOUT) or start it in the background: " +
		"job = runtime.start(code), then runtime.result(job) in later calls."
	if got := text(t, r); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	r = b.call(map[string]any{"code": "import time\ntime.sleep(30)", "timeout": 3})
	want = "status: timeout\nerror: Execution timed out after 3s (the most MCP_BRIDGE_MAX_TIMEOUT allows); the session kept its state. " +
		"For longer work, start it in the background: job = runtime.start(code), then runtime.result(job) in later calls."
	if got := text(t, r); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// TestTimeoutReplacesSession checks TMO-2's second branch: a cell that
// ignores the interrupt gets its container replaced and the result says so.
func TestTimeoutReplacesSession(t *testing.T) {
	requirePodman(t)
	// The loss itself; TestDurableAfterReplacement has the restore.
	b := startBridge(t, map[string]string{"MCP_BRIDGE_SESSION_DURABILITY": "off"})
	b.run("kept = 'yes'")
	r := b.call(map[string]any{"code": "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass", "timeout": 1})
	sc := structured(t, r)
	if sc["status"] != "timeout" || sc["stateLost"] != true {
		t.Fatalf("structured = %v", sc)
	}
	// The error says the state was lost; no note repeats it.
	want := "status: timeout\nerror: Execution timed out after 1s; the cell ignored the interrupt, so the session was restarted and its state is lost. " +
		"For longer work, pass a larger timeout (at most 120, MCP_BRIDGE_MAX_TIMEOUT) or start it in the background: " +
		"job = runtime.start(code), then runtime.result(job) in later calls."
	if got := text(t, r); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	b.expectText("'kept' in globals()", "False", false)
	b.expectText("print('fresh')", "fresh", false)
}

// TestOutputCapAndSpill checks head/tail truncation, the marker and the
// spill file inside the session (TRN-1, TRN-2).
func TestOutputCapAndSpill(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, map[string]string{"MCP_BRIDGE_MAX_OUTPUT_BYTES": "4096"})
	r := b.run("for i in range(20000):\n    print(f'line {i}')")
	got := text(t, r)
	sc := structured(t, r)
	if sc["truncated"] != true {
		t.Fatalf("not truncated: %v", sc)
	}
	if len(got) > 4096+256 {
		t.Errorf("text is %d bytes, cap 4096", len(got))
	}
	if !strings.HasPrefix(got, "line 0\nline 1\n") || !strings.HasSuffix(got, "line 19999") {
		t.Errorf("head/tail not kept: %q ... %q", got[:40], got[len(got)-40:])
	}
	if !strings.Contains(got, "bytes omitted; full output in /workspace/.bridge/output-1.txt ...]") {
		t.Errorf("no marker in %q", got)
	}
	r2 := b.run("data = open('/workspace/.bridge/output-1.txt').read()\nprint(len(data.splitlines()), data.splitlines()[12345])")
	if got := text(t, r2); got != "20000 line 12345" {
		t.Errorf("spill file: %q", got)
	}
}

// TestMegabyteLine checks that a 1 MB single line crosses the link intact
// (no 64 KiB line limit, LNK-1).
func TestMegabyteLine(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, map[string]string{"MCP_BRIDGE_MAX_OUTPUT_BYTES": "4194304"})
	r := b.run("print('x' * 1_000_000)")
	sc := structured(t, r)
	lines, _ := sc["stdout"].([]any)
	if len(lines) != 1 || len(lines[0].(string)) != 1_000_000 || sc["truncated"] != nil {
		t.Fatalf("got %d lines, truncated=%v", len(lines), sc["truncated"])
	}
	b.expectText("len('y' * 1_000_000)", "1000000", false)
}

// TestMemoryLimit checks that an OOM kill is reported as such, the session
// restarts, and the bridge keeps serving (§8.3).
func TestMemoryLimit(t *testing.T) {
	requirePodman(t)
	if testRuntime() == "local" {
		t.Fatal("the memory limit needs a container runtime")
	}
	b := startBridge(t, map[string]string{"MCP_BRIDGE_MEMORY": "128m"})
	b.run("kept = 1")
	r := b.run("blob = b'x' * (600 * 1024 * 1024)")
	sc := structured(t, r)
	if !cgroupLimits(t) {
		// Rootless cgroup v1: --ulimit data holds the cell, which gets a
		// MemoryError and keeps its session (RT-4).
		if sc["status"] != "error" || !strings.Contains(text(t, r), "MemoryError") || sc["stateLost"] == true {
			t.Fatalf("structured = %v, text %q; want a MemoryError in the cell", sc, text(t, r))
		}
		b.expectText("'kept' in globals()", "True", false)
		return
	}
	want := "memory limit exceeded (MCP_BRIDGE_MEMORY=128m); the session was restarted"
	if sc["error"] != want || sc["exitCode"] != 137.0 || sc["stateLost"] != true {
		t.Fatalf("structured = %v, want error %q", sc, want)
	}
	b.expectText("'kept' in globals()", "False", false)
}

// TestOutputModes checks the toon and json renderings end to end (RND-1, RND-2).
func TestOutputModes(t *testing.T) {
	requirePodman(t)
	for _, mode := range []string{"toon", "json"} {
		t.Run(mode, func(t *testing.T) {
			b := startBridge(t, map[string]string{"MCP_BRIDGE_OUTPUT_MODE": mode})
			r := b.run("print('hi')\n40 + 2")
			got := text(t, r)
			if !strings.HasPrefix(got, "```"+mode+"\n") || !strings.HasSuffix(got, "\n```") {
				t.Fatalf("text not fenced as %s: %q", mode, got)
			}
			sc := structured(t, r)
			if sc["status"] != "success" || sc["summary"] != "Success" || sc["result"] != "42" || sc["session"] != "default" {
				t.Errorf("full payload = %v", sc)
			}
			if _, ok := sc["durationMs"]; !ok {
				t.Errorf("full payload lacks durationMs: %v", sc)
			}
			if mode == "json" {
				body := strings.TrimSuffix(strings.TrimPrefix(got, "```json\n"), "\n```")
				var m map[string]any
				if err := json.Unmarshal([]byte(body), &m); err != nil || m["result"] != "42" {
					t.Errorf("json body %q: %v", body, err)
				}
			} else if !strings.Contains(got, "status: success") || !strings.Contains(got, "stdout[1]: hi") {
				t.Errorf("toon body: %q", got)
			}
		})
	}
}

// TestCapabilitiesResource checks resources/list and resources/read (RES-1, RES-2).
func TestCapabilitiesResource(t *testing.T) {
	b := startBridge(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := b.c.ListResources(ctx, mcp.ListResourcesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	const uri = "resource://mcp-server-code-execution-mode/capabilities"
	if len(list.Resources) != 1 || list.Resources[0].URI != uri || list.Resources[0].Name != "code-execution-capabilities" ||
		list.Resources[0].Title != "Code Execution Sandbox Helpers" || list.Resources[0].MIMEType != "text/markdown" {
		t.Fatalf("resources = %+v", list.Resources)
	}
	req := mcp.ReadResourceRequest{}
	req.Params.URI = uri
	read, err := b.c.ReadResource(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	tc, ok := read.Contents[0].(mcp.TextResourceContents)
	if !ok || !strings.HasSuffix(tc.Text, "\nResource URI: "+uri) || tc.MIMEType != "text/markdown" {
		t.Fatalf("contents = %+v", read.Contents)
	}
	if got, want := list.Resources[0].Size, int64(len(tc.Text)); got == nil || *got != want {
		t.Errorf("size = %v, want %d", got, want)
	}
	req.Params.URI = "resource://nope"
	if _, err := b.c.ReadResource(ctx, req); err == nil || !strings.Contains(err.Error(), "resource://nope") {
		t.Errorf("unknown URI error = %v", err)
	}
}

// TestDescriptionCallsWork runs every helper call the tool description
// names, exactly as written, in a fresh session (TOOL-2; the
// mcp_{server}.{tool} pattern is covered by the proxy suite).
func TestDescriptionCallsWork(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, nil)
	for i, code := range []string{
		"runtime.discovered_servers()",
		"await runtime.search_tool_docs('query')",
		"print(runtime.capability_summary())",
	} {
		r := b.call(map[string]any{"code": code, "session": "desc" + string(rune('a'+i))})
		if r.IsError {
			t.Errorf("%s failed: %s", code, text(t, r))
		}
	}
}

// TestValidationErrors checks §4.3 over MCP: each is a tool result with
// validation_error, never a JSON-RPC error, and the bridge keeps serving.
func TestValidationErrors(t *testing.T) {
	b := startBridge(t, map[string]string{"MCP_BRIDGE_MAX_TIMEOUT": "60"})
	cases := []struct {
		args map[string]any
		want string
	}{
		{map[string]any{}, "Missing 'code' argument"},
		{map[string]any{"code": "  \n"}, "Missing 'code' argument"},
		{map[string]any{"code": 5}, "Missing 'code' argument"},
		{map[string]any{"code": "1", "servers": "a"}, "'servers' must be a list"},
		{map[string]any{"code": "1", "servers": []any{1}}, "'servers' must be a list of strings"},
		{map[string]any{"code": "1", "timeout": 2.5}, "'timeout' must be an integer"},
		{map[string]any{"code": "1", "timeout": "5"}, "'timeout' must be an integer"},
		{map[string]any{"code": "1", "timeout": true}, "'timeout' must be an integer"},
		{map[string]any{"code": "1", "timeout": 0}, "'timeout' must be between 1 and 60 seconds"},
		{map[string]any{"code": "1", "session": "a b"}, "'session' must be 1-64 characters from A-Z a-z 0-9 _ . -"},
		{map[string]any{"code": "1", "session": strings.Repeat("s", 65)}, "'session' must be 1-64 characters from A-Z a-z 0-9 _ . -"},
	}
	for _, c := range cases {
		r := b.call(c.args)
		sc := structured(t, r)
		if !r.IsError || sc["status"] != "validation_error" || sc["error"] != c.want {
			t.Errorf("args %v: structured %v, want %q", c.args, sc, c.want)
		}
	}
	if got, want := text(t, b.call(map[string]any{})), "status: validation_error\nMissing 'code' argument\nerror: Missing 'code' argument"; got != want {
		t.Errorf("text = %q, want %q", got, want)
	}
	r := b.call(map[string]any{"code": "1", "servers": []any{"nope"}})
	if sc := structured(t, r); sc["status"] != "error" || sc["error"] != "Unknown MCP server: nope. No servers are configured." {
		t.Errorf("unknown server: %v", sc)
	}
}

// TestTimeoutClamp checks VAL-0: a timeout above the maximum is clamped and noted.
func TestTimeoutClamp(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, map[string]string{"MCP_BRIDGE_MAX_TIMEOUT": "5"})
	r := b.call(map[string]any{"code": "print('ok')", "timeout": 999})
	if got, want := text(t, r), "ok\nnote: timeout clamped to 5s (MCP_BRIDGE_MAX_TIMEOUT)"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestExecFrameOverflow checks that code which passes validation but whose
// exec frame exceeds the cap gets a clear error and keeps the session (it
// used to kill the session and report an out-of-memory kill).
func TestExecFrameOverflow(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, map[string]string{"MCP_BRIDGE_MAX_FRAME_BYTES": "1048576"})
	b.mustOK("kept = 1")
	code := strings.Repeat("#", 1048576-9) + "\nprint(1)"
	r := b.run(code)
	sc := structured(t, r)
	if sc["stateLost"] != nil || !strings.Contains(fmt.Sprint(sc["error"]), "do not fit in one frame") {
		t.Errorf("oversized exec frame: %v", sc)
	}
	if got := b.mustOK("kept"); got != "1" {
		t.Errorf("the session lost its state: %s", got)
	}
}

// execIDCode defines exec_id(): the id of the exec frame the running cell
// belongs to, read from the worker's stack as hostile code could. Exec ids
// are random, so a forger must learn its own this way.
const execIDCode = `import sys
def exec_id():
    f = sys._getframe()
    while f is not None:
        if f.f_code.co_name == 'run' and isinstance(f.f_locals.get('msg'), dict):
            return f.f_locals['msg']['id']
        f = f.f_back
    raise RuntimeError('no exec frame on the stack')
`

// TestForgedExecReply checks LNK-3: user code that forges a reply to its own
// exec request gets the session replaced with an honest message, never an
// out-of-memory report, and the next call works.
func TestForgedExecReply(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, nil)
	code := execIDCode + `import json, os, sys, time
fd = sys.modules["mcp.runtime"].LINK._wfd
os.write(fd, b'{"jsonrpc":"2.0","id":%s,"result":5}\n' % json.dumps(exec_id()).encode())
time.sleep(2)`
	r := b.run(code)
	sc := structured(t, r)
	if sc["stateLost"] != true || !strings.HasPrefix(fmt.Sprint(sc["error"]), "The sandbox sent an invalid reply") {
		t.Errorf("forged reply: %v", sc)
	}
	if got := b.mustOK("print('ok')"); got != "ok" {
		t.Errorf("after the forged reply: %s", got)
	}
}

// TestFloodKeepsWorkspaceUsable checks that saved outputs are capped: two
// 100 MB floods leave /workspace usable, and the marker says the saved text
// was cut.
func TestFloodKeepsWorkspaceUsable(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, nil)
	for i := 0; i < 2; i++ {
		r := b.call(map[string]any{"code": "for i in range(1000):\n    print('x' * 100_000)", "timeout": 60})
		if got := text(t, r); !strings.Contains(got, "; full output not saved: the saved output is capped at 16 MiB ...]") {
			t.Fatalf("flood %d: marker not found in %q", i, tail(got, 300))
		}
	}
	got := b.mustOK(`import os
sizes = [os.path.getsize("/workspace/.bridge/" + n) for n in os.listdir("/workspace/.bridge")]
open("/workspace/big", "wb").write(b"\0" * 60_000_000)
print(len(sizes), max(sizes) <= 16 * 2**20, sum(sizes) <= 48 * 2**20, os.path.getsize("/workspace/big"))`)
	if got != "2 True True 60000000" {
		t.Errorf("after the floods: %s", got)
	}
}
