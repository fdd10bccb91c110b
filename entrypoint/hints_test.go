package entrypoint

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// hintRun is one cell as the model sees it: the text (output, then the
// result, then a "note: " line per note), the outcome and the methods of
// the requests the box made.
type hintRun struct {
	text, outcome, result string
	methods               []string
}

// runHint runs code as call id with servers granted, answers call_tool
// with results[tool] and every other request with an empty answer, and
// records the requests' methods.
func (b *box) runHint(id int, code string, servers []any, results map[string]any) hintRun {
	b.t.Helper()
	frame := execFrame(id, code)
	frame["params"].(map[string]any)["servers"] = servers
	b.send(frame)
	var got hintRun
	output := ""
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := b.next(time.Until(deadline))
		params, _ := m["params"].(map[string]any)
		switch {
		case m["method"] == "output":
			output += fmt.Sprint(params["data"])
		case m["method"] != nil && m["id"] != nil:
			got.methods = append(got.methods, fmt.Sprint(m["method"]))
			result := map[string]any{"tools": []any{}, "results": []any{}, "docs": []any{}}
			if m["method"] == "call_tool" {
				result = map[string]any{"result": results[fmt.Sprint(params["tool"])]}
			}
			b.send(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": result})
		case m["method"] == nil && m["id"] == float64(id):
			res, _ := m["result"].(map[string]any)
			got.outcome = fmt.Sprint(res["outcome"])
			parts := []string{output + replyOutput(m)}
			if v, ok := res["result"].(string); ok {
				parts = append(parts, v)
				got.result = v
			}
			notes, _ := res["notes"].([]any)
			for _, n := range notes {
				parts = append(parts, "note: "+fmt.Sprint(n))
			}
			got.text = strings.Join(parts, "\n")
			return got
		}
	}
}

// demoServers is one granted server, demo: read_text_file returns its
// text as structured content ({'content': str}, as server-filesystem's
// does), stat a dict of several keys.
func demoServers() ([]any, map[string]any) {
	tool := func(name string, output map[string]any) map[string]any {
		t := map[string]any{"name": name, "alias": name, "inputSchema": map[string]any{"type": "object"}}
		if output != nil {
			t["outputSchema"] = output
		}
		return t
	}
	servers := []any{map[string]any{"name": "demo", "alias": "demo", "tools": []any{
		tool("read_text_file", map[string]any{"type": "object", "properties": map[string]any{"content": map[string]any{"type": "string"}}}),
		tool("stat", map[string]any{"type": "object"}),
		tool("text", nil),
	}}}
	results := map[string]any{
		"read_text_file": map[string]any{"content": []any{map[string]any{"type": "text", "text": "a,b\n1,2\n"}},
			"structuredContent": map[string]any{"content": "a,b\n1,2\n"}},
		"stat": map[string]any{"content": []any{map[string]any{"type": "text", "text": "{}"}},
			"structuredContent": map[string]any{"size": 8, "lines": []any{"a,b", "1,2"}, "name": "x.csv"}},
		"text": map[string]any{"content": []any{map[string]any{"type": "text", "text": "plain"}}},
	}
	return servers, results
}

// TestBoxForgottenAwait: a coroutine of a proxy, a runtime helper or the
// cell's own async def that never ran (the cell's value, in its value, a
// printed one, one dropped or one used as its result) gets the note "add
// `await`"; it is closed, never run for the user (no request leaves the
// box), and no "never awaited" RuntimeWarning lands in the output, in this
// call or a later one. Before the change the value showed as
// <coroutine object ...> with no note and a print added the warning.
func TestBoxForgottenAwait(t *testing.T) {
	servers, results := demoServers()
	const search = "note: `search_tool_docs(...)` was not awaited, so it did not run: add `await` before the call"
	cases := []struct {
		name, code, outcome string
		want                []string
	}{
		{"a helper as the value", "runtime.search_tool_docs('sum')", "ok",
			[]string{"<coroutine object search_tool_docs at 0x", search}},
		{"a printed helper", "print(runtime.search_tool_docs('sum'))", "ok",
			[]string{"<coroutine object search_tool_docs at 0x", search}},
		{"a printed helper held in a variable", "c = runtime.search_tool_docs('sum')\nprint(c)", "ok", []string{search}},
		{"the variable rebound later", "c = 1\nprint('rebound')", "ok", []string{"rebound"}},
		{"a dropped proxy call", "mcp_demo.text()\nprint('done')", "ok",
			[]string{"done\n", "note: `text(...)` was not awaited, so it did not run: add `await` before the call"}},
		{"a list of them as the value", "[mcp_demo.text(), runtime.query_tool_docs('demo')]", "ok",
			[]string{"note: `text(...)`, `query_tool_docs(...)` were not awaited, so they did not run: add `await` before each call"}},
		{"used as its result", "r = mcp_demo.stat()\nr['size']", "exception",
			[]string{"TypeError: 'coroutine' object is not subscriptable",
				"note: `stat(...)` was not awaited, so it did not run: add `await` before the call"}},
		{"the cell's own async def", "async def main():\n    return 1\nmain()", "ok",
			[]string{"note: `main(...)` was not awaited, so it did not run: add `await` before the call"}},
	}
	b := startBox(t, "socket")
	b.next(30 * time.Second) // ready
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b.t = t
			got := b.runHint(i+1, c.code, servers, results)
			if got.outcome != c.outcome {
				t.Errorf("%q: outcome %s, want %s\n%s", c.code, got.outcome, c.outcome, got.text)
			}
			for _, w := range c.want {
				if !strings.Contains(got.text, w) {
					t.Errorf("%q:\n got: %s\nwant containing: %s", c.code, got.text, w)
				}
			}
			for _, bad := range []string{"never awaited", "RuntimeWarning", "tracemalloc"} {
				if strings.Contains(got.text, bad) {
					t.Errorf("%q: the text has %q:\n%s", c.code, bad, got.text)
				}
			}
			if strings.Count(got.text, "note: ") > 1 {
				t.Errorf("%q: more than one note:\n%s", c.code, got.text)
			}
			for _, m := range got.methods {
				if m != "saved_tools" {
					t.Errorf("%q: the box sent %s: a coroutine that was not awaited ran", c.code, m)
				}
			}
		})
	}
	// One that was awaited and then printed ran: no note.
	b.t = t
	code := "c = runtime.search_tool_docs('sum')\nawait c\nprint(c)"
	if got := b.runHint(len(cases)+1, code, servers, results); got.outcome != "ok" ||
		!strings.Contains(got.text, "<coroutine object search_tool_docs at 0x") || strings.Contains(got.text, "note:") {
		t.Errorf("%q: %s\n%s", code, got.outcome, got.text)
	}
}

// TestBoxDeadEndNotes: the usual dead ends of data work get a note with
// the fix, as the network error does: a package that is not installed
// (none can be, and what the site directories hold, well-known ones
// first), a host path that is not there (/home/..., /Users/...), and a
// proxy's structured content used as its text (the key to use). A missing
// submodule of an installed package, a path of the sandbox's own and a
// dict of the cell's own get none. Before the change none had a note.
func TestBoxDeadEndNotes(t *testing.T) {
	site := filepath.Join(t.TempDir(), "site-packages")
	for _, pkg := range []string{"numpy", "zzz_local", "_private"} {
		if err := os.MkdirAll(filepath.Join(site, pkg), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(site, pkg, "__init__.py"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	servers, results := demoServers()
	const readText = "note: `txt` is the dict read_text_file returned (its structured content): use `txt['content']`"
	cases := []struct {
		name, code string
		want, not  []string
	}{
		{"a package that is not installed", fmt.Sprintf("import sys\nsys.path.append(%q)\nimport seaborn_nosuch", site),
			[]string{"ModuleNotFoundError: No module named 'seaborn_nosuch'",
				"\nnote: packages cannot be installed (no network, no pip); the image has numpy, "}, []string{"_private"}},
		{"a submodule of an installed package", "import json.nosuch",
			[]string{"No module named 'json.nosuch'"}, []string{"note:"}},
		{"a host path", "open('/Users/someone/data.csv')",
			[]string{"\nnote: '/Users/someone/data.csv' looks like a host path, and the sandbox sees no host files: " +
				"read it through an MCP server that can, or have its folder mounted (MCP_BRIDGE_MOUNTS, a bridge setting)"}, nil},
		{"a host path in the message only", "raise FileNotFoundError('File /Users/someone/x.csv does not exist')",
			[]string{"note: '/Users/someone/x.csv' looks like a host path"}, nil},
		{"a path of the sandbox", "open('/tmp/bridge-nosuch/data.csv')", []string{"FileNotFoundError"}, []string{"note:"}},
		{"a str method on structured content", "txt = await mcp_demo.read_text_file(path='x.csv')\ntxt.splitlines()",
			[]string{"AttributeError: 'dict' object has no attribute 'splitlines'", readText}, nil},
		{"a key as an attribute", "txt.content", []string{readText}, nil},
		{"structured content passed as text", "import json\njson.loads(txt)", []string{"TypeError", readText}, nil},
		{"structured content sliced", "txt[:3]", []string{readText}, nil},
		{"a misspelt key", "txt['text']", []string{"KeyError: 'text'", readText}, nil},
		{"an expression's structured content", "(await mcp_demo.read_text_file(path='x.csv')).strip()",
			[]string{"note: read_text_file returned a dict (its structured content): take its `['content']`"}, nil},
		{"a list method on several keys", "s = await mcp_demo.stat()\ns.append('3,4')",
			[]string{"note: `s` is the dict stat returned (its structured content): use `s['lines']`"}, nil},
		{"another attribute on several keys", "s.foo",
			[]string{"note: `s` is the dict stat returned (its structured content), with keys 'lines', 'name', 'size'"}, nil},
		{"a dict of the cell's own", "d = {'content': 'x'}\nd.splitlines()", []string{"AttributeError"}, []string{"note:"}},
		{"a key missing from another dict", "m = {}\nm[txt['content']]", []string{"KeyError"}, []string{"note:"}},
	}
	b := startBox(t, "socket")
	b.next(30 * time.Second) // ready
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b.t = t
			got := b.runHint(i+1, c.code, servers, results)
			if got.outcome != "exception" {
				t.Errorf("%q: outcome %s, want exception\n%s", c.code, got.outcome, got.text)
			}
			for _, w := range c.want {
				if !strings.Contains(got.text, w) {
					t.Errorf("%q:\n got: %s\nwant containing: %s", c.code, got.text, w)
				}
			}
			for _, w := range c.not {
				if strings.Contains(got.text, w) {
					t.Errorf("%q:\n got: %s\nwant nothing of: %s", c.code, got.text, w)
				}
			}
			if n := strings.Count(got.text, "note: "); n > 1 {
				t.Errorf("%q: %d notes:\n%s", c.code, n, got.text)
			}
		})
	}
}

// TestBoxSaveToolDecorated: save_tool of a function a decorator made (a
// functools.wraps wrapper, a cache, a wrapper without wraps, a
// staticmethod) names the function and its decorator and says that a saved
// tool is one plain def; nothing is saved. Before the change the first
// named 'wrapper', the cache and the staticmethod got "save_tool expects a
// function", and the plain wrapper was saved as a tool named 'wrapper'.
func TestBoxSaveToolDecorated(t *testing.T) {
	const decos = `import functools
def deco(f):
    @functools.wraps(f)
    def wrapper(*a, **k):
        return f(*a, **k)
    return wrapper
def bare(f):
    def wrapper(*a, **k):
        return f(*a, **k)
    return wrapper
`
	cases := []struct{ code, want string }{
		{decos + "@deco\ndef hello(x):\n    return x\nsave_tool(hello)",
			"MCPError: save_tool cannot save 'hello': a saved tool is one plain def, and this one is decorated (@deco); save it without the decorator"},
		{"@functools.lru_cache(maxsize=None)\ndef cached(x):\n    return x\nsave_tool(cached)",
			"MCPError: save_tool cannot save 'cached': a saved tool is one plain def, and this one is decorated (@functools.lru_cache(maxsize=None)); save it without the decorator"},
		{"@bare\ndef plainly(x):\n    return x\nsave_tool(plainly)",
			"MCPError: save_tool cannot save 'plainly': a saved tool is one plain def, and this one is decorated (@bare); save it without the decorator"},
		{"class K:\n    @staticmethod\n    def fixed(x):\n        return x\nsave_tool(K.__dict__['fixed'])",
			"MCPError: save_tool cannot save 'fixed': a saved tool is one plain def, and this one is decorated (@staticmethod); save it without the decorator"},
		{"def outer():\n    y = 1\n    def inner():\n        return y\n    return inner\nsave_tool(outer())",
			"MCPError: save_tool cannot save 'inner': a saved tool is one plain top-level def, and this one is nested in another function (it uses y from there); define it at the top level of a cell"},
	}
	b := startBox(t, "stdio")
	b.next(30 * time.Second) // ready
	for i, c := range cases {
		got := b.runHint(i+1, c.code, nil, nil)
		if got.outcome != "exception" || !strings.Contains(got.text, c.want) {
			t.Errorf("%q: %s\n got: %s\nwant containing: %s", c.code, got.outcome, got.text, c.want)
		}
		for _, m := range got.methods {
			if m == "save_tool" {
				t.Errorf("%q: the tool was saved", c.code)
			}
		}
	}
}

// fakePandas is a pandas module with just what display's table needs, as
// the host's python3 may have no pandas (the image has the real one; the
// end-to-end TestDataWorkNotes uses it).
const fakePandas = `import sys, types
pd = types.ModuleType("pandas")
class _ILoc:
    def __init__(self, df):
        self.df = df
    def __getitem__(self, key):
        rows, cols = key
        names = list(self.df.cols)[cols]
        return DataFrame({n: self.df.cols[n][rows] for n in names}, self.df.index[rows])
class DataFrame:
    def __init__(self, cols, index=None):
        self.cols = {k: list(v) for k, v in cols.items()}
        n = len(next(iter(self.cols.values())))
        self.index = list(range(n)) if index is None else list(index)
    shape = property(lambda self: (len(self.index), len(self.cols)))
    iloc = property(lambda self: _ILoc(self))
    columns = property(lambda self: list(self.cols))
    def itertuples(self, index=True):
        return iter(zip(*self.cols.values()))
    def __repr__(self):
        return "DataFrame repr"
class Series:
    def __init__(self, values, name=None):
        self.values, self.name = list(values), name
    def to_frame(self):
        return DataFrame({self.name if self.name is not None else 0: self.values})
pd.DataFrame, pd.Series = DataFrame, Series
sys.modules["pandas"] = pd
`

// TestBoxDataFrameValue: a DataFrame or Series as a cell's value is the
// markdown table display() prints (as the README says), not its repr.
func TestBoxDataFrameValue(t *testing.T) {
	b := startBox(t, "stdio")
	b.next(30 * time.Second) // ready
	cases := []struct{ code, want string }{
		{fakePandas + "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y|z']})",
			"|  | a | b |\n|---|---|---|\n| 0 | 1 | x |\n| 1 | 2 | y\\|z |"},
		{"pd.Series([3, 4], name='n')", "|  | n |\n|---|---|\n| 0 | 3 |\n| 1 | 4 |"},
		{"[pd.DataFrame({'a': [1]})]", "[DataFrame repr]"}, // inside a list, a repr as before
	}
	for i, c := range cases {
		if got := b.runHint(i+1, c.code, nil, nil); got.outcome != "ok" || got.result != c.want {
			t.Errorf("%q: %s\n got: %q\nwant: %q", c.code, got.outcome, got.result, c.want)
		}
	}
}

// TestBoxCutAtLines: the head and tail of a large output, and of a large
// value, end and start at a line boundary when one is near, and each cut
// has one marker: a huge value used to show its marker in the value and
// again in the output, which was not cut.
func TestBoxCutAtLines(t *testing.T) {
	b := startBoxLimits(t, "socket", map[string]any{"maxOutputBytes": 2048})
	b.next(30 * time.Second) // ready
	marker := regexp.MustCompile(`^\[\.\.\. [0-9]+ bytes omitted; full output in /workspace/\.bridge/output-[0-9]+\.txt \.\.\.\]$`)
	cases := []struct{ name, code, line string }{
		{"output", "for i in range(1000):\n    print('line %04d' % i)", `^line [0-9]{4}$`},
		{"value", "class Rows:\n    def __repr__(self):\n        return '\\n'.join('row %04d of the value' % i for i in range(1000))\nRows()",
			`^row [0-9]{4} of the value$`},
		{"output of uneven lines", "for i in range(300):\n    print('item', i, 'x' * (i % 37))", `^item [0-9]+ x*$`},
	}
	for i, c := range cases {
		got := b.runHint(i+1, c.code, nil, nil)
		if got.outcome != "ok" {
			t.Fatalf("%s: %s\n%s", c.name, got.outcome, got.text)
		}
		if n := strings.Count(got.text, "bytes omitted"); n != 1 {
			t.Errorf("%s: %d markers, want 1:\n%s", c.name, n, got.text)
		}
		line := regexp.MustCompile(c.line)
		for _, l := range strings.Split(strings.Trim(got.text, "\n"), "\n") {
			if !line.MatchString(l) && !marker.MatchString(l) {
				t.Errorf("%s: line %q is cut or not a line of the output:\n%s", c.name, l, got.text)
				break
			}
		}
	}
}
