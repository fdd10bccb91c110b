package entrypoint

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// serveDescribe runs code as call id, answers describe_server with
// server and call_tool with "called TOOL"; every other request gets an
// empty answer. It returns the reply with the output.
func (b *box) serveDescribe(id int, code string, servers []any, server map[string]any) displayCall {
	b.t.Helper()
	frame := execFrame(id, code)
	frame["params"].(map[string]any)["servers"] = servers
	b.send(frame)
	var got displayCall
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := b.next(time.Until(deadline))
		params, _ := m["params"].(map[string]any)
		var result any = map[string]any{"tools": []any{}}
		switch {
		case m["method"] == "output":
			got.output += fmt.Sprint(params["data"])
			continue
		case m["method"] == nil && m["id"] == float64(id):
			got.reply = m
			got.output += replyOutput(m)
			return got
		case m["method"] == nil || m["id"] == nil:
			continue
		case m["method"] == "describe_server":
			result = map[string]any{"server": server}
		case m["method"] == "call_tool":
			result = map[string]any{"result": map[string]any{"content": []any{
				map[string]any{"type": "text", "text": "called " + fmt.Sprint(params["tool"])}}}}
		}
		b.send(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": result})
	}
}

// TestBoxSkipsBadTools: the proxy builder survives any tool entry. One it
// cannot build (a schema or properties that is not an object, no name, an
// alias Python cannot bind, a repeated alias, not an object at all) is
// skipped with its reason: in the call's notes once per session, in the
// proxy's repr, in the AttributeError for its alias and in
// describe_server. Odd parts it can read around (a property schema of
// true, required of the wrong shape, an outputSchema whose type is an
// object or a string, or that nests deep, a description of the wrong
// type) cost nothing. Before issue 34 the first bad entry ended the worker.
func TestBoxSkipsBadTools(t *testing.T) {
	obj := map[string]any{"type": "object"}
	deep := map[string]any{"type": "string"}
	for range 50 {
		deep = map[string]any{"type": "array", "items": deep}
	}
	tool := func(name, alias string, schema any, extra ...any) map[string]any {
		m := map[string]any{"name": name, "alias": alias, "inputSchema": schema}
		for i := 0; i+1 < len(extra); i += 2 {
			m[extra[i].(string)] = extra[i+1]
		}
		return m
	}
	tools := []any{
		tool("good", "good", map[string]any{"type": "object", "properties": map[string]any{"x": map[string]any{"type": "integer"}}, "required": []any{"x"}}),
		tool("num-schema", "num_schema", 5),
		tool("str-schema", "str_schema", "x"),
		tool("list-schema", "list_schema", []any{1}),
		tool("list-props", "list_props", map[string]any{"type": "object", "properties": []any{"a"}}),
		tool("str-props", "str_props", map[string]any{"type": "object", "properties": "abc"}),
		map[string]any{"alias": "nameless", "inputSchema": obj},
		tool("class", "__class__", obj),
		tool("dict", "__dict__", obj),
		tool("not an id", "not an id", obj),
		tool("good-2", "good", obj),
		7,
		tool("bell\x07\u202e", "bell_", "x"),
		// Readable around: each of these gets a proxy.
		tool("true-prop", "true_prop", map[string]any{"type": "object", "properties": map[string]any{"a": true, "b": 5}, "required": 5}),
		tool("odd-required", "odd_required", map[string]any{"type": "object", "properties": map[string]any{"a": obj}, "required": []any{map[string]any{}, "a"}}),
		tool("odd-output", "odd_output", nil, "outputSchema", map[string]any{"type": map[string]any{"x": 1}}, "description", 5),
		tool("str-output", "str_output", obj, "outputSchema", "x"),
		tool("deep-output", "deep_output", obj, "outputSchema", map[string]any{"type": "object", "properties": map[string]any{"v": deep}}),
	}
	servers := []any{map[string]any{"name": "demo", "alias": "demo", "tools": tools}}
	described := map[string]any{"name": "demo", "alias": "demo", "tools": []any{}}
	b := startBox(t, "stdio")
	b.next(30 * time.Second) // ready

	code := `print(repr(mcp_demo))
print(sorted(dir(mcp_demo)))
print(await mcp_demo.good(1), await mcp_demo.true_prop(a=1, b=2), await mcp_demo.odd_required(1))
print(await mcp_demo.odd_output(), await mcp_demo.str_output(), await mcp_demo.deep_output())
print([t["name"] for t in mcp.servers.demo.TOOLS])
for alias in ("num_schema", "nameless"):
    try:
        getattr(mcp_demo, alias)
    except AttributeError as e:
        print("AttributeError", e)
import inspect
print(inspect.signature(mcp_demo.true_prop), inspect.signature(mcp_demo.odd_required))
d = runtime.describe_server("demo")
print(len(d["skipped"]), d["skipped"][0])
print("\n".join(str(s["name"]) + " " + s["reason"] for s in d["skipped"]))`
	got := b.serveDescribe(1, code, servers, described)
	res, _ := got.reply["result"].(map[string]any)
	if res["outcome"] != "ok" {
		t.Fatalf("outcome %v: %v\noutput: %s", res["outcome"], res["error"], got.output)
	}
	for _, want := range []string{
		"<MCP server 'demo': 6 tools (12 skipped: see runtime.describe_server)>",
		"['deep_output', 'good', 'list_resource_templates', 'list_resources', 'list_tools', 'odd_output', 'odd_required', 'read_resource', 'str_output', 'true_prop']",
		"called good called true-prop called odd-required",
		"called odd-output called str-output called deep-output",
		"['good', 'true-prop', 'odd-required', 'odd-output', 'str-output', 'deep-output']",
		"AttributeError Server 'demo' has a tool 'num-schema' the sandbox could not build a proxy for: inputSchema is a number, not an object",
		"AttributeError Server 'demo' has a tool a tool without a name the sandbox could not build a proxy for: it has no name",
		"(a=None, b=None, **kwargs) (a, **kwargs)",
		"None the entry is a number, not an object",
		"12 {'name': 'num-schema', 'alias': 'num_schema', 'reason': 'inputSchema is a number, not an object', 'sandbox': True}",
	} {
		if !strings.Contains(got.output, want) {
			t.Errorf("output lacks %q:\n%s", want, got.output)
		}
	}
	notes := fmt.Sprint(res["notes"])
	for _, want := range []string{
		"the sandbox skipped 12 tools of server 'demo' it could not build a proxy for: ",
		"'num-schema' (inputSchema is a number, not an object)",
		"'str-schema' (inputSchema is a string, not an object)",
		"'list-schema' (inputSchema is an array, not an object)",
		"'list-props' (inputSchema.properties is an array, not an object)",
		"'str-props' (inputSchema.properties is a string, not an object)",
		"a tool without a name (it has no name)",
		"'class' (its alias __class__ is one of Python's special names)",
		"'dict' (its alias __dict__ is one of Python's special names)",
		"'not an id' (its alias 'not an id' is not a Python identifier)",
		"'good-2' (another tool has its alias good)",
		"'good-2' (another tool has its alias good), and 2 more",
	} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes lack %q:\n%s", want, notes)
		}
	}
	if strings.ContainsAny(got.output+notes, "\x07\u202e") {
		t.Errorf("a raw control or bidi character reached the output or notes:\n%q\n%q", got.output, notes)
	}
	if !strings.Contains(got.output, `bell\x07\u202e inputSchema is a string, not an object`) {
		t.Errorf("describe_server does not show the bell tool escaped:\n%s", got.output)
	}

	// The sandbox lives on, and names the same skips once per session.
	got = b.serveDescribe(2, "print(await mcp_demo.good(2))", servers, described)
	res, _ = got.reply["result"].(map[string]any)
	if res["outcome"] != "ok" || !strings.Contains(got.output, "called good") {
		t.Fatalf("second call: %v\n%s", res, got.output)
	}
	if res["notes"] != nil {
		t.Errorf("second call notes = %v, want none: the skips were named once", res["notes"])
	}
}
