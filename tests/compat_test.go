package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// mustRun runs code with args (session, servers) and fails unless it
// succeeds; it returns the text.
func (b *bridge) mustRun(code string, args map[string]any) string {
	b.t.Helper()
	all := map[string]any{"code": code, "timeout": 60}
	for k, v := range args {
		all[k] = v
	}
	r := b.call(all)
	if r.IsError {
		b.t.Fatalf("code failed:\n%s\n--- result:\n%s", code, text(b.t, r))
	}
	return text(b.t, r)
}

// callAsync runs run_python from any goroutine: it returns the text and an
// error instead of failing the test.
func (b *bridge) callAsync(args map[string]any) (string, error) {
	res, err := b.callArgsWithin(120*time.Second, args)
	if err != nil {
		return "", err
	}
	tc, ok := res.Content[0].(mcp.TextContent)
	if !ok {
		return "", fmt.Errorf("content[0] is %T", res.Content[0])
	}
	if res.IsError {
		return tc.Text, fmt.Errorf("run_python failed: %s", tc.Text)
	}
	return tc.Text, nil
}

// TestCompatReferenceAPI checks the in-sandbox API where an audit found it
// differing from the reference, on real npm servers: each case failed
// before the fix.
func TestCompatReferenceAPI(t *testing.T) {
	requirePodman(t)
	root := t.TempDir()
	b := startBridge(t, withServers(t, map[string]any{
		"everything": map[string]any{"command": npmBin(t, "mcp-server-everything")},
		"filesystem": map[string]any{"command": npmBin(t, "mcp-server-filesystem"), "args": []string{root}, "cwd": root},
	}, nil))
	both := []string{"filesystem", "everything"}
	cases := []struct {
		name, code string
		servers    []string
		want       string
	}{
		{"proxy without a required argument raises MCPError", `try:
    await mcp_everything.get_sum(1)
except runtime.MCPError as e:
    print(type(e).__name__, e.kind, isinstance(e, RuntimeError))`, both, "MCPError invalid_arguments True"},
		{"list_tools_sync() without a server", `try:
    runtime.list_tools_sync()
except runtime.MCPError as e:
    print(e)`, nil, "list_tools_sync(server) requires a server name"},
		{"list_servers is a sorted tuple", "s = await runtime.list_servers()\n(type(s).__name__, s, runtime.list_servers_sync())", both,
			"('tuple', ('everything', 'filesystem'), ('filesystem', 'everything'))"},
		{"cwd is None when unset", "(runtime.describe_server('everything')['cwd'], runtime.describe_server('filesystem')['cwd'] == " + jsonQuote(root) + ")", both, "(None, True)"},
		{"empty search is []", "(runtime.search_tool_docs_sync(''), await runtime.search_tool_docs('  '))", nil, "([], [])"},
		{"call_tool always has isError", "r = await runtime.call_tool('everything', 'get-sum', {'a': 1, 'b': 2})\nr['isError']", both, "False"},
		{"TOOLS and TOOL_MAP have input_schema", `import mcp.servers.everything as ev
t = ev.TOOL_MAP['get_sum']
(t['input_schema'] == t['inputSchema'] != None, all('input_schema' in x for x in ev.TOOLS))`, both, "(True, True)"},
		{"MCP_AVAILABLE_SERVERS and MCP_DISCOVERED_SERVERS", `import os, json
(json.loads(os.environ['MCP_AVAILABLE_SERVERS']), json.loads(os.environ['MCP_DISCOVERED_SERVERS']))`, []string{"filesystem"},
			"([{'name': 'filesystem', 'alias': 'filesystem', 'description': ''}], ['everything', 'filesystem'])"},
		{"save_tool(42) raises ValueError", `try:
    save_tool(42)
except ValueError as e:
    print(e)`, nil, "save_tool expects a function"},
		{"memory helpers are globals, on runtime and in __all__", `names = ('save_memory', 'load_memory', 'update_memory', 'delete_memory', 'list_memories', 'memory_exists', 'get_memory_info')
[n for n in names if n in runtime.__all__ and globals()[n] is getattr(runtime, n)] == list(names)`, nil, "True"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := map[string]any{"code": c.code, "timeout": 60}
			if c.servers != nil {
				args["servers"] = c.servers
			}
			r := b.call(args)
			if got := text(t, r); got != c.want || r.IsError {
				t.Errorf("%s\n got (isError=%v): %s\nwant: %s", c.code, r.IsError, got, c.want)
			}
		})
	}
}

// TestCompatMemoryAndToolsAcrossBridges checks that memory and saved tools
// live on the host: they survive reset() and a bridge restart, a second
// bridge process sharing the state dir sees them, files are 0600, a saved
// tool loads as a global and as module user_tools, is found by search
// under server user_tools, and can be removed.
func TestCompatMemoryAndToolsAcrossBridges(t *testing.T) {
	requirePodman(t)
	state := t.TempDir()
	// Memory and tools across bridges; the session "default" the bridges
	// share through snapshots is TestDurableSessions'.
	env := map[string]string{"MCP_BRIDGE_STATE_DIR": state, "MCP_BRIDGE_SESSION_DURABILITY": "off"}
	a := startBridge(t, env)
	a.mustRun("def double(x):\n    \"\"\"Doubles x.\"\"\"\n    return 2 * x\nPREFIX = 'hi '\ndef greet(name):\n    return PREFIX + name", nil)
	if got, want := a.mustRun("save_tool(double)", nil), `"Tool 'double' saved. It will be available in future sessions."`; got != want {
		t.Errorf("save_tool(double) = %s, want %s", got, want)
	}
	if got, want := a.mustRun("print(save_tool(greet))", nil), "Tool 'greet' saved. It will be available in future sessions.\nNote: it uses globals PREFIX that are not saved."; got != want {
		t.Errorf("save_tool(greet) = %q, want %q", got, want)
	}
	got := a.mustRun(`print(save_memory("project", {"goal": "ship"}, metadata={"tags": ["a"]}))
print(update_memory("counter", lambda v: (v or 0) + 1), update_memory("counter", lambda v: v + 1))
print(load_memory("missing", default="dflt"), memory_exists("project"), memory_exists("missing"))
runtime.reset()`, nil)
	if want := "Memory 'project' saved.\n1 2\ndflt True False"; got != want {
		t.Errorf("memory calls = %q, want %q", got, want)
	}
	// A new container after reset(): memory and the saved tools are there.
	if got, want := a.mustRun("(load_memory('project'), double(21), greet.__name__)", nil), "({'goal': 'ship'}, 42, 'greet')\nnote: loaded saved tools: double, greet"; got != want {
		t.Errorf("after reset: %s, want %s", got, want)
	}
	for _, p := range []string{".bridge/memory/project.json", ".bridge/tools/double.py"} {
		fi, err := os.Stat(filepath.Join(state, p))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", p, err, fi.Mode().Perm())
		}
	}
	a.Close()

	b := startBridge(t, env)
	c := startBridge(t, env) // a second process on the same state dir, at the same time
	got = b.mustRun(`from user_tools import double as d2
info = get_memory_info("project")
print(load_memory("project"), d2(2), double(3), info["metadata"], info["size"] > 0)
print([m["key"] for m in list_memories()], sorted(list_memories()[0]))
hits = runtime.search_tool_docs_sync("double")
print(hits[0]["server"], hits[0]["tool"])`, nil)
	want := "{'goal': 'ship'} 4 6 {'tags': ['a']} True\n['counter', 'project'] ['created_at', 'key', 'metadata', 'updated_at']\nuser_tools double\n" +
		"note: loaded saved tools: double, greet"
	if got != want {
		t.Errorf("second bridge:\n got %q\nwant %q", got, want)
	}
	if got := c.mustRun("load_memory('counter')", nil); got != "2\nnote: loaded saved tools: double, greet" {
		t.Errorf("third bridge: counter = %s, want 2", got)
	}

	// Three sessions in two bridge processes race update_memory: no write is lost.
	const per = 25
	code := fmt.Sprintf("import time\ndef inc(v):\n    time.sleep(0.002)\n    return (v or 0) + 1\nfor _ in range(%d):\n    update_memory('race', inc)", per)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i, br := range []*bridge{b, b, c} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := br.callAsync(map[string]any{"code": code, "session": fmt.Sprintf("race%d", i), "timeout": 100}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got, want := b.mustRun("load_memory('race')", nil), fmt.Sprint(3*per); got != want {
		t.Errorf("race counter = %s, want %s", got, want)
	}

	// delete_tool removes it from later sessions; delete_memory from the store.
	if got := b.mustRun("print(runtime.delete_tool('double'), runtime.delete_tool('double'), delete_memory('counter'), delete_memory('counter'))", nil); got != "Tool 'double' deleted. Tool 'double' not found. Memory 'counter' deleted. Memory 'counter' not found." {
		t.Errorf("deletes: %s", got)
	}
	if got := b.mustRun("('double' in globals(), 'greet' in globals())", map[string]any{"session": "fresh"}); got != "(False, True)\nnote: loaded saved tools: greet" {
		t.Errorf("a new session after delete_tool: %s", got)
	}
	if _, err := os.Stat(filepath.Join(state, ".bridge/tools/double.py")); !os.IsNotExist(err) {
		t.Errorf("double.py after delete_tool: %v", err)
	}
}

// TestCompatMemoryErrors checks the clear errors of the memory helpers.
func TestCompatMemoryErrors(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, map[string]string{"MCP_BRIDGE_MEMORY_MAX_VALUE_BYTES": "2048"})
	cases := []struct{ code, want string }{
		{"save_memory('../x', 1)", "MCPError: Invalid memory key '../x': use 1-128 characters"},
		{"save_memory('k', float('nan'))", "MCPError: Memory value for 'k' is not JSON"},
		{"save_memory('k', object())", "MCPError: Memory value for 'k' is not JSON"},
		{"save_memory('k', 'x' * 5000)", "over the 2048-byte limit (MCP_BRIDGE_MEMORY_MAX_VALUE_BYTES)"},
		{"save_memory('k', 1, metadata=[1])", "MCPError: Memory metadata for 'k' must be a dict"},
		{"load_memory(5)", "MCPError: Memory key must be a string, not int"},
		{"x = 1\nsave_tool(lambda: x)", "MCPError: save_tool needs a function defined with def"},
		{"exec('def f(): pass')\nsave_tool(f)", "MCPError: The source of 'f' is not known"},
		{"def list_memories(): pass\nsave_tool(list_memories)", "MCPError: Tool name 'list_memories' is reserved by the sandbox (a sandbox global)"},
		{"def print(): pass\nsave_tool(print)", "MCPError: Tool name 'print' is reserved by the sandbox (a Python builtin); rename the function"},
		{"def f(x=len): pass\nsave_tool(f)", "MCPError: save_tool cannot save 'f': the default of 'x' is not a literal (line 1); use None and set it in the body. A saved tool is one plain def"},
		{"def deco(f):\n    return f\n@deco\ndef g(): pass\nsave_tool(g)", "MCPError: save_tool cannot save 'g': its def has a decorator (line 1)"},
	}
	for _, c := range cases {
		r := b.call(map[string]any{"code": c.code})
		if got := text(t, r); !r.IsError || !strings.Contains(got, c.want) {
			t.Errorf("%s\n got: %s\nwant containing: %s", c.code, got, c.want)
		}
	}
}

// header is the first line of a saved tool file as the store writes it.
func header(name string) string {
	return `# bridge saved tool: {"name":"` + name + `","doc":"","signature":"()","sha256":"","saved_at":1}` + "\n"
}

// writeSavedTool writes a file into the saved tools dir of state, as a
// user or a broken disk might.
func writeSavedTool(t *testing.T, state, file, data string) {
	t.Helper()
	tools := filepath.Join(state, ".bridge", "tools")
	if err := os.MkdirAll(tools, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tools, file), []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestCompatSavedToolLoadFailure checks that a saved tool that cannot be
// read or is refused at load is reported in the next result's notes, once
// per session, and the others still load.
func TestCompatSavedToolLoadFailure(t *testing.T) {
	requirePodman(t)
	state := t.TempDir()
	files := map[string]string{
		"unreadable.py": "def unreadable(): pass\n",
		"boom.py":       header("boom") + "@undefined_decorator\ndef boom(): pass\n",
		"fine.py":       header("fine") + "def fine():\n    return 'fine'\n",
	}
	for name, data := range files {
		writeSavedTool(t, state, name, data)
	}
	b := startBridge(t, map[string]string{"MCP_BRIDGE_STATE_DIR": state})
	r := b.run("fine()")
	got := text(t, r)
	for _, want := range []string{"'fine'", "note: saved tool 'unreadable' (", "cannot be read",
		"note: loaded saved tools: fine\n", "note: saved tool 'boom' not loaded: its def has a decorator (line 1); runtime.delete_tool('boom')"} {
		if !strings.Contains(got, want) {
			t.Errorf("first result lacks %q:\n%s", want, got)
		}
	}
	if r.IsError {
		t.Errorf("a broken saved tool failed the call:\n%s", got)
	}
	if got := b.mustRun("fine()", nil); got != "'fine'" {
		t.Errorf("second call: %q, want no notes", got)
	}
}

// TestCompatAgentConfigs checks servers from the agent config files: the
// precedence (the first file wins on a name clash, with a warning), the
// self-reference guard on `bridge run`, MCP_BRIDGE_CONFIG_SOURCES, and
// `bridge doctor` listing each file with what it contributed.
func TestCompatAgentConfigs(t *testing.T) {
	requirePodman(t)
	home := t.TempDir()
	everything := map[string]any{"command": npmBin(t, "mcp-server-everything")}
	writeAt := func(rel string, v any) {
		p := filepath.Join(home, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		writeJSON(t, p, v)
	}
	writeAt(".claude.json", map[string]any{
		"numStartups": 1,
		"mcpServers": map[string]any{
			"everything": everything,
			"myself":     map[string]any{"command": bridgeBin, "args": []string{"run"}},
			"reference":  map[string]any{"command": "uvx", "args": []string{"mcp-server-code-execution-mode", "run"}},
		},
	})
	writeAt(".cursor/mcp.json", map[string]any{"mcpServers": map[string]any{
		"everything": map[string]any{"command": "/nonexistent/everything"},
		"memory":     map[string]any{"command": npmBin(t, "mcp-server-memory"), "env": map[string]string{"MEMORY_FILE_PATH": filepath.Join(home, "m.jsonl")}},
	}})
	writeAt(".config/opencode/opencode.json", map[string]any{"mcp": map[string]any{
		"oc-everything": map[string]any{"type": "local", "command": []string{npmBin(t, "mcp-server-everything")}},
	}})
	env := map[string]string{"HOME": home, "MCP_BRIDGE_CONFIG_DIR": filepath.Join(home, "MCPs")}
	b := startBridge(t, env)
	if got, want := b.mustRun("runtime.discovered_servers()", nil), "('everything', 'memory', 'oc-everything')"; got != want {
		t.Errorf("discovered_servers() = %s, want %s", got, want)
	}
	if got := b.mustRun("await mcp_everything.get_sum(40, 2)", map[string]any{"servers": []string{"everything"}}); !strings.Contains(got, "42") {
		t.Errorf("everything from ~/.claude.json: %s", got)
	}
	if got := b.mustRun("await mcp_oc_everything.get_sum(1, 2)", map[string]any{"servers": []string{"oc-everything"}}); !strings.Contains(got, "3") {
		t.Errorf("everything from opencode.json: %s", got)
	}
	logs := b.stderr.String()
	for _, want := range []string{
		`"level":"debug","file":"` + filepath.Join(home, ".claude.json") + `","entry":"myself"`,
		`"entry":"reference"`,
		"config entry skipped: it launches this bridge",
		`server \"everything\" duplicates the one in ` + filepath.Join(home, ".claude.json"),
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("bridge log lacks %q", want)
		}
	}
	// The bridge's own entry is expected in an agent file: it is never a
	// warning, and no error asks the model to fix it.
	if strings.Contains(logs, `"level":"warn","file":"`+filepath.Join(home, ".claude.json")) {
		t.Errorf("the bridge's own entry was logged as a warning:\n%s", logs)
	}
	if got := text(t, b.call(map[string]any{"code": "1", "servers": []string{"nosuch"}})); !strings.Contains(got, "nosuch") || strings.Contains(got, "myself") {
		t.Errorf("an unknown-server error names the bridge's own entry: %s", got)
	}
	b.Close()

	only := startBridge(t, map[string]string{"HOME": home, "MCP_BRIDGE_CONFIG_DIR": filepath.Join(home, "MCPs"), "MCP_BRIDGE_CONFIG_SOURCES": "mcps,env"})
	if got := only.mustRun("runtime.discovered_servers()", nil); got != "()" {
		t.Errorf("MCP_BRIDGE_CONFIG_SOURCES=mcps,env: discovered %s, want ()", got)
	}
	only.Close()

	out, errOut, _ := runCLI(t, env, "", "doctor")
	for _, want := range []string{
		"OK   config " + filepath.Join(home, ".claude.json") + ": claude-code: 1 servers (everything); this bridge's own entry not proxied: myself, reference",
		"config " + filepath.Join(home, ".cursor", "mcp.json") + ": cursor: 1 servers (memory)",
		"config " + filepath.Join(home, ".config", "opencode", "opencode.json") + ": opencode: 1 servers (oc-everything)",
		"config sources: reading mcps, env, mcp-dir, project-dir, claude-code, claude-desktop, cursor, vscode, windsurf, opencode (MCP_BRIDGE_CONFIG_SOURCES); project servers start once approved (MCP_BRIDGE_PROJECT_SERVERS=approved); ",
		" files absent (the README's sources table lists where each is read)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor lacks %q:\n%s%s", want, out, errOut)
		}
	}
}

// TestCompatAgentConfigWatch checks that bridge run --watch sees an agent
// config file appear, in a directory that did not exist at start, without
// any call.
func TestCompatAgentConfigWatch(t *testing.T) {
	requirePodman(t)
	home := t.TempDir()
	b := startBridgeArgs(t, map[string]string{"HOME": home, "MCP_BRIDGE_CONFIG_DIR": filepath.Join(home, "MCPs")}, "run", "--watch")
	if got := b.mustRun("runtime.discovered_servers()", nil); got != "()" {
		t.Fatalf("discovered at start: %s", got)
	}
	dir := filepath.Join(home, ".cursor")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the new directory is watched after the debounce
	tmp := filepath.Join(dir, ".mcp.json.tmp")
	writeJSON(t, tmp, map[string]any{"mcpServers": map[string]any{"late": fake()}})
	if err := os.Rename(tmp, filepath.Join(dir, "mcp.json")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the reload of ~/.cursor/mcp.json", func() bool { return strings.Contains(b.stderr.String(), `"added":["late"]`) })
	if got := b.mustRun("await mcp_late.echo('hi')", map[string]any{"servers": []string{"late"}}); !strings.Contains(got, "hi") {
		t.Errorf("late server: %s", got)
	}
}

// TestCompatSavedToolHangs checks that a saved tool whose code would hang
// while loading (a decorator that never returns) is not run: it is skipped
// with a note naming it, the call runs, and the session stays usable to
// remove the tool.
func TestCompatSavedToolHangs(t *testing.T) {
	requirePodman(t)
	state := t.TempDir()
	src := header("hang") + `import time
def _forever(f):
    while True:
        try:
            time.sleep(0.05)
        except Exception:
            pass
@_forever
def hang(): pass
`
	writeSavedTool(t, state, "hang.py", src)
	b := startBridge(t, map[string]string{"MCP_BRIDGE_STATE_DIR": state})
	r := b.call(map[string]any{"code": "print('ran')", "timeout": 30})
	got := text(t, r)
	if want := "ran\nnote: saved tool 'hang' not loaded: its source must be one def and nothing else; it has 3 top-level statements; runtime.delete_tool('hang')"; got != want || r.IsError {
		t.Errorf("first call:\n got %q\nwant %q", got, want)
	}
	if got := b.mustRun("print(runtime.delete_tool('hang'))", nil); got != "Tool 'hang' deleted." {
		t.Errorf("delete_tool: %s", got)
	}
}

// TestCompatMemoryOutlivesIdleEnd checks that memory and saved tools
// survive the idle end of a session: the next call has a new container.
func TestCompatMemoryOutlivesIdleEnd(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, map[string]string{"MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT": "1", "MCP_BRIDGE_SESSION_DURABILITY": "off"})
	b.mustRun("def triple(x):\n    return 3 * x\nsave_memory('k', [1, 2])\nsave_tool(triple)", nil)
	time.Sleep(3 * time.Second)
	got := b.mustRun("(load_memory('k'), triple(2))", nil)
	if !strings.HasPrefix(got, "([1, 2], 6)\nnote: session state was lost") {
		t.Errorf("after the idle end: %q, want the values and the state-loss note", got)
	}
}

// TestSavedToolsLargeSet: saved tools load in a new session whether they
// ride on its first exec frame (a small set) or are too large to: four tools
// of ~200 KB each, with the frame cap at 1 MiB and a first cell of 300 KB.
// The set and the cell each fit a frame, but not together, so the set must
// be left for the worker to fetch.
func TestSavedToolsLargeSet(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, map[string]string{"MCP_BRIDGE_STATE_DIR": t.TempDir(), "MCP_BRIDGE_MAX_FRAME_BYTES": "1048576"})
	b.mustRun("def small():\n    return 'small ok'\nprint(save_tool(small))", map[string]any{"session": "s0"})
	if got := b.mustRun("print(small())", map[string]any{"session": "s1"}); got != "small ok\nnote: loaded saved tools: small" {
		t.Fatalf("a small saved tool in a new session: %q", got)
	}
	for i := 1; i <= 4; i++ {
		code := fmt.Sprintf("def big%d():\n    \"\"\"%s\"\"\"\n    return 'big%d'\nprint(save_tool(big%d))", i, strings.Repeat("x", 100_000), i, i)
		b.mustRun(code, map[string]any{"session": "s0"})
	}
	code := "# " + strings.Repeat("y", 300_000) + "\nprint(small(), big1(), big2(), big3(), big4())"
	if got := b.mustRun(code, map[string]any{"session": "s2"}); got != "small ok big1 big2 big3 big4\nnote: loaded saved tools: big1, big2, big3, big4, small" {
		t.Errorf("a large set of saved tools in a new session: %q", tail(got, 300))
	}
}
