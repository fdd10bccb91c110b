package tests

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// npmBin is the path of an npm-installed MCP server binary; the suite fails
// (never skips) when the test command did not install it.
func npmBin(t *testing.T, name string) string {
	t.Helper()
	dir := os.Getenv("BRIDGE_TEST_NPM_DIR")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "bridge-npm")
	}
	p := filepath.Join(dir, "node_modules", ".bin", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is not installed (go tool task setup:npm installs it): %v", name, err)
	}
	return p
}

// withServers writes a config dir holding servers (name → entry) in one
// file and returns the env that points a bridge at it.
func withServers(t *testing.T, servers map[string]any, extra map[string]string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	writeJSON(t, filepath.Join(dir, "servers.json"), map[string]any{"mcpServers": servers})
	env := map[string]string{"MCP_BRIDGE_CONFIG_DIR": dir}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

func writeJSON(t *testing.T, path string, v any) {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func fake(args ...string) map[string]any {
	return map[string]any{"command": fakeBin, "args": args}
}

// eventually runs code until done accepts its text, for up to 30 s, and
// returns the last text: search waits at most 2 s for a server that is
// starting, so one that starts slower is covered by a later search.
func (b *bridge) eventually(code string, done func(string) bool, servers ...string) string {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := b.mustOK(code, servers...)
		if done(got) || time.Now().After(deadline) {
			return got
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// mustOK runs code with servers and fails unless it succeeds; it returns
// the text.
func (b *bridge) mustOK(code string, servers ...string) string {
	b.t.Helper()
	args := map[string]any{"code": code, "timeout": 60}
	if len(servers) > 0 {
		args["servers"] = servers
	}
	r := b.call(args)
	if r.IsError {
		b.t.Fatalf("code failed:\n%s\n--- result:\n%s", code, text(b.t, r))
	}
	return text(b.t, r)
}

// TestRealServers proxies the reference MCP servers from npm: discovery,
// search, describe, every proxy form, non-identifier tool names, results
// over 64 KiB, errors, and concurrency (SPEC §17 "Real servers").
func TestRealServers(t *testing.T) {
	requirePodman(t)
	root := t.TempDir()
	big := strings.Repeat("0123456789abcdef", 6000) // 96,000 bytes
	if err := os.WriteFile(filepath.Join(root, "big.txt"), []byte(big), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, withServers(t, map[string]any{
		"everything": map[string]any{"command": npmBin(t, "mcp-server-everything")},
		"filesystem": map[string]any{"command": npmBin(t, "mcp-server-filesystem"), "args": []string{root}},
		"memory":     map[string]any{"command": npmBin(t, "mcp-server-memory"), "env": map[string]string{"MEMORY_FILE_PATH": filepath.Join(root, "memory.jsonl")}},
	}, map[string]string{"MCP_BRIDGE_MAX_OUTPUT_BYTES": "1048576"}))

	if got := b.mustOK("runtime.discovered_servers()"); got != "('everything', 'filesystem', 'memory')" {
		t.Errorf("discovered_servers() = %s", got)
	}
	got := b.eventually("hits = await runtime.search_tool_docs('read file', limit=3)\n[h['tool'] for h in hits]", func(got string) bool {
		return strings.HasPrefix(got, "['read_file'") || strings.HasPrefix(got, "['read_text_file'")
	})
	if !strings.HasPrefix(got, "['read_file'") && !strings.HasPrefix(got, "['read_text_file'") {
		t.Errorf("search 'read file' = %s", got)
	}
	got = b.mustOK("d = runtime.describe_server('memory')\n(d['alias'], d['transport'], 'read_graph' in [t['name'] for t in d['tools']])")
	if got != "('memory', 'stdio', True)" {
		t.Errorf("describe_server = %s", got)
	}
	// Every proxy form, and a write through one read through another.
	code := `p = ` + jsonQuote(filepath.Join(root, "hello.txt")) + `
await mcp_filesystem.write_file(p, "hello from the sandbox")
import mcp.servers.filesystem as fs
a = await fs.read_text_file(p)
b = await mcp_servers["filesystem"].read_text_file(path=p)
from mcp.servers.filesystem import read_text_file
c = await read_text_file(p)
print(a == b == c, a)`
	if got := b.mustOK(code, "filesystem"); !strings.Contains(got, "True") || !strings.Contains(got, "hello from the sandbox") {
		t.Errorf("proxy forms: %s", got)
	}
	// A tool whose name is not an identifier.
	if got := b.mustOK("r = await mcp_everything.get_sum(2, 40)\nr", "everything"); !strings.Contains(got, "42") {
		t.Errorf("get-sum: %s", got)
	}
	if got := b.mustOK("r = await runtime.call_tool('everything', 'get-sum', {'a': 1, 'b': 2})\nsorted(r)", "everything"); !strings.Contains(got, "content") {
		t.Errorf("call_tool raw: %s", got)
	}
	// A result over 64 KiB arrives intact.
	code = "r = await mcp_filesystem.read_text_file(" + jsonQuote(filepath.Join(root, "big.txt")) + ")\nt = r['content'] if isinstance(r, dict) else r\nprint(len(t), t == '0123456789abcdef' * 6000)"
	if got := b.mustOK(code, "filesystem"); got != "96000 True" {
		t.Errorf("big result: %s", got)
	}
	// Memory server round trip with structured arguments.
	code = `await mcp_memory.create_entities([{"name": "bridge", "entityType": "project", "observations": ["written in Go"]}])
g = await mcp_memory.read_graph()
print([e["name"] for e in g["entities"]])`
	if got := b.mustOK(code, "memory"); got != "['bridge']" {
		t.Errorf("memory graph: %s", got)
	}
	// Errors: a server not granted, a misspelt tool, a tool error.
	r := b.call(map[string]any{"code": "await runtime.call_tool('memory', 'read_graph', {})", "servers": []string{"filesystem"}})
	if got := text(t, r); !strings.Contains(got, "MCPError: Server 'memory' is not available") {
		t.Errorf("not granted: %s", got)
	}
	r = b.call(map[string]any{"code": "mcp_filesystem.red_file", "servers": []string{"filesystem"}})
	if got := text(t, r); !strings.Contains(got, "AttributeError: Server 'filesystem' has no tool 'red_file'. Did you mean: read_file") {
		t.Errorf("misspelt tool: %s", got)
	}
	r = b.call(map[string]any{"code": "await mcp_filesystem.read_text_file('/etc/passwd')", "servers": []string{"filesystem"}})
	if got := text(t, r); !strings.Contains(got, "MCPError") || !strings.Contains(got, "denied") {
		t.Errorf("tool error: %s", got)
	}
	// Concurrency: three 1 s operations from one call finish in about 1 s.
	code = `import asyncio, time
t0 = time.monotonic()
await asyncio.gather(*[mcp_everything.trigger_long_running_operation(duration=1, steps=2) for _ in range(3)])
print(round(time.monotonic() - t0, 1))`
	got = b.mustOK(code, "everything")
	if got > "1.8" || len(got) > 3 {
		t.Errorf("three concurrent 1 s calls took %s s", got)
	}
	t.Logf("three concurrent 1 s calls: %s s", got)
}

func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// TestFakeServerBehaviour covers the proxy against the fake server: return
// conversions, signatures, validation, allow-list, aliases, images,
// list_changed, 10 MB results and the child's environment.
func TestFakeServerBehaviour(t *testing.T) {
	requirePodman(t)
	cwd := t.TempDir()
	b := startBridge(t, withServers(t, map[string]any{
		"demo-server": map[string]any{"command": fakeBin, "args": []string{"--structured"}, "cwd": cwd,
			"env": map[string]string{"CHILD_ONLY": "visible"}},
		"class": fake(),
	}, map[string]string{"BRIDGE_SECRET_TOKEN": "must-not-leak", "MCP_BRIDGE_MAX_OUTPUT_BYTES": "65536"}))
	s := []string{"demo-server", "class"}
	cases := []struct{ code, want string }{
		{"await mcp_demo_server.echo('hi')", "{'text': 'hi'}"},
		{"await mcp_class_.add(2, 3)", "{'sum': 5}"},
		{"import mcp.servers.class_ as c\nawait c.get_sum(a=1, b=1)", "{'sum': 2}"},
		{"import inspect\nstr(inspect.signature(mcp_demo_server.echo))", "'(text, repeat=None, **kwargs)'"},
		{"mcp_demo_server.echo.__name__", "'echo'"},
		{"'text (string, required)' in mcp_demo_server.echo.__doc__", "True"},
		{"'echo' in dir(mcp_demo_server) and 'list_tools' in dir(mcp_demo_server)", "True"},
		{"LOADED_MCP_SERVERS", "('demo-server', 'class')"},
		{"sorted(mcp_servers)", "['class', 'demo-server']"},
		{"await runtime.list_servers()", "('class', 'demo-server')"},
		{"runtime.list_servers_sync()", "('demo-server', 'class')"},
		{"await mcp_class_.env('CHILD_ONLY')", "''"},
		{"await mcp_demo_server.env('CHILD_ONLY')", "'visible'"},
		{"await mcp_demo_server.env('BRIDGE_SECRET_TOKEN')", "''"},
		{"await mcp_demo_server.cwd() == " + jsonQuote(cwd), "True"},
		{"img = await mcp_class_.image()\n(type(img).__name__, img.mime_type, img.data[:4])", "('Image', 'image/png', b'\\x89PNG')"},
		{"r = await mcp_class_.multi()\n(r[0], type(r[1]).__name__, r[1].uri)", "('one', 'Resource', 'mem://x')"},
		{"len(await mcp_class_.big(10_000_000))", "10000000"},
		{"len(await mcp_class_.list_tools()) >= 13", "True"},
		{"(await runtime.query_tool_docs('class', 'GET-SUM'))['toolAlias']", "'get_sum'"},
		{"len(runtime.query_tool_docs_sync('class', 'echo', detail='name')[0])", "4"},
		{"'inputSchema' in (await runtime.query_tool_docs('class', 'echo', detail='full'))", "True"},
	}
	for _, c := range cases {
		r := b.call(map[string]any{"code": c.code, "servers": s, "timeout": 60})
		if got := text(t, r); got != c.want || r.IsError {
			t.Errorf("%s\n got: %s\nwant: %s", c.code, got, c.want)
		}
	}
	errCases := []struct{ code, want string }{
		{"await mcp_class_.fail('boom')", "MCPError: boom"},
		{"await mcp_class_.add('x', 2)", "MCPError: Invalid arguments for class.add: at '/a': got string, want number; expected: add(a: number, b: number)"},
		{"await mcp_class_.add(1)", "MCPError: Invalid arguments for class.add: missing required argument 'b'; add(a: number, b: number)"},
		{"await runtime.call_tool('class', 'nope', {})", "MCPError: Server 'class' has no tool 'nope'."},
		{"await runtime.call_tool('class', 'echo', [1])", "MCPError: Arguments must be an object"},
		{"await runtime.call_tool('class', '', {})", "MCPError: Missing tool name"},
		{"runtime.describe_server('nope')", "MCPError: Unknown MCP server: nope. Known servers: class, demo-server."},
		{"runtime.list_tools_sync(None)", "MCPError: list_tools_sync(server) requires a server name"},
		{"await runtime.query_tool_docs('class', 'zzz')", "MCPError: Tool 'zzz' not found for server class"},
		{"await runtime.query_tool_docs('class', 5)", "MCPError: 'tool' must be a string when provided"},
		{"await runtime.search_tool_docs('x', limit='2')", "MCPError: 'limit' must be an integer"},
		{"save_tool(print)", "ValueError: save_tool expects a function"},
		{"mcp_class_._secret", "AttributeError: _secret"},
	}
	for _, c := range errCases {
		r := b.call(map[string]any{"code": c.code, "servers": s, "timeout": 60})
		if got := text(t, r); !r.IsError || !strings.Contains(got, c.want) {
			t.Errorf("%s\n got: %s\nwant containing: %s", c.code, got, c.want)
		}
	}
	// A proxy kept from an earlier call is refused when its server is not granted (API-3).
	b.mustOK("kept = mcp_class_", "class")
	r := b.call(map[string]any{"code": "await kept.echo('x')"})
	if got := text(t, r); !strings.Contains(got, "Server 'class' is not available") {
		t.Errorf("kept proxy: %s", got)
	}
	// list_changed refreshes the catalog.
	b.mustOK("await mcp_class_.add_tool('fresh_tool')", "class")
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := b.mustOK("'fresh_tool' in [t['name'] for t in runtime.list_tools_sync('class')]")
		if got == "True" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("list_changed did not refresh the catalog")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := b.mustOK("await mcp_class_.fresh_tool()", "class"); !strings.Contains(got, "called fresh_tool") {
		t.Errorf("new tool: %s", got)
	}
}

// TestServerFailures covers a crashing server, one that hangs in
// initialize, one that crash-loops at start, and one that prints garbage on
// stdout: each gets a bounded, clear error and the healthy one keeps working.
func TestServerFailures(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, withServers(t, map[string]any{
		"healthy": fake(),
		"crashy":  fake(),
		"hang":    fake("--mode", "hang-init"),
		"loop":    fake("--mode", "crash-start"),
		"noisy":   fake("--mode", "noise"),
	}, map[string]string{"MCP_BRIDGE_START_TIMEOUT": "3"}))
	// Crash mid-call: a clear error naming the server and its stderr; the next call works.
	r := b.call(map[string]any{"code": "await mcp_crashy.crash()", "servers": []string{"crashy"}, "timeout": 30})
	if got := text(t, r); !strings.Contains(got, "Server 'crashy' exited during the call (exit status 3); last stderr:") || !strings.Contains(got, "crashing") {
		t.Errorf("crash: %s", got)
	}
	if got := b.mustOK("await mcp_crashy.counter()", "crashy"); got != "'1'" {
		t.Errorf("after the crash: %s", got)
	}
	// Hang in initialize: the call fails before running, within the start timeout.
	start := time.Now()
	// A granted server that cannot start does not stop the call: the code
	// runs and the result says why the server's tools raise.
	r = b.call(map[string]any{"code": "print('ran')", "servers": []string{"hang"}, "timeout": 30})
	if got := text(t, r); r.IsError || !strings.HasPrefix(got, "ran\nnote: server 'hang' did not answer initialize within 3s (MCP_BRIDGE_START_TIMEOUT); its tools raise MCPError") {
		t.Errorf("hang: %s", got)
	}
	if el := time.Since(start); el > 6*time.Second {
		t.Errorf("hang took %v", el)
	}
	// Crash loop at start: the start error with the stderr tail, as a note.
	r = b.call(map[string]any{"code": "print('ran')", "servers": []string{"loop"}})
	if got := text(t, r); r.IsError || !strings.HasPrefix(got, "ran\nnote: server 'loop' failed to start: exit status 1; last stderr: ") {
		t.Errorf("crash loop: %q", got)
	}
	// Garbage on stdout is skipped.
	if got := b.mustOK("await mcp_noisy.add(1, 1)", "noisy"); got != "{'sum': 2}" {
		t.Errorf("noisy: %s", got)
	}
	// The healthy server is unaffected, and search skips the broken ones with a warning.
	if got := b.mustOK("await mcp_healthy.add(2, 2)", "healthy"); got != "{'sum': 4}" {
		t.Errorf("healthy: %s", got)
	}
	got := b.eventually("import warnings\nwith warnings.catch_warnings(record=True) as w:\n    warnings.simplefilter('always')\n    hits = await runtime.search_tool_docs('echo text', limit=3)\nprint(hits[0]['tool'] if hits else None, len(w) >= 2)",
		func(got string) bool { return got == "echo True" })
	if got != "echo True" {
		t.Errorf("search with broken servers: %s", got)
	}
}

// TestMalformedConfigDir checks CFG-1: broken files and entries are skipped,
// the rest loads, and the reasons are logged.
func TestMalformedConfigDir(t *testing.T) {
	requirePodman(t)
	dir := t.TempDir()
	files := map[string]string{
		"a.json": `{"mcpServers": {"good": {"command": "` + fakeBin + `"}}}`,
		"b.json": `{"mcpServers": {`,
		"c.json": `[1, 2]`,
		"d.json": `{"mcpServers": {"noCommand": {"args": []}, "badArgs": {"command": "x", "args": "y"}, "notObject": 5, "also": {"command": "` + fakeBin + `"}}}`,
		"e.txt":  `not a config`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b := startBridge(t, map[string]string{"MCP_BRIDGE_CONFIG_DIR": dir})
	if got := b.mustOK("runtime.discovered_servers()"); got != "('good', 'also')" {
		t.Errorf("discovered = %s", got)
	}
	if got := b.mustOK("await mcp_also.add(1, 2)", "also"); got != "{'sum': 3}" {
		t.Errorf("call = %s", got)
	}
	logs := b.stderr.String()
	for _, want := range []string{"b.json", "c.json", "noCommand", "badArgs", "notObject"} {
		if !strings.Contains(logs, want) {
			t.Errorf("no warning naming %s in the logs", want)
		}
	}
}

// TestHTTPServers proxies streamable HTTP and SSE servers (CFG-3).
func TestHTTPServers(t *testing.T) {
	requirePodman(t)
	urls := map[string]string{}
	for _, tr := range []string{"http", "sse"} {
		urls[tr] = startFakeHTTP(t, "--transport", tr)
	}
	b := startBridge(t, withServers(t, map[string]any{
		"web":    map[string]any{"type": "streamable-http", "url": urls["http"], "headers": map[string]string{"X-Test": "1"}},
		"stream": map[string]any{"type": "sse", "url": urls["sse"]},
	}, nil))
	if got := b.mustOK("(await mcp_web.add(1, 2), await mcp_stream.add(3, 4))", "web", "stream"); got != "({'sum': 3}, {'sum': 7})" {
		t.Errorf("http/sse: %s", got)
	}
	if got := b.mustOK("runtime.describe_server('stream')['transport']"); got != "'sse'" {
		t.Errorf("transport: %s", got)
	}
}

// startFakeHTTP starts tests/fakehttp with args on a free port until the
// test ends and returns the URL it serves.
func startFakeHTTP(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(fakeHTTPBin, append([]string{"--addr", "127.0.0.1:0"}, args...)...)
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("fakehttp %v: %v", args, err)
	}
	return strings.TrimSpace(line)
}

// TestLargeCatalog checks CTR-3: a server with 2,000 tools (over 1 MiB of
// schemas) reaches the sandbox (dir() lists them, the fake's own 15 and the
// proxy's 4 methods), and search finds one tool among them.
func TestLargeCatalog(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, withServers(t, map[string]any{"many": fake("--mode", "many-tools", "--tools", "2000")}, nil))
	got := b.eventually("hits = await runtime.search_tool_docs('kw1234', limit=1)\nprint(len(dir(mcp_many)), hits[0]['tool'] if hits else None)",
		func(got string) bool { return got == "2019 tool_1234" }, "many")
	if got != "2019 tool_1234" {
		t.Errorf("large catalog: %s", got)
	}
}

// TestDoctor checks `bridge doctor`: one line per check, servers started
// for real, a FAIL line and exit 1 for a broken server.
func TestDoctor(t *testing.T) {
	requirePodman(t)
	env := withServers(t, map[string]any{"good": fake(), "broken": map[string]any{"command": "/nonexistent/server"}}, nil)
	out, errOut, code := runCLI(t, env, "", "doctor")
	if code != 1 {
		t.Errorf("exit %d, want 1\n%s%s", code, out, errOut)
	}
	wants := []string{"OK   runtime: ", "OK   image: ", "OK   state dir: ", "OK   server good: stdio, started in ",
		"FAIL server broken: Server 'broken' failed to start: "}
	if testRuntime() == "local" {
		wants = []string{"FAIL runtime: MCP_BRIDGE_RUNTIME=local", "OK   server good: "}
	}
	for _, want := range wants {
		if !strings.Contains(out, "\n"+want) && !strings.HasPrefix(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	out, _, code = runCLI(t, env, "", "doctor", "--json", "--server", "good")
	var checks []map[string]string
	if err := json.Unmarshal([]byte(out), &checks); err != nil || strings.Contains(out, "server broken") {
		t.Errorf("doctor --json --server good: %v\n%s", err, out)
	}
	if testRuntime() != "local" && code != 0 {
		t.Errorf("doctor --server good: exit %d", code)
	}
}

// TestCallTimeout checks TMO-4's bound on each proxied call.
func TestCallTimeout(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, withServers(t, map[string]any{"slow": fake()}, map[string]string{"MCP_BRIDGE_CALL_TIMEOUT": "1"}))
	// Session and server warm, so the time below is the tool call's.
	b.mustOK("await mcp_slow.add(1, 1)", "slow")
	start := time.Now()
	r := b.call(map[string]any{"code": "await mcp_slow.sleep(30)", "servers": []string{"slow"}, "timeout": 20})
	if got := text(t, r); !strings.Contains(got, "MCPError: Tool call slow.sleep timed out after 1s (MCP_BRIDGE_CALL_TIMEOUT)") {
		t.Errorf("call timeout: %s", got)
	}
	// Far below the run's 20 s timeout and the 30 s sleep: the 1 s call
	// timeout ended it.
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("took %v", el)
	}
	if got := b.mustOK("await mcp_slow.add(1, 1)", "slow"); got != "{'sum': 2}" {
		t.Errorf("after the timeout: %s", got)
	}
}

// TestManualRuns checks MAN-2: every code line of the manual runs in a fresh
// session with a fake server, and the description's proxy pattern works.
func TestManualRuns(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, withServers(t, map[string]any{"fs": fake("--name", "filesystem")}, nil))
	manual := b.mustOK("print(runtime.capability_summary())")
	var lines []string
	in := false
	for _, line := range strings.Split(manual, "\n") {
		switch {
		case strings.HasPrefix(line, "```python"):
			in = true
		case strings.HasPrefix(line, "```"):
			in = false
		case in && strings.TrimSpace(line) != "":
			lines = append(lines, line)
		}
	}
	if len(lines) < 3 {
		t.Fatalf("the manual has %d code lines:\n%s", len(lines), manual)
	}
	for i, line := range lines {
		r := b.call(map[string]any{"code": line, "servers": []string{"fs"}, "session": "manual" + string(rune('a'+i))})
		if r.IsError {
			t.Errorf("manual line %q failed: %s", line, text(t, r))
		}
	}
	// The description's pattern: await mcp_{server}.{tool}(...).
	if got := b.mustOK("await mcp_fs.echo('pattern')", "fs"); got != "'pattern'" {
		t.Errorf("mcp_{server}.{tool}: %s", got)
	}
}
