package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestArgumentNames checks issue 35's argument rule end to end on the fake
// server's get-sum(a, b), whose schema declares its properties and nothing
// that lets other names through: an extra, a misspelt and a missing
// argument raise MCPError (kind invalid_arguments) with the same message
// from the proxy and from runtime.call_tool, under the server's and the
// tool's names or aliases alike (actors' TestCallToolArgumentNames checks
// that nothing refused reaches the server); validate=False still passes an extra argument; call_tool takes the
// aliases the proxies show. Before issue 35 the proxy passed c and bb
// through, named neither the missing argument's signature nor a close
// name, and call_tool refused the aliases.
func TestArgumentNames(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, withServers(t, map[string]any{"fake-srv": fake()}, nil))
	const sig = "get_sum(a: number, b: number)"
	const prefix = "invalid_arguments: Invalid arguments for fake-srv.get-sum: "
	cases := []struct {
		name, args, want string // args: Python keyword arguments; want: the message, "" for a sum
	}{
		{"an extra argument", "a=1, b=2, c=3", prefix + "unexpected argument 'c'; " + sig},
		{"a misspelt argument", "a=1, bb=2", prefix + "unexpected argument 'bb'; did you mean 'b'? " + sig},
		{"a missing argument", "a=1", prefix + "missing required argument 'b'; " + sig},
		{"declared arguments", "a=1, b=2", `{"sum": 3}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code := `async def outcome(call):
    try:
        r = await call
    except MCPError as e:
        return "%s: %s" % (e.kind, e)
    return r if isinstance(r, str) else r["content"][0]["text"] if "content" in r else str(r)
for call in (mcp_fake_srv.get_sum(` + c.args + `), runtime.call_tool("fake-srv", "get-sum", dict(` + c.args + `)),
             runtime.call_tool("fake_srv", "get_sum", dict(` + c.args + `))):
    print(await outcome(call))`
			got := b.mustOK(code, "fake-srv")
			lines := strings.Split(got, "\n")
			if len(lines) != 3 {
				t.Fatalf("output: %q, want 3 lines", got)
			}
			for i, via := range []string{"the proxy", "call_tool by name", "call_tool by alias"} {
				want := c.want
				if want == `{"sum": 3}` && i == 0 {
					want = "{'sum': 3}" // the proxy parses the JSON text
				}
				if lines[i] != want {
					t.Errorf("%s:\n got: %s\nwant: %s", via, lines[i], want)
				}
			}
		})
	}
	// validate=False is the escape for a server whose schema is wrong.
	if got := b.mustOK(`(await runtime.call_tool("fake_srv", "get_sum", {"a": 1, "b": 2, "c": 3}, validate=False))["content"][0]["text"]`, "fake-srv"); got != `'{"sum": 3}'` {
		t.Errorf("validate=False: %s, want the sum", got)
	}
}

// TestArgumentNamesFilesystem pins the issue's own example on the real
// filesystem server: read_text_file(path=..., heads=2) returned the whole
// file before issue 35; now the proxy and runtime.call_tool both name the
// argument, the one meant and the signature, and head=2 still works.
func TestArgumentNamesFilesystem(t *testing.T) {
	requirePodman(t)
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "a.txt"), []byte("one\ntwo\nthree\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, withServers(t, map[string]any{
		"filesystem": map[string]any{"command": npmBin(t, "mcp-server-filesystem"), "args": []string{root}},
	}, nil))
	const want = "invalid_arguments: Invalid arguments for filesystem.read_text_file: unexpected argument 'heads'; " +
		"did you mean 'head'? read_text_file(path: string, tail: number = None, head: number = None)"
	path := jsonQuote(filepath.Join(root, "a.txt"))
	code := `async def outcome(call):
    try:
        r = await call
    except MCPError as e:
        return "%s: %s" % (e.kind, e)
    return repr(r)
print(await outcome(mcp_filesystem.read_text_file(path=` + path + `, heads=2)))
print(await outcome(runtime.call_tool("filesystem", "read_text_file", {"path": ` + path + `, "heads": 2})))
print(await outcome(mcp_filesystem.read_text_file(path=` + path + `, head=2)))`
	got := strings.Split(b.mustOK(code, "filesystem"), "\n")
	if len(got) != 3 || got[0] != want || got[1] != want || !strings.Contains(got[2], `one\ntwo`) || strings.Contains(got[2], "three") {
		t.Errorf("got:\n%s\nwant twice: %s\nthen the first two lines", strings.Join(got, "\n"), want)
	}
}
