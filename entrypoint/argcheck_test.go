package entrypoint

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// serveEcho runs code as call id and answers each call_tool request with a
// text result holding its params as JSON (sorted keys), so the code sees
// exactly what the sandbox sent; every other request gets an empty answer.
func (b *box) serveEcho(id int, code string, servers []any) displayCall {
	b.t.Helper()
	frame := execFrame(id, code)
	frame["params"].(map[string]any)["servers"] = servers
	b.send(frame)
	var got displayCall
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := b.next(time.Until(deadline))
		params, _ := m["params"].(map[string]any)
		switch {
		case m["method"] == "output":
			got.output += fmt.Sprint(params["data"])
		case m["method"] == "call_tool":
			sent, _ := json.Marshal(params)
			b.send(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": map[string]any{"result": map[string]any{
				"content": []any{map[string]any{"type": "text", "text": "sent " + string(sent)}}}}})
		case m["method"] != nil && m["id"] != nil:
			b.send(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": map[string]any{"tools": []any{}}})
		case m["method"] == nil && m["id"] == float64(id):
			got.reply = m
			got.output += replyOutput(m)
			return got
		}
	}
}

// TestBoxProxyLeavesNamesToHost: a proxy sends every keyword as given, a
// misspelt, extra or missing one included, whatever its schema says
// (additionalProperties false too), so the host's check gives the message
// runtime.call_tool gets (issue 35). What only Python can see (too many
// positional arguments, one given twice) fails in the sandbox with the
// signature the host renders. help() keeps showing **kwargs only where the
// schema takes other names. runtime.call_tool sends validate false only
// when asked.
func TestBoxProxyLeavesNamesToHost(t *testing.T) {
	num := map[string]any{"type": "number"}
	tools := []any{
		map[string]any{"name": "get-sum", "alias": "get_sum", "inputSchema": map[string]any{"type": "object",
			"properties": map[string]any{"a": num, "b": num}, "required": []any{"a", "b"}}},
		map[string]any{"name": "shut", "alias": "shut", "inputSchema": map[string]any{"type": "object",
			"properties": map[string]any{"x": map[string]any{"type": "string"}}, "additionalProperties": false}},
	}
	servers := []any{map[string]any{"name": "demo", "alias": "demo", "tools": tools}}
	b := startBox(t, "stdio")
	b.next(30 * time.Second) // ready
	code := `import inspect
print(await mcp_demo.get_sum(a=1, b=2, c=3))
print(await mcp_demo.get_sum(a=1, bb=2))
print(await mcp_demo.get_sum(1))
print(await mcp_demo.shut(x="s", heads=2))
print(inspect.signature(mcp_demo.get_sum), inspect.signature(mcp_demo.shut))
for f in (lambda: mcp_demo.get_sum(1, 2, 3), lambda: mcp_demo.get_sum(1, a=1)):
    try:
        await f()
    except MCPError as e:
        print("MCPError", e.kind, e)
print((await runtime.call_tool("demo", "get-sum", {"a": 1, "c": 3}, validate=False))["content"][0]["text"])
print((await runtime.call_tool("demo", "get-sum", {"a": 1}))["content"][0]["text"])`
	got := b.serveEcho(1, code, servers)
	res, _ := got.reply["result"].(map[string]any)
	if res["outcome"] != "ok" {
		t.Fatalf("outcome %v: %v\noutput: %s", res["outcome"], res["error"], got.output)
	}
	want := `sent {"arguments":{"a":1,"b":2,"c":3},"server":"demo","tool":"get-sum"}
sent {"arguments":{"a":1,"bb":2},"server":"demo","tool":"get-sum"}
sent {"arguments":{"a":1},"server":"demo","tool":"get-sum"}
sent {"arguments":{"heads":2,"x":"s"},"server":"demo","tool":"shut"}
(a, b, **kwargs) (x=None)
MCPError invalid_arguments Invalid arguments for demo.get-sum: too many positional arguments; get_sum(a: number, b: number)
MCPError invalid_arguments Invalid arguments for demo.get-sum: multiple values for argument 'a'; get_sum(a: number, b: number)
sent {"arguments":{"a":1,"c":3},"server":"demo","tool":"get-sum","validate":false}
sent {"arguments":{"a":1},"server":"demo","tool":"get-sum"}
`
	if strings.TrimSpace(got.output) != strings.TrimSpace(want) {
		t.Errorf("output:\n%s\nwant:\n%s", got.output, want)
	}
}
