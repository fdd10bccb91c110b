package entrypoint

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBoxKeptServers: the worker keeps the server entries of the previous
// exec frame by digest, so a frame may name one by its digest alone
// (cached) and gets the same proxies. A frame naming an entry not kept is
// answered with CodeStaleServers (-32008) before anything runs or changes;
// a frame without a server drops what was kept.
func TestBoxKeptServers(t *testing.T) {
	b := startBox(t, "stdio")
	echo := map[string]any{"name": "echo", "alias": "echo", "inputSchema": map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"type": "integer"}}}}
	full := []any{map[string]any{"name": "demo", "alias": "demo", "digest": "d1", "tools": []any{echo}}}
	ref := func(digest string) []any {
		return []any{map[string]any{"name": "demo", "alias": "demo", "digest": digest, "cached": true}}
	}
	outcome := func(got displayCall) string {
		t.Helper()
		if e, ok := got.reply["error"].(map[string]any); ok {
			return fmt.Sprintf("error %v", e["code"])
		}
		res, _ := got.reply["result"].(map[string]any)
		if res["outcome"] != "ok" {
			t.Fatalf("outcome %v: %v\noutput: %s", res["outcome"], res["error"], got.output)
		}
		return strings.TrimSpace(got.output)
	}
	steps := []struct {
		servers []any
		code    string
		want    string
	}{
		{full, "import mcp.servers.demo as m\nfirst = (mcp_demo, m)\nprint(len(m.TOOLS), await mcp_demo.echo(x=1))", "1 called echo"},
		{ref("d1"), "import mcp.servers.demo as m\nprint(mcp_demo is first[0], m is first[1], await mcp_demo.echo(x=2))", "True True called echo"},
		// Not kept: nothing runs, and what was kept stays.
		{ref("d2"), "ran = 1", "error -32008"},
		{ref("d1"), "print('ran' in globals(), mcp_demo is first[0])", "False True"},
		// The same entry sent in full again (a host that forgot) reuses it.
		{full, "print(mcp_demo is first[0])", "True"},
		{nil, "print('mcp_demo' in globals())", "False"},
		{ref("d1"), "ran = 1", "error -32008"},
		{full, "print(mcp_demo is first[0], 'ran' in globals())", "False False"},
	}
	for i, s := range steps {
		got := b.serveDescribe(i+1, s.code, s.servers, nil)
		if got := outcome(got); got != s.want {
			t.Errorf("step %d (%s): got %q, want %q", i+1, s.code, got, s.want)
		}
	}
}

// TestBoxMountNotes: a session's first result names each read-write mount
// its user cannot write (here one that does not exist: the tests run as
// root, who may write any folder), and later results do not.
func TestBoxMountNotes(t *testing.T) {
	ok, missing := t.TempDir(), filepath.Join(t.TempDir(), "gone")
	b := startBoxLimits(t, "stdio", map[string]any{"rwMounts": []string{ok, missing}})
	for call := 1; call <= 2; call++ {
		b.send(execFrame(call, "x = 1"))
		reply, _ := b.serve(call, 30*time.Second)
		res, _ := reply["result"].(map[string]any)
		got := fmt.Sprint(res["notes"])
		if call == 1 && (!strings.Contains(got, "the read-write mount "+missing+" cannot be written by the sandbox's user") || strings.Contains(got, ok)) {
			t.Errorf("first result's notes: %s; want %s named, and only it", got, missing)
		}
		if call == 2 && strings.Contains(got, "read-write mount") {
			t.Errorf("second result's notes: %s; want no mount note", got)
		}
	}
}
