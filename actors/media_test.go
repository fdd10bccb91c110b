package actors

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/bridge-mcp/bridge/protocol"
	"github.com/bridge-mcp/bridge/protocol/result"
)

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// TestValidImage checks the host's checks of an image frame.
func TestValidImage(t *testing.T) {
	png := "\x89PNG\r\n\x1a\n" + strings.Repeat("x", 100)
	cases := []struct {
		name    string
		p       protocol.ImageParams
		wantErr string
	}{
		{"png", protocol.ImageParams{MIMEType: "image/png", Data: b64(png)}, ""},
		{"jpeg", protocol.ImageParams{MIMEType: "image/jpeg", Data: b64("\xff\xd8\xff\xe0rest")}, ""},
		{"svg", protocol.ImageParams{MIMEType: "image/svg+xml", Data: b64("<svg/>")}, ""},
		{"mime", protocol.ImageParams{MIMEType: "text/html", Data: b64(png)}, "not an image type"},
		{"base64", protocol.ImageParams{MIMEType: "image/png", Data: "!!!!"}, "invalid base64"},
		{"empty", protocol.ImageParams{MIMEType: "image/png", Data: ""}, "invalid base64"},
		{"magic", protocol.ImageParams{MIMEType: "image/jpeg", Data: b64(png)}, "does not start like image/jpeg"},
		{"over cap", protocol.ImageParams{MIMEType: "image/png", Data: b64(png + strings.Repeat("y", 200))}, "over the 200-byte image cap"},
	}
	for _, c := range cases {
		err := validImage(c.p, 200)
		if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
			t.Errorf("%s: got %v, want %q", c.name, err, c.wantErr)
		}
	}
}

func frame(t *testing.T, method string, params any) *jsonrpc2.Request {
	raw, err := json.Marshal(params)
	if err != nil {
		t.Fatal(err)
	}
	msg := json.RawMessage(raw)
	return &jsonrpc2.Request{Method: method, Params: &msg, Notif: true}
}

// TestHandleMedia checks that image frames are kept only for the active
// call and within the count cap, that refused frames are counted in the
// notes, and that saved-image records become bounded notes.
func TestHandleMedia(t *testing.T) {
	s := &sandbox{log: zerolog.Nop()}
	a := &activeCall{scope: Scope{Call: 7}, media: newMedia(protocol.Limits{MaxImages: 2, MaxImageBytes: 1000})}
	s.active.Store(a)
	png := b64("\x89PNG\r\n\x1a\nabc")
	for _, p := range []protocol.ImageParams{
		{Call: 7, MIMEType: "image/png", Data: png},
		{Call: 8, MIMEType: "image/png", Data: png}, // another call: ignored, not counted
		{Call: 7, MIMEType: "image/gif", Data: png}, // refused
		{Call: 7, MIMEType: "image/png", Data: png},
		{Call: 7, MIMEType: "image/png", Data: png}, // over the count
	} {
		s.handleMedia(frame(t, protocol.MethodImage, p))
	}
	s.handleMedia(frame(t, protocol.MethodProgress, protocol.ProgressParams{Call: 7, Data: strings.Repeat("z", 5000) + "\nnewest"}))
	saved := []protocol.SavedImage{
		{Path: "/workspace/.bridge/image-1-5.png", Bytes: 5000, Reason: protocol.SavedOverBytes},
		{Path: "/etc/passwd", Bytes: 1, Reason: protocol.SavedOverCount},
		{Error: "disk\nfull", Bytes: 1, Reason: protocol.SavedOverCount},
	}
	imgs, notes := a.images(saved)
	if len(imgs) != 2 {
		t.Errorf("%d images kept, want 2", len(imgs))
	}
	want := []string{
		"2 images attached",
		"image of 5000 bytes not attached: over MCP_BRIDGE_MAX_IMAGE_BYTES=1000; saved to /workspace/.bridge/image-1-5.png",
		"image not attached: over MCP_BRIDGE_MAX_IMAGES=2; not saved",
		"image not attached: over MCP_BRIDGE_MAX_IMAGES=2; not saved: disk full",
		"2 invalid image frames dropped",
	}
	if strings.Join(notes, "\n") != strings.Join(want, "\n") {
		t.Errorf("notes:\n%s\nwant:\n%s", strings.Join(notes, "\n"), strings.Join(want, "\n"))
	}
	if got := len(a.media.latest); got != previewBytes || !strings.HasSuffix(a.media.latest, "\nnewest") {
		t.Errorf("preview is %d bytes ending %q, want %d ending in the newest line", got, a.media.latest[max(0, got-10):], previewBytes)
	}
	many := make([]protocol.SavedImage, 50)
	if _, notes := a.images(many); len(notes) != 1+maxImageNotes+1+1 {
		t.Errorf("%d notes for 50 saved images, want %d", len(notes), maxImageNotes+3)
	}
}

// TestStreamProgress checks the progress streamer: a notification when new
// output arrived, counting up, the newest lines only, and nothing after stop.
func TestStreamProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := &activeCall{limit: 1 << 20}
		var mu sync.Mutex
		var got []string
		var ns []int
		stop := a.streamProgress(func(n int, msg string) {
			mu.Lock()
			defer mu.Unlock()
			ns = append(ns, n)
			got = append(got, msg)
		})
		a.add(result.StreamStdout, "1\n2\n3\n4\n5\n6\n7\n")
		time.Sleep(progressEvery)
		synctest.Wait() // the first tick is handled
		stop()
		mu.Lock()
		defer mu.Unlock()
		if len(got) != 1 || got[0] != "3\n4\n5\n6\n7" || ns[0] != 1 {
			t.Errorf("notifications %v %q at the first tick, want one: [1] \"3\\n4\\n5\\n6\\n7\"", ns, got)
		}
		if progressFrom(context.Background()) != nil {
			t.Errorf("progressFrom without WithProgress is not nil")
		}
	})
}

// TestProgressMessage checks the message of a progress notification: the
// newest lines, with nothing a client's terminal would act on.
func TestProgressMessage(t *testing.T) {
	for _, tc := range []struct{ name, latest, want string }{
		{"before output", "", "running"},
		{"blank output", " \n\n", "running"},
		{"last five lines", "1\n2\n3\n4\n5\n6\n", "2\n3\n4\n5\n6"},
		{"escape sequences rendered", "ok\n\x1b]52;c;cHduZWQ=\x07\x1b[2Jdone\n", "ok\n" + `\x1b]52;c;cHduZWQ=\x07\x1b[2Jdone`},
		{"C1 and invalid UTF-8 rendered", "\u009b31m\xff", `\u009b31m\xff`},
	} {
		if got := progressMessage(tc.latest); got != tc.want {
			t.Errorf("%s: progressMessage(%q)\n got %q\nwant %q", tc.name, tc.latest, got, tc.want)
		}
	}
}

// TestLastBytes checks that the preview never starts inside a UTF-8 sequence.
func TestLastBytes(t *testing.T) {
	if got := lastBytes("aé€", 3); got != "€" {
		t.Errorf("got %q, want %q", got, "€")
	}
	if got := lastBytes("abc", 5); got != "abc" {
		t.Errorf("got %q", got)
	}
}
