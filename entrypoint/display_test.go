package entrypoint

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand"
	"regexp"
	"strings"
	"testing"
	"time"
)

// noisePNG is a w x h PNG of random pixels: it does not compress, so its
// base64 is long enough to notice in any text.
func noisePNG(t *testing.T, w, h int) []byte {
	t.Helper()
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	r := rand.New(rand.NewSource(1))
	for y := range h {
		for x := range w {
			img.Set(x, y, color.NRGBA{uint8(r.Intn(256)), uint8(r.Intn(256)), uint8(r.Intn(256)), 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// base64Run finds 200 or more base64 characters in a row: image data that
// leaked into text.
var base64Run = regexp.MustCompile(`[A-Za-z0-9+/]{200,}`)

// displayCall is what the box sent for one exec: its reply, its output and
// its image frames.
type displayCall struct {
	reply  map[string]any
	output string
	images []string // base64 data of the image frames, in order
}

// serveTools runs code as call id and answers the box's call_tool requests
// with results[tool]; every other request gets an empty answer.
func (b *box) serveTools(id int, code string, servers []any, results map[string]any) displayCall {
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
		case m["method"] == "image":
			got.images = append(got.images, fmt.Sprint(params["data"]))
		case m["method"] == "call_tool":
			b.send(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": map[string]any{"result": results[fmt.Sprint(params["tool"])]}})
		case m["method"] != nil && m["id"] != nil:
			b.send(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": map[string]any{"tools": []any{}}})
		case m["method"] == nil && m["id"] == float64(id):
			got.reply = m
			got.output += replyOutput(m)
			return got
		}
	}
}

// TestBoxDisplayResults: display() and a cell's final value find the images
// in what proxies and runtime.call_tool return (content lists, structured
// {'content': [...]}, image blocks, embedded resources with an image MIME
// type) and attach each one; no text the model sees carries their base64;
// the raw data stays in the dicts; help() says what a proxy returns.
func TestBoxDisplayResults(t *testing.T) {
	pngData := noisePNG(t, 40, 40)
	b64 := base64.StdEncoding.EncodeToString(pngData)
	imageBlock := map[string]any{"type": "image", "data": b64, "mimeType": "image/png"}
	results := map[string]any{
		// The host sends these as JSON, whose objects encoding/json writes
		// with sorted keys: the reprs below list data, mimeType, type.
		// get-tiny-image's shape: text, image, text.
		"tiny": map[string]any{"content": []any{
			map[string]any{"type": "text", "text": "Here's the image"}, imageBlock,
			map[string]any{"type": "text", "text": "The end"}}},
		// read_media_file's shape: the same block as structured content.
		"media": map[string]any{"content": []any{imageBlock}, "structuredContent": map[string]any{"content": []any{imageBlock}}},
		"res": map[string]any{"content": []any{map[string]any{"type": "resource",
			"resource": map[string]any{"uri": "file:///x.png", "mimeType": "image/png", "blob": b64}}}},
		"blob": map[string]any{"content": []any{map[string]any{"type": "resource",
			"resource": map[string]any{"uri": "file:///x.bin", "mimeType": "application/octet-stream", "blob": b64}}}},
		"bad": map[string]any{"content": []any{map[string]any{"type": "text", "text": "t"},
			map[string]any{"type": "image", "data": "not base64!", "mimeType": "image/png"}}},
		"sound": map[string]any{"content": []any{map[string]any{"type": "audio", "data": b64, "mimeType": "audio/wav"}}},
	}
	tool := func(name string, output map[string]any) map[string]any {
		t := map[string]any{"name": name, "alias": name, "inputSchema": map[string]any{"type": "object"}}
		if output != nil {
			t["outputSchema"] = output
		}
		return t
	}
	servers := []any{map[string]any{"name": "demo", "alias": "demo", "tools": []any{
		tool("tiny", nil),
		tool("media", map[string]any{"type": "object", "properties": map[string]any{
			"content": map[string]any{"type": "array", "items": map[string]any{"type": "object"}}}}),
		tool("text", map[string]any{"type": "object", "properties": map[string]any{"content": map[string]any{"type": "string"}}}),
		tool("res", nil), tool("blob", nil), tool("sound", nil), tool("bad", nil),
	}}}
	size := fmt.Sprintf("<image/png %.1f KB>", float64(len(pngData))/1024)
	cases := []struct {
		name, code string
		images     int
		want       []string // in the output or the result text
	}{
		{"display of a content list", "display(await mcp_demo.tiny())", 1,
			[]string{`["Here's the image", ` + size + `, 'The end']`}},
		{"display of structured content", "display(await mcp_demo.media())", 1,
			[]string{"{'content': [{'data': " + size + ", 'mimeType': 'image/png', 'type': 'image'}]}"}},
		{"display of a raw result with an image resource", "display(await runtime.call_tool('demo', 'res'))", 1,
			[]string{"'blob': " + size}},
		{"display of a list of results", "display([await mcp_demo.tiny(), await mcp_demo.media(), await mcp_demo.res()])", 3, nil},
		{"display of a tuple", "display((await mcp_demo.tiny(),))", 1, nil},
		{"final value of a proxy", "await mcp_demo.tiny()", 1, []string{size}},
		{"final value of a raw result", "await runtime.call_tool('demo', 'media')", 1,
			[]string{"'data': " + size, "'structuredContent': {'content': [{'data': " + size}},
		{"final value of an image block", "(await runtime.call_tool('demo', 'media'))['content'][0]", 1, []string{size}},
		{"print of a structured result", "print(await mcp_demo.media())", 0, []string{"'data': " + size}},
		{"str of an Image", "print(str((await mcp_demo.tiny())[1]), repr(await mcp_demo.res()))", 0,
			[]string{size + " Resource(uri='file:///x.png', " + size + ")"}},
		{"a blob resource is text", "display(await runtime.call_tool('demo', 'blob'))", 0,
			[]string{fmt.Sprintf("'blob': <application/octet-stream %.1f KB>", float64(len(pngData))/1024)}},
		{"audio is text", "await runtime.call_tool('demo', 'sound')", 0,
			[]string{fmt.Sprintf("'data': <audio/wav %.1f KB>", float64(len(pngData))/1024)}},
		{"an invalid image is named, not attached", "display(await runtime.call_tool('demo', 'bad'))", 0,
			[]string{"display: an image was not attached: its data is not valid base64", "'data': <image/png 8 B>"}},
		{"raw data stays raw", `import json
raw = await runtime.call_tool('demo', 'media')
got = await mcp_demo.media()
print(type(raw) is dict, raw['content'][0]['data'] == got['content'][0]['data'],
      len(got['content'][0]['data']), json.loads(json.dumps(got)) == raw['structuredContent'])`, 0,
			[]string{fmt.Sprintf("True True %d True", len(b64))}},
		{"help says what a structured tool returns", "print(mcp_demo.media.__doc__)", 0,
			[]string{"Returns: dict {'content': list[dict]} (the tool's structured content)."}},
		{"help says a string field is in a dict", "print(mcp_demo.text.__doc__)", 0,
			[]string{"Returns: dict {'content': str}"}},
		{"help says a plain tool returns text", "print(mcp_demo.tiny.__doc__)", 0, []string{"Returns: text"}},
	}
	b := startBox(t, "stdio")
	b.next(30 * time.Second) // ready
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b.t = t
			got := b.serveTools(i+1, c.code, servers, results)
			res, _ := got.reply["result"].(map[string]any)
			text := got.output + fmt.Sprint(res["result"])
			if res["outcome"] != "ok" {
				t.Fatalf("%s: %v\noutput: %s", c.code, res, got.output)
			}
			if len(got.images) != c.images {
				t.Errorf("%s: %d images attached, want %d\ntext: %s", c.code, len(got.images), c.images, text)
			}
			for _, img := range got.images {
				if img != b64 {
					t.Errorf("%s: attached image differs from the tool's", c.code)
				}
			}
			if run := base64Run.FindString(text); run != "" {
				t.Errorf("%s: text carries %d base64 characters: %.80s...", c.code, len(run), text)
			}
			for _, w := range c.want {
				if !strings.Contains(text, w) {
					t.Errorf("%s:\n got: %s\nwant containing: %s", c.code, text, w)
				}
			}
		})
	}
}
