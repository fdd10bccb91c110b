package tests

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// base64Run is 200 or more base64 characters in a row: image data that
// leaked into text.
var base64Run = regexp.MustCompile(`[A-Za-z0-9+/]{200,}`)

// writeNoisePNG writes a w x h PNG of random pixels (it does not compress:
// its base64 is tens of KB, like a real picture's) and returns its bytes.
func writeNoisePNG(t *testing.T, path string, w, h int) []byte {
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
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// pngHeaderSize is the width and height in the IHDR chunk of a PNG image
// content. The everything server's logo has a chunk with a bad CRC, which
// image/png refuses, so its header is read directly.
func pngHeaderSize(t *testing.T, img mcp.ImageContent) (w, h int) {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(img.Data)
	if err != nil || img.MIMEType != "image/png" {
		t.Fatalf("image %s: %v", img.MIMEType, err)
	}
	if len(raw) < 24 || !bytes.HasPrefix(raw, []byte("\x89PNG\r\n\x1a\n")) || string(raw[12:16]) != "IHDR" {
		t.Fatalf("image data is not a PNG: %q", raw[:min(len(raw), 24)])
	}
	return int(binary.BigEndian.Uint32(raw[16:20])), int(binary.BigEndian.Uint32(raw[20:24]))
}

// noBase64 fails when the text or the structured content of r (everything
// but its image contents) carries a run of base64.
func noBase64(t *testing.T, code string, r *mcp.CallToolResult) {
	t.Helper()
	var texts []string
	for _, c := range r.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	sc, err := json.Marshal(r.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range append(texts, string(sc)) {
		if run := base64Run.FindString(s); run != "" {
			t.Errorf("%s: result text carries %d base64 characters: %.200s", code, len(run), s)
		}
	}
}

// TestDisplayMCPResults checks, with the real everything and filesystem
// servers, that what their image tools return is what the model can use
// the obvious way: display() and a cell's final value attach every image in
// a proxy's or runtime.call_tool's result (content lists, structured
// {'content': [...]}, lists of results), once each; no text of the run_python
// result carries the base64 (a placeholder like <image/png 1.2 KB> stands
// for it) while the raw data stays in the dicts; help(proxy) says what the
// tool returns. Before the change display() printed a list repr or 40 KB of
// base64 and attached nothing.
func TestDisplayMCPResults(t *testing.T) {
	requirePodman(t)
	root := t.TempDir()
	picture := filepath.Join(root, "noise.png")
	pngData := writeNoisePNG(t, picture, 100, 60)
	b64 := base64.StdEncoding.EncodeToString(pngData)
	b := startBridge(t, withServers(t, map[string]any{
		"everything": map[string]any{"command": npmBin(t, "mcp-server-everything")},
		"filesystem": map[string]any{"command": npmBin(t, "mcp-server-filesystem"), "args": []string{root}},
	}, nil))
	p := jsonQuote(picture)
	placeholder := fmt.Sprintf("<image/png %.1f KB>", float64(len(pngData))/1024)
	// The dimensions of each attached image: 20x20 is everything's MCP logo,
	// 100x60 the picture read through the filesystem server.
	cases := []struct {
		name, code string
		sizes      [][2]int
		want       []string
	}{
		{"display of a content list", "display(await mcp_everything.get_tiny_image())", [][2]int{{20, 20}},
			[]string{`["Here's the image you requested:", <image/png `, "'The image above is the MCP logo.']"}},
		{"display of structured content", "display(await mcp_filesystem.read_media_file(path=" + p + "))", [][2]int{{100, 60}},
			[]string{"'data': " + placeholder}},
		{"final value holding results", "[await mcp_everything.get_tiny_image(), await mcp_filesystem.read_media_file(path=" + p + ")]",
			[][2]int{{20, 20}, {100, 60}}, []string{placeholder}},
		{"final value of a raw call_tool result", "await runtime.call_tool('filesystem', 'read_media_file', {'path': " + p + "})",
			[][2]int{{100, 60}}, []string{"'structuredContent': {'content': [{", "'data': " + placeholder}},
		{"raw data stays in the raw dict", "r = await runtime.call_tool('filesystem', 'read_media_file', {'path': " + p + "})\n" +
			"print(type(r) is dict, r['content'][0]['data'] == (await mcp_filesystem.read_media_file(path=" + p + "))['content'][0]['data'], len(r['content'][0]['data']))",
			nil, []string{fmt.Sprintf("True True %d", len(b64))}},
		{"print of a result", "print(await mcp_filesystem.read_media_file(path=" + p + "))\nprint(await mcp_everything.get_tiny_image())",
			nil, []string{"'data': " + placeholder, "<image/png "}},
		{"help says a structured tool returns a dict", "help(mcp_filesystem.read_text_file)", nil,
			[]string{"Returns: dict {'content': str} (the tool's structured content)."}},
		{"help says a plain tool returns text", "help(mcp_everything.get_tiny_image)", nil, []string{"Returns: text"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := b.call(map[string]any{"code": c.code, "servers": []string{"everything", "filesystem"}, "timeout": 60})
			got := text(t, r)
			if r.IsError {
				t.Fatalf("%s: %s", c.code, got)
			}
			imgs := images(t, r)
			if len(imgs) != len(c.sizes) {
				t.Errorf("%s: %d images attached, want %d\n%s", c.code, len(imgs), len(c.sizes), got)
			}
			for i, img := range imgs[:min(len(imgs), len(c.sizes))] {
				if w, h := pngHeaderSize(t, img); w != c.sizes[i][0] || h != c.sizes[i][1] {
					t.Errorf("%s: image %d is %dx%d, want %dx%d", c.code, i, w, h, c.sizes[i][0], c.sizes[i][1])
				}
				if c.sizes[i] == [2]int{100, 60} && img.Data != b64 {
					t.Errorf("%s: image %d is not the file's bytes", c.code, i)
				}
			}
			noBase64(t, c.code, r)
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("%s:\n got: %s\nwant containing: %s", c.code, got, w)
				}
			}
		})
	}
}
