package entrypoint

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"
)

// serveResources runs code as call id and answers the box's requests:
// call_tool with a result of resource links, read_resource from contents by
// uri, list_resources and list_resource_templates with one item each. It
// records each read as "server uri".
func (b *box) serveResources(id int, code string, servers []any, contents map[string]any, reads *[]string) displayCall {
	b.t.Helper()
	frame := execFrame(id, code)
	frame["params"].(map[string]any)["servers"] = servers
	b.send(frame)
	var got displayCall
	deadline := time.Now().Add(30 * time.Second)
	reply := func(m map[string]any, result any) {
		b.send(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": result})
	}
	for {
		m := b.next(time.Until(deadline))
		params, _ := m["params"].(map[string]any)
		switch {
		case m["method"] == "output":
			got.output += fmt.Sprint(params["data"])
		case m["method"] == "image":
			got.images = append(got.images, fmt.Sprint(params["data"]))
		case m["method"] == "call_tool":
			reply(m, map[string]any{"result": map[string]any{"content": []any{
				map[string]any{"type": "text", "text": "links:"},
				map[string]any{"type": "resource_link", "uri": "demo://text", "name": "Text", "mimeType": "text/plain"},
				map[string]any{"type": "resource_link", "uri": "demo://png", "name": "Picture", "mimeType": "image/png"},
			}}})
		case m["method"] == "read_resource":
			*reads = append(*reads, fmt.Sprint(params["server"], " ", params["uri"]))
			reply(m, map[string]any{"result": contents[fmt.Sprint(params["uri"])]})
		case m["method"] == "list_resources":
			reply(m, map[string]any{"resources": []any{map[string]any{"uri": "demo://blob", "name": "Blob"}}})
		case m["method"] == "list_resource_templates":
			reply(m, map[string]any{"resourceTemplates": []any{map[string]any{"uriTemplate": "demo://{id}", "name": "T"}}})
		case m["method"] != nil && m["id"] != nil:
			reply(m, map[string]any{"tools": []any{}})
		case m["method"] == nil && m["id"] == float64(id):
			got.reply = m
			got.output += replyOutput(m)
			return got
		}
	}
}

// TestBoxResources: a resource_link in a proxy's result is a ResourceLink
// whose read() asks the host for that uri of the server that returned it;
// text reads as str, a blob as bytes, an image blob as an Image display()
// attaches; several parts are a list; list_resources gives ResourceLinks.
func TestBoxResources(t *testing.T) {
	pngData := noisePNG(t, 20, 20)
	b64 := base64.StdEncoding.EncodeToString(pngData)
	contents := map[string]any{
		"demo://text": map[string]any{"contents": []any{map[string]any{"uri": "demo://text", "mimeType": "text/plain", "text": "hello"}}},
		"demo://png":  map[string]any{"contents": []any{map[string]any{"uri": "demo://png", "mimeType": "image/png", "blob": b64}}},
		"demo://blob": map[string]any{"contents": []any{map[string]any{"uri": "demo://blob", "blob": base64.StdEncoding.EncodeToString([]byte("\x00\x01raw"))}}},
		"demo://two": map[string]any{"contents": []any{map[string]any{"uri": "demo://two#1", "text": "a"},
			map[string]any{"uri": "demo://two#2", "text": "b"}}},
		"demo://bad": map[string]any{"contents": []any{map[string]any{"uri": "demo://bad", "blob": "%%%"}}},
	}
	servers := []any{map[string]any{"name": "demo-srv", "alias": "demo_srv", "tools": []any{
		map[string]any{"name": "links", "alias": "links", "inputSchema": map[string]any{"type": "object"}}}},
		map[string]any{"name": "other", "alias": "other", "tools": []any{
			map[string]any{"name": "read-resource", "alias": "read_resource", "inputSchema": map[string]any{"type": "object"}}}}}
	cases := []struct {
		name, code string
		images     int
		reads      []string
		want       []string
	}{
		{"links become ResourceLinks", "r = await mcp_demo_srv.links()\nprint(r[1].uri, r[1].name, r[1].mime_type, r[1].server)\nr", 0, nil,
			[]string{"demo://text Text text/plain demo-srv", "ResourceLink(uri='demo://png', name='Picture', mime_type='image/png', server='demo-srv')"}},
		{"link.read() of text is str", "r = await mcp_demo_srv.links()\nv = await r[1].read()\nprint(type(v).__name__, v)", 0,
			[]string{"demo-srv demo://text"}, []string{"str hello"}},
		{"an image blob is an Image display() shows", "r = await mcp_demo_srv.links()\nv = await r[2].read()\nprint(type(v).__name__)\ndisplay(v)", 1,
			[]string{"demo-srv demo://png"}, []string{"Image"}},
		{"a blob is bytes", "v = await runtime.read_resource('demo-srv', 'demo://blob')\nprint(repr(v))", 0,
			[]string{"demo-srv demo://blob"}, []string{`b'\x00\x01raw'`}},
		{"several parts are a list", "print(await mcp_demo_srv.read_resource('demo://two'))", 0,
			[]string{"demo-srv demo://two"}, []string{"['a', 'b']"}},
		{"list_resources gives links that read", "(ls,) = await mcp_demo_srv.list_resources()\nprint(ls.name, repr(await ls.read()))\nprint(await mcp_demo_srv.list_resource_templates())", 0,
			[]string{"demo-srv demo://blob"}, []string{`Blob b'\x00\x01raw'`, "'uriTemplate': 'demo://{id}'"}},
		{"an invalid blob is an MCPError", "try:\n    await runtime.read_resource('demo-srv', 'demo://bad')\nexcept MCPError as e:\n    print('MCPError', e.kind, e)", 0,
			[]string{"demo-srv demo://bad"}, []string{"MCPError server_error Resource demo://bad of server 'demo-srv' has an invalid blob"}},
		{"a tool named like a resource method wins", "print(len(await mcp_other.read_resource()), await runtime.read_resource('other', 'demo://text'))", 0,
			[]string{"other demo://text"}, []string{"3 hello"}},
		{"a uri is required", "try:\n    await runtime.read_resource('demo-srv', '')\nexcept MCPError as e:\n    print('MCPError', e.kind)", 0,
			nil, []string{"MCPError invalid_arguments"}},
	}
	b := startBox(t, "stdio")
	b.next(30 * time.Second) // ready
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b.t = t
			var reads []string
			got := b.serveResources(i+1, c.code, servers, contents, &reads)
			res, _ := got.reply["result"].(map[string]any)
			text := got.output + fmt.Sprint(res["result"])
			if res["outcome"] != "ok" {
				t.Fatalf("%s: %v\noutput: %s", c.code, res, got.output)
			}
			if len(got.images) != c.images {
				t.Errorf("%s: %d images attached, want %d", c.code, len(got.images), c.images)
			}
			if fmt.Sprint(reads) != fmt.Sprint(c.reads) {
				t.Errorf("%s: reads %v, want %v", c.code, reads, c.reads)
			}
			for _, w := range c.want {
				if !strings.Contains(text, w) {
					t.Errorf("%s:\n got: %s\nwant containing: %s", c.code, text, w)
				}
			}
		})
	}
}
