package tests

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// images returns the image contents of r after the text, failing if any
// content after the first is not an image.
func images(t *testing.T, r *mcp.CallToolResult) []mcp.ImageContent {
	t.Helper()
	text(t, r)
	var out []mcp.ImageContent
	for i, c := range r.Content[1:] {
		img, ok := c.(mcp.ImageContent)
		if !ok {
			t.Fatalf("content[%d] is %T, want image", i+1, c)
		}
		out = append(out, img)
	}
	return out
}

// decodePNG checks the PNG magic of a base64 image and decodes it.
func decodePNG(t *testing.T, img mcp.ImageContent) (w, h int) {
	t.Helper()
	if img.MIMEType != "image/png" {
		t.Fatalf("mimeType = %q, want image/png", img.MIMEType)
	}
	raw, err := base64.StdEncoding.DecodeString(img.Data)
	if err != nil {
		t.Fatalf("image data is not base64: %v", err)
	}
	if !bytes.HasPrefix(raw, []byte("\x89PNG\r\n\x1a\n")) {
		t.Fatalf("image data does not start with the PNG magic: %q", raw[:min(len(raw), 8)])
	}
	cfg, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("image/png cannot decode the image: %v", err)
	}
	b := cfg.Bounds()
	return b.Dx(), b.Dy()
}

// TestFigures checks that plt.show() and figures still open when a cell
// ends come back as PNG image content after the text, in creation order,
// and are closed; and that matplotlib is never imported by the bridge.
func TestFigures(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, nil)
	b.expectText("import sys\nprint('matplotlib' in sys.modules, 'PIL' in sys.modules)", "False False", false)

	r := b.run(`import matplotlib.pyplot as plt
plt.figure(figsize=(2, 1)); plt.plot([1, 2, 3])
plt.show()
plt.figure(figsize=(3, 1)); plt.bar([1], [2])
plt.figure(figsize=(4, 1)); plt.plot([3, 2])
print("done")`)
	if got, want := text(t, r), "done\nnote: 3 images attached"; got != want || r.IsError {
		t.Fatalf("text = %q (isError %v), want %q", got, r.IsError, want)
	}
	imgs := images(t, r)
	if len(imgs) != 3 {
		t.Fatalf("%d images, want 3", len(imgs))
	}
	// Creation order: the widths are 200, 300 and 400 pixels at 100 dpi.
	for i, want := range []int{200, 300, 400} {
		if w, h := decodePNG(t, imgs[i]); w != want || h != 100 {
			t.Errorf("image %d is %dx%d, want %dx100", i, w, h, want)
		}
	}
	// Shown figures were closed: the next call attaches nothing.
	r = b.expectText("print(len(plt.get_fignums()))", "0", false)
	if len(r.Content) != 1 {
		t.Errorf("next call has %d contents, want the text only", len(r.Content))
	}
	// A default figure is 640x480; a failing cell still returns its figure.
	r = b.run("plt.plot([1, 2]); 1/0")
	if imgs := images(t, r); !r.IsError || len(imgs) != 1 {
		t.Fatalf("failing cell: isError %v, %d images; want an error with 1 image", r.IsError, len(imgs))
	} else if w, h := decodePNG(t, imgs[0]); w != 640 || h != 480 {
		t.Errorf("default figure is %dx%d, want 640x480", w, h)
	}
}

// TestDisplayKinds checks display() of each kind: a matplotlib figure, a PIL
// image, PNG, JPEG and SVG bytes, an MCP image content dict and the
// runtime.Image a proxy returns, as images in order; a DataFrame as a
// markdown table and anything else as its repr; runtime.display too.
func TestDisplayKinds(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, withServers(t, map[string]any{"fs": fake()}, nil))
	r := b.call(map[string]any{"servers": []string{"fs"}, "code": `import io, base64
import matplotlib.figure
from PIL import Image as PILImage
import pandas as pd
fig = matplotlib.figure.Figure(figsize=(1, 1)); fig.add_subplot().plot([1, 2])
display(fig)
im = PILImage.new("RGB", (30, 20), "red")
display(im)
buf = io.BytesIO(); im.save(buf, "PNG"); display(buf.getvalue())
buf = io.BytesIO(); im.save(buf, "JPEG"); display(buf.getvalue())
display(b'<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"><rect width="4" height="4"/></svg>')
raw = await runtime.call_tool("fs", "image")
display(raw["content"][0])
proxied = await mcp_fs.image()
print(type(proxied).__name__)
display(proxied)
display(pd.DataFrame({"a": [1, 2], "b": ["x", "y|z"]}))
display({"k": 1})
runtime.display("via runtime")
class Rich:
    def _repr_png_(self): return buf.getvalue()
class Md:
    def _repr_markdown_(self): return "**bold**"
display(Rich(), Md())
display(pd.DataFrame({"n": range(100)}))`})
	rows := ""
	for i := 0; i < 20; i++ {
		rows += fmt.Sprintf("| %d | %d |\n", i, i)
	}
	want := "Image\n|  | a | b |\n|---|---|---|\n| 0 | 1 | x |\n| 1 | 2 | y\\|z |\n{'k': 1}\n'via runtime'\n**bold**\n" +
		"|  | n |\n|---|---|\n" + rows + "(100 rows x 1 columns; showing 20 x 1)\nnote: 8 images attached"
	if got := text(t, r); got != want || r.IsError {
		t.Fatalf("text (isError %v):\n%s\nwant:\n%s", r.IsError, got, want)
	}
	imgs := images(t, r)
	wantMIME := []string{"image/png", "image/png", "image/png", "image/jpeg", "image/svg+xml", "image/png", "image/png", "image/jpeg"}
	if len(imgs) != len(wantMIME) {
		t.Fatalf("%d images, want %d", len(imgs), len(wantMIME))
	}
	for i, img := range imgs {
		if img.MIMEType != wantMIME[i] {
			t.Errorf("image %d mimeType = %q, want %q", i, img.MIMEType, wantMIME[i])
		}
	}
	if w, h := decodePNG(t, imgs[0]); w != 100 || h != 100 {
		t.Errorf("figure is %dx%d, want 100x100", w, h)
	}
	for _, i := range []int{1, 2} {
		if w, h := decodePNG(t, imgs[i]); w != 30 || h != 20 {
			t.Errorf("image %d is %dx%d, want 30x20", i, w, h)
		}
	}
	for _, i := range []int{5, 6} {
		if w, h := decodePNG(t, imgs[i]); w != 1 || h != 1 {
			t.Errorf("proxied image %d is %dx%d, want 1x1", i, w, h)
		}
	}
	jpeg, _ := base64.StdEncoding.DecodeString(imgs[3].Data)
	svg, _ := base64.StdEncoding.DecodeString(imgs[4].Data)
	if !bytes.HasPrefix(jpeg, []byte("\xff\xd8\xff")) || !bytes.HasPrefix(svg, []byte("<svg")) {
		t.Errorf("jpeg starts %q, svg starts %q", jpeg[:3], svg[:4])
	}
	// A user variable named display shadows the builtin; deleting it restores it.
	b.expectText("display = 5\nprint(display)", "5", false)
	b.expectText("del display\nprint(display.__name__)", "display", false)
}

// TestImageCaps checks MCP_BRIDGE_MAX_IMAGES and MCP_BRIDGE_MAX_IMAGE_BYTES:
// images over a cap are saved under /workspace and the text says where.
func TestImageCaps(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, map[string]string{"MCP_BRIDGE_MAX_IMAGES": "2", "MCP_BRIDGE_MAX_IMAGE_BYTES": "20000"})
	// Figure 1 is over the byte cap; of figures 2..4, the third is over the count.
	r := b.run(`import matplotlib.pyplot as plt, numpy as np
plt.figure(figsize=(4, 4)); plt.imshow(np.random.default_rng(0).random((200, 200)))
for i in range(3):
    plt.figure(figsize=(1, 1)); plt.plot([i, 1])`)
	got := text(t, r)
	if imgs := images(t, r); len(imgs) != 2 || r.IsError {
		t.Fatalf("%d images (isError %v), want 2: %s", len(imgs), r.IsError, got)
	}
	lines := strings.Split(got, "\n")
	if len(lines) != 4 || lines[0] != "Success (no output)" || lines[1] != "note: 2 images attached" ||
		!strings.HasPrefix(lines[2], "note: image of ") ||
		!strings.HasSuffix(lines[2], " bytes not attached: over MCP_BRIDGE_MAX_IMAGE_BYTES=20000; saved to /workspace/.bridge/image-1-1.png") ||
		lines[3] != "note: image not attached: over MCP_BRIDGE_MAX_IMAGES=2; saved to /workspace/.bridge/image-1-4.png" {
		t.Errorf("text:\n%s", got)
	}
	b.expectText("import os\nprint(open('/workspace/.bridge/image-1-4.png', 'rb').read(4), os.path.getsize('/workspace/.bridge/image-1-1.png') > 20000)",
		`b'\x89PNG' True`, false)
}

// TestForgedImageFrames checks that image and progress frames forged by user
// code cannot exceed the caps: an oversized image, a wrong MIME type, bad
// base64, another call's id and images over the count are refused and
// counted; only valid frames within the caps are attached.
func TestForgedImageFrames(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, map[string]string{"MCP_BRIDGE_MAX_IMAGES": "2", "MCP_BRIDGE_MAX_IMAGE_BYTES": "4096"})
	r := b.run(`import base64, sys
L = sys.modules['mcp.runtime'].LINK
call = sys.modules['mcp._display'].IMAGES.call
png = base64.b64encode(b'\x89PNG\r\n\x1a\n' + b'x' * 100).decode()
big = base64.b64encode(b'\x89PNG\r\n\x1a\n' + b'x' * 100000).decode()
L.notify("image", {"call": call, "mimeType": "image/png", "data": big})
L.notify("image", {"call": call, "mimeType": "text/html", "data": png})
L.notify("image", {"call": call, "mimeType": "image/png", "data": "!!not base64!!"})
L.notify("image", {"call": call, "mimeType": "image/jpeg", "data": png})
L.notify("image", {"call": call + 1, "mimeType": "image/png", "data": png})
for i in range(5):
    L.notify("image", {"call": call, "mimeType": "image/png", "data": png})
L.notify("progress", {"call": call, "data": "x" * 100000})
print("sent")`)
	got := text(t, r)
	if imgs := images(t, r); len(imgs) != 2 || r.IsError {
		t.Fatalf("%d images (isError %v), want 2: %s", len(imgs), r.IsError, got)
	}
	if !strings.Contains(got, "note: 7 invalid image frames dropped") {
		t.Errorf("text lacks the dropped-frames note:\n%s", got)
	}
	b.expectText("print('still up')", "still up", false)
}

// progressRecorder collects notifications/progress for one token.
type progressRecorder struct {
	mu     sync.Mutex
	token  string
	ignore map[any]bool // tokens of earlier calls, whose last notification may trail their response
	got    []mcp.ProgressNotificationParams
	other  int // progress notifications for another token
}

func (p *progressRecorder) handle(n mcp.JSONRPCNotification) {
	if n.Method != "notifications/progress" {
		return
	}
	f := n.Params.AdditionalFields
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ignore[f["progressToken"]] {
		return
	}
	if f["progressToken"] != p.token {
		p.other++
		return
	}
	prog, _ := f["progress"].(float64)
	msg, _ := f["message"].(string)
	p.got = append(p.got, mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: prog, Message: msg})
}

func (p *progressRecorder) snapshot() ([]mcp.ProgressNotificationParams, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]mcp.ProgressNotificationParams(nil), p.got...), p.other
}

// progressRun runs a 3 s cell with a progress token and checks the
// notifications for it: least..15 of them (at most ~3 a second), progress
// increasing; it returns them.
func (b *bridge) progressRun(token string, least int, code string) []mcp.ProgressNotificationParams {
	b.t.Helper()
	rec := &progressRecorder{token: token}
	b.c.OnNotification(rec.handle)
	if r := b.callWithProgress(code, token); r.IsError {
		b.t.Fatalf("run failed: %s", text(b.t, r))
	}
	got, _ := rec.snapshot()
	b.t.Logf("%s: %d progress notifications in a 3 s run", token, len(got))
	if len(got) < least || len(got) > 15 {
		b.t.Errorf("%s: %d progress notifications in 3 s, want %d..15 (at most ~3 a second)", token, len(got), least)
	}
	for i, p := range got {
		if i > 0 && p.Progress <= got[i-1].Progress {
			b.t.Errorf("%s: progress %v after %v: not increasing", token, p.Progress, got[i-1].Progress)
		}
	}
	return got
}

// callWithProgress runs code with _meta.progressToken = token.
func (b *bridge) callWithProgress(code, token string) *mcp.CallToolResult {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_python"
	req.Params.Arguments = map[string]any{"code": code, "timeout": 30}
	if token != "" {
		req.Params.Meta = &mcp.Meta{ProgressToken: token}
	}
	res, err := b.c.CallTool(ctx, req)
	if err != nil {
		b.t.Fatalf("tools/call: %v", err)
	}
	return res
}

// TestProgressNotifications checks MCP-6: with a progress token, a 3 s run
// that prints streams notifications/progress with increasing progress and
// the newest lines, at most a few per second; a print flood stays within
// the same rate and still shows its newest lines; without a token nothing
// is sent.
func TestProgressNotifications(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, nil)
	// The harness started the transport itself; Client.Start (idempotent for
	// the transport) installs the client's notification dispatch.
	if err := b.c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := b.progressRun("tok-1", 4, "import time\nfor i in range(30):\n    print('step', i)\n    time.sleep(0.1)")
	for _, p := range got {
		if !strings.HasPrefix(p.Message, "step ") || strings.Count(p.Message, "\n") > 4 {
			t.Errorf("message %q: want at most 5 newest 'step' lines", p.Message)
		}
	}
	// A print flood past the streamed head: bounded rate, newest lines shown.
	// At least 5: the writer sends the sandbox's previews itself (a flood
	// used to starve the flusher thread down to 1-4 notifications).
	flood := b.progressRun("tok-flood", 5, "import time\nend = time.time() + 3\ni = 0\nwhile time.time() < end:\n    print('flood', i)\n    i += 1\nprint('last', i)")
	// The flood's newest lines move on (the streamed head ends after ~16 KiB).
	if n := len(flood); n >= 2 && flood[n-1].Message == flood[0].Message {
		t.Errorf("flood messages did not move past the head: %q", flood[n-1].Message)
	}

	// Without a token: nothing.
	rec := &progressRecorder{token: "none", ignore: map[any]bool{"tok-1": true, "tok-flood": true}}
	b.c.OnNotification(rec.handle)
	b.expectText("import time\nfor i in range(10):\n    print(i)\n    time.sleep(0.1)", "0\n1\n2\n3\n4\n5\n6\n7\n8\n9", false)
	if _, other := rec.snapshot(); other != 0 {
		t.Errorf("%d progress notifications sent without a progress token", other)
	}
}

// TestMounts checks MCP_BRIDGE_MOUNTS: a read-only mount refuses writes, a
// rw mount round-trips files to the host, and both are listed by the
// capability summary and the capabilities resource.
func TestMounts(t *testing.T) {
	requirePodman(t)
	ro, rw := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(ro, "in.txt"), []byte("from host"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Rootful podman: the container user 65534 is the host's nobody, so the
	// rw folder must be writable by it (docs/SECURITY.md). Rootless podman
	// maps the user's own uid instead (keep-id) and needs no chmod.
	if os.Geteuid() == 0 {
		for _, d := range []string{ro, rw} {
			if err := os.Chmod(d, 0o777); err != nil {
				t.Fatal(err)
			}
		}
	}
	b := startBridge(t, map[string]string{"MCP_BRIDGE_MOUNTS": ro + ":/data, " + rw + ":/mnt/out:rw"})
	b.expectText("print(open('/data/in.txt').read())", "from host", false)
	r := b.run("open('/data/new.txt', 'w')")
	if got := text(t, r); !r.IsError || !strings.Contains(got, "Read-only file system") {
		t.Errorf("write to the ro mount: isError %v, %s", r.IsError, got)
	}
	b.expectText("open('/mnt/out/result.csv', 'w').write('a,b\\n1,2\\n')\nprint(open('/mnt/out/result.csv').read(), end='')", "a,b\n1,2", false)
	data, err := os.ReadFile(filepath.Join(rw, "result.csv"))
	if err != nil || string(data) != "a,b\n1,2\n" {
		t.Fatalf("host sees %q, %v", data, err)
	}
	st, _ := os.Stat(filepath.Join(rw, "result.csv"))
	// Rootless: the user's own uid (keep-id). Rootful: the container user's
	// host uid, 65534 or the session's own mapped uid; never root.
	uid := st.Sys().(*syscall.Stat_t).Uid
	if euid := uint32(os.Geteuid()); (euid != 0 && uid != euid) || (euid == 0 && uid == 0) {
		t.Errorf("file written through the rw mount is owned by uid %d (bridge euid %d)", uid, euid)
	}
	// noexec, like the tmpfs mounts.
	r = b.run("import os, shutil, subprocess\nshutil.copy('/bin/true', '/mnt/out/t'); os.chmod('/mnt/out/t', 0o755)\nsubprocess.run(['/mnt/out/t'], check=True)")
	if got := text(t, r); !r.IsError || !strings.Contains(got, "Permission denied") {
		t.Errorf("exec from the rw mount: isError %v, %s", r.IsError, got)
	}
	manual := b.mustOK("print(runtime.capability_summary())")
	want := "Host folders mounted (MCP_BRIDGE_MOUNTS): `/data` (read-only), `/mnt/out` (read-write)."
	if !strings.Contains(manual, want) {
		t.Errorf("capability_summary lacks %q:\n%s", want, manual)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req := mcp.ReadResourceRequest{}
	req.Params.URI = "resource://mcp-server-code-execution-mode/capabilities"
	read, err := b.c.ReadResource(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := read.Contents[0].(mcp.TextResourceContents); !ok || !strings.Contains(tc.Text, want) {
		t.Errorf("capabilities resource lacks %q", want)
	}
}

// TestMountNotWritable: a read-write mount whose host folder the sandbox's
// user cannot write is named in a session's first result, and by doctor
// with the fix for this runtime (issue 35).
func TestMountNotWritable(t *testing.T) {
	requirePodman(t)
	rw := t.TempDir()
	if err := os.Chmod(rw, 0o555); err != nil { // nobody but root may write; the sandbox user is never root
		t.Fatal(err)
	}
	env := map[string]string{"MCP_BRIDGE_MOUNTS": rw + ":/mnt/out:rw"}
	b := startBridge(t, env)
	note := "note: the read-write mount /mnt/out cannot be written by the sandbox's user"
	if got := b.mustOK("x = 1"); !strings.Contains(got, note) {
		t.Errorf("first result lacks %q:\n%s", note, got)
	}
	if got := b.mustOK("x = 2"); strings.Contains(got, "read-write mount") {
		t.Errorf("second result repeats the mount note:\n%s", got)
	}
	out, errOut, code := runCLI(t, env, "", "doctor")
	want := "FAIL mounts: /mnt/out (rw) is " + rw + ", which the sandbox cannot write ("
	if code != 1 || !strings.Contains(out, want) || !strings.Contains(out, "chmod") {
		t.Errorf("doctor: exit %d, want 1 and a line %q with its fix:\n%s%s", code, want, out, errOut)
	}
}

// TestInvalidMounts checks that every invalid MCP_BRIDGE_MOUNTS entry stops
// the bridge at startup with exit 2 and one line naming the problem.
func TestInvalidMounts(t *testing.T) {
	dir := t.TempDir()
	home := t.TempDir() // the state and config dirs of the bridge under test
	state := filepath.Join(home, "state")
	if err := os.MkdirAll(state, 0o755); err != nil {
		t.Fatal(err)
	}
	cases := []struct{ spec, want string }{
		{dir + "/missing:/data", "want an existing host path: " + dir + "/missing does not exist"},
		{"relative:/data", `want an absolute host path, not "relative"`},
		{dir + ":data", `want an absolute, clean container path, not "data"`},
		{dir + ":/data/../etc", `want an absolute, clean container path, not "/data/../etc"`},
		{dir + ":/", "want a container path under /data, /mnt, /media, /srv, /home or /workspace/<dir>, not /"},
		{dir + ":/proc", "not /proc"},
		{dir + ":/usr/lib/x", "not /usr/lib/x"},
		{dir + ":/etc", "not /etc"},
		{dir + ":/workspace", "not /workspace"},
		{dir + ":/workspace/.bridge", "not /workspace/.bridge"},
		{dir + ":/data:rx", `want mode ro or rw, not "rx"`},
		{dir + ":/data:ro:x", "want HOST:CONTAINER[:ro|rw] entries, comma-separated"},
		{dir, "want HOST:CONTAINER[:ro|rw] entries, comma-separated"},
		{dir + ":/data," + dir + ":/data", "want each container path once: /data is mounted twice"},
		{state + ":/data", "want a host path that neither is nor contains the bridge's state or config dir"},
		{home + ":/data", "want a host path that neither is nor contains the bridge's state or config dir"},
		{"/:/data", "want a host path that neither is nor contains the bridge's state or config dir"},
	}
	for _, c := range cases {
		env := map[string]string{"MCP_BRIDGE_MOUNTS": c.spec, "HOME": home, "MCP_BRIDGE_STATE_DIR": state, "MCP_BRIDGE_CONFIG_DIR": filepath.Join(home, "MCPs")}
		out, errOut, code := runCLI(t, env, "", "run")
		lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
		prefix := `bridge: invalid MCP_BRIDGE_MOUNTS=`
		if code != 2 || out != "" || len(lines) != 1 || !strings.HasPrefix(lines[0], prefix) || !strings.Contains(lines[0], c.want) {
			t.Errorf("MCP_BRIDGE_MOUNTS=%q: exit %d, stdout %q, stderr %q; want exit 2 and one line containing %q", c.spec, code, out, errOut, c.want)
		}
	}
}
