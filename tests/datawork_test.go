package tests

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDataWorkNotes checks the dead ends of a model's first data work with
// the real filesystem server and the image's own packages (issue 35): a
// forgotten await (the value, a print) gets "add `await`" and no
// RuntimeWarning; a package that is not installed, a host path and
// read_text_file's structured content used as its text get a note with the
// fix; a DataFrame as the last value is the markdown table; a huge value
// has one marker and is cut at line boundaries; save_tool of a decorated
// function says that a saved tool is one plain def. Each case failed before
// the change.
func TestDataWorkNotes(t *testing.T) {
	requirePodman(t)
	root := t.TempDir()
	data := filepath.Join(root, "data.csv")
	if err := os.WriteFile(data, []byte("a,b\n1,2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, withServers(t, map[string]any{
		"filesystem": map[string]any{"command": npmBin(t, "mcp-server-filesystem"), "args": []string{root}},
	}, map[string]string{"MCP_BRIDGE_MAX_OUTPUT_BYTES": "4096"}))
	fs := []string{"filesystem"}
	p := jsonQuote(data)
	// The image has numpy and the rest; the host's python3 (the local
	// runtime) has what it has.
	packages := "numpy, pandas, scipy, sklearn, matplotlib, PIL, "
	if testRuntime() == "local" {
		packages = ""
	}
	cases := []struct {
		name, code string
		servers    []string
		isError    bool
		want       []string
	}{
		{"a helper as the value", "runtime.search_tool_docs('read a file')", nil, false,
			[]string{"<coroutine object search_tool_docs at 0x",
				"\nnote: `search_tool_docs(...)` was not awaited, so it did not run: add `await` before the call"}},
		{"a printed proxy call", "print(mcp_filesystem.read_text_file(path=" + p + "))", fs, false,
			[]string{"<coroutine object read_text_file at 0x",
				"\nnote: `read_text_file(...)` was not awaited, so it did not run: add `await` before the call"}},
		{"a package that is not installed", "import seaborn", nil, true,
			[]string{"ModuleNotFoundError: No module named 'seaborn'",
				"\nnote: packages cannot be installed (no network, no pip); the image has " + packages}},
		{"a host path", "import csv\nrows = list(csv.reader(open('/home/alice/data.csv')))", nil, true,
			[]string{"FileNotFoundError", "\nnote: '/home/alice/data.csv' looks like a host path, and the sandbox sees no host files: " +
				"read it through an MCP server that can, or have its folder mounted (MCP_BRIDGE_MOUNTS, a bridge setting)"}},
		{"structured content used as text", "txt = await mcp_filesystem.read_text_file(path=" + p + ")\nrows = txt.splitlines()", fs, true,
			[]string{"AttributeError: 'dict' object has no attribute 'splitlines'",
				"\nnote: `txt` is the dict read_text_file returned (its structured content): use `txt['content']`"}},
		{"the key it names works", "txt['content'].splitlines()", fs, false, []string{"['a,b', '1,2']"}},
		{"save_tool of a decorated function", "import functools\ndef deco(f):\n    @functools.wraps(f)\n    def wrapper(*a):\n" +
			"        return f(*a)\n    return wrapper\n@deco\ndef hello(x):\n    return x\nsave_tool(hello)", nil, true,
			[]string{"save_tool cannot save 'hello': a saved tool is one plain def, and this one is decorated (@deco); save it without the decorator"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := map[string]any{"code": c.code, "timeout": 60}
			if c.servers != nil {
				args["servers"] = c.servers
			}
			r := b.call(args)
			got := text(t, r)
			if r.IsError != c.isError {
				t.Errorf("isError = %v, want %v: %s", r.IsError, c.isError, got)
			}
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("%s\n got: %s\nwant containing: %s", c.code, got, w)
				}
			}
			if strings.Contains(got, "RuntimeWarning") || strings.Contains(got, "never awaited") {
				t.Errorf("%s: Python's warning is in the text:\n%s", c.code, got)
			}
		})
	}

	// A huge value: one marker, naming the file that keeps it all, between
	// whole lines.
	r := b.run("class Rows:\n    def __repr__(self):\n        return '\\n'.join('row %04d of the value' % i for i in range(2000))\nRows()")
	got := text(t, r)
	if n := strings.Count(got, "bytes omitted"); n != 1 || structured(t, r)["truncated"] != true {
		t.Errorf("huge value: %d markers, want 1, and truncated:\n%s", n, got)
	}
	row := regexp.MustCompile(`^(row [0-9]{4} of the value|\[\.\.\. [0-9]+ bytes omitted; full output in /workspace/\.bridge/output-[0-9]+\.txt \.\.\.\])$`)
	for _, l := range strings.Split(got, "\n") {
		if !row.MatchString(l) {
			t.Errorf("huge value: line %q is cut:\n%s", l, got)
			break
		}
	}

	if testRuntime() == "local" {
		return // the host's python3 may have no pandas
	}
	b.expectText("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y|z']})",
		"|  | a | b |\n|---|---|---|\n| 0 | 1 | x |\n| 1 | 2 | y\\|z |", false)
}
