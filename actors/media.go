package actors

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/bridge-mcp/bridge/protocol"
	"github.com/bridge-mcp/bridge/protocol/printable"
	"github.com/bridge-mcp/bridge/protocol/result"
)

// Bounds of what the sandbox can make the host keep beside the output: the
// images of one call (limits.MaxImages of at most limits.MaxImageBytes
// each, checked again here: the sandbox is hostile), the newest-output
// preview, and the notes about images that were saved instead.
const (
	previewBytes   = 1024
	progressLines  = 5
	maxImageNotes  = 20
	maxNoteField   = 256
	progressEvery  = 300 * time.Millisecond
	heartbeatTicks = 10 // a notification at least every 3 s, even without output
	// upstreamEvery coalesces the progress of inner calls: at most one
	// notification per tick (10 a second), the newest message.
	upstreamEvery = 100 * time.Millisecond
	outputTicks   = int(progressEvery / upstreamEvery)
)

// imageMagic is the allow-list of image MIME types and their leading bytes
// ("" for SVG, which is text).
var imageMagic = map[string]string{
	"image/png":     "\x89PNG\r\n\x1a\n",
	"image/jpeg":    "\xff\xd8\xff",
	"image/gif":     "GIF8",
	"image/webp":    "RIFF",
	"image/svg+xml": "",
}

// media is the per-call state behind images and progress; activeCall.mu
// guards it.
type media struct {
	maxImages, maxBytes int
	images              []result.Image
	dropped             int    // image frames refused: over a cap or invalid
	latest              string // the newest output, at most previewBytes
	seq                 uint64 // bumped whenever latest changes
	up                  string // the newest inner call progress not yet sent; "" when none
	upKey               uint64 // the inner call up came from
	upSeq               uint64 // bumped whenever up is set
}

// upstream records the newest progress message of inner call key; the
// progress stream sends it on its next tick (upstreamSink).
func (a *activeCall) upstream(key uint64, msg string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.media.up, a.media.upKey = msg, key
	a.media.upSeq++
}

// began records inner call key, labelled "server.tool", as in flight.
func (a *activeCall) began(key uint64, label string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.inflight == nil {
		a.inflight = map[uint64]string{}
	}
	a.inflight[key] = label
}

// ended drops the pending progress of inner call key, which returned:
// nothing is reported for a call that ended. One that ran out at the
// call's deadline stays in flight (upstreamSink): its bound and the
// deadline pass together, and the call's wait may see the deadline after
// this inner call has already returned.
func (a *activeCall) ended(key uint64, ranOut bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.media.upKey == key {
		a.media.up = ""
	}
	if !ranOut {
		delete(a.inflight, key)
	}
}

// inFlight is the labels of the inner calls in flight, in the order they
// began.
func (a *activeCall) inFlight() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	keys := slices.Sorted(maps.Keys(a.inflight))
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = a.inflight[k]
	}
	return out
}

func newMedia(l protocol.Limits) media {
	return media{maxImages: l.MaxImages, maxBytes: l.MaxImageBytes}
}

// noteOutput keeps the newest output for progress messages; a.mu is held.
func (m *media) noteOutput(data string) {
	if data == "" {
		return
	}
	m.latest = lastBytes(m.latest+data, previewBytes)
	m.seq++
}

// lastBytes is the longest suffix of s of at most n bytes that starts on a
// UTF-8 boundary.
func lastBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[len(s)-n:]
	for i := 0; i < len(s) && i < 4; i++ {
		if s[i]&0xC0 != 0x80 {
			return s[i:]
		}
	}
	return s
}

// validImage checks an image frame against the caps and the allow-list.
// The base64 is decoded as a stream into nothing, so the check costs no
// copy of the image.
func validImage(p protocol.ImageParams, maxBytes int) error {
	magic, ok := imageMagic[p.MIMEType]
	if !ok {
		return fmt.Errorf("mimeType %q is not an image type the bridge attaches", p.MIMEType)
	}
	if len(p.Data) > base64.StdEncoding.EncodedLen(maxBytes) {
		return fmt.Errorf("%d base64 bytes, over the %d-byte image cap", len(p.Data), maxBytes)
	}
	n, err := io.Copy(io.Discard, base64.NewDecoder(base64.StdEncoding, strings.NewReader(p.Data)))
	if err != nil || n == 0 || n > int64(maxBytes) {
		return fmt.Errorf("invalid base64 image data")
	}
	head, _ := base64.StdEncoding.DecodeString(p.Data[:min(len(p.Data), 16)])
	if !bytes.HasPrefix(head, []byte(magic)) {
		return fmt.Errorf("data does not start like %s", p.MIMEType)
	}
	return nil
}

// handleMedia serves the image and progress notifications of the active
// call; frames of any other call are discarded.
func (s *sandbox) handleMedia(req *jsonrpc2.Request) {
	a := s.active.Load()
	switch req.Method {
	case protocol.MethodImage:
		var p protocol.ImageParams
		if req.Params == nil || json.Unmarshal(*req.Params, &p) != nil || a == nil || a.scope.Call != p.Call {
			s.dropped("image frame outside the active call or invalid", "")
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		m := &a.media
		err := validImage(p, m.maxBytes)
		if err == nil && len(m.images) >= m.maxImages {
			err = fmt.Errorf("over %d images", m.maxImages)
		}
		if err != nil {
			m.dropped++
			s.dropped("image frame refused", err.Error())
			return
		}
		m.images = append(m.images, result.Image{MIMEType: p.MIMEType, Data: p.Data})
	case protocol.MethodProgress:
		var p protocol.ProgressParams
		if req.Params == nil || json.Unmarshal(*req.Params, &p) != nil || a == nil || a.scope.Call != p.Call {
			s.dropped("progress frame outside the active call or invalid", "")
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		a.media.latest = lastBytes(p.Data, previewBytes)
		a.media.seq++
	}
}

// images returns the call's images and the notes about those saved instead
// (from the sandbox's exec reply, checked and capped) or refused.
func (a *activeCall) images(saved []protocol.SavedImage) ([]result.Image, []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	m := &a.media
	var notes []string
	if n := len(m.images); n > 0 {
		notes = append(notes, fmt.Sprintf("%d image%s attached", n, plural(n)))
	}
	for i, sv := range saved {
		if i == maxImageNotes {
			notes = append(notes, fmt.Sprintf("%d more images not attached", len(saved)-i))
			break
		}
		notes = append(notes, savedNote(sv, m.maxImages, m.maxBytes))
	}
	if m.dropped > 0 {
		notes = append(notes, fmt.Sprintf("%d invalid image frame%s dropped", m.dropped, plural(m.dropped)))
	}
	return append([]result.Image(nil), m.images...), notes
}

// savedNote says why an image was not attached and where it went. Only
// paths under /workspace/ are repeated; other fields are bounded.
func savedNote(sv protocol.SavedImage, maxImages, maxBytes int) string {
	var b strings.Builder
	if sv.Reason == protocol.SavedOverCount {
		fmt.Fprintf(&b, "image not attached: over MCP_BRIDGE_MAX_IMAGES=%d", maxImages)
	} else {
		fmt.Fprintf(&b, "image of %d bytes not attached: over MCP_BRIDGE_MAX_IMAGE_BYTES=%d", max(sv.Bytes, 0), maxBytes)
	}
	switch {
	case strings.HasPrefix(sv.Path, "/workspace/") && len(sv.Path) <= maxNoteField && !strings.ContainsAny(sv.Path, "\n\r"):
		b.WriteString("; saved to " + sv.Path)
	case sv.Error != "":
		b.WriteString("; not saved: " + oneLine(sv.Error))
	default:
		b.WriteString("; not saved")
	}
	return b.String()
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > maxNoteField {
		s = lastBytes(s[:maxNoteField], maxNoteField)
	}
	return s
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// ProgressFunc sends one progress notification of a running call: n counts
// from 1 (the monotonic progress value), message holds the newest output
// lines. It must not block.
type ProgressFunc func(n int, message string)

type progressKey struct{}

// WithProgress asks the call run under ctx to report progress to f.
func WithProgress(ctx context.Context, f ProgressFunc) context.Context {
	return context.WithValue(ctx, progressKey{}, f)
}

func progressFrom(ctx context.Context) ProgressFunc {
	if ctx == nil {
		return nil
	}
	f, _ := ctx.Value(progressKey{}).(ProgressFunc)
	return f
}

// streamProgress sends a progress notification whenever new output arrived
// in the last progressEvery (so at most ~3 a second), a heartbeat when the
// call has been quiet for heartbeatTicks such periods, and the newest
// progress of its inner calls at most every upstreamEvery. One counter
// numbers them all, so progress keeps increasing. stop ends the goroutine
// and waits for it; nothing is sent after stop returns.
func (a *activeCall) streamProgress(send ProgressFunc) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(upstreamEvery)
		defer t.Stop()
		var seen, seenUp uint64
		n, quiet, ticks := 0, 0, 0
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			ticks++
			a.mu.Lock()
			seq, latest, up, upSeq := a.media.seq, a.media.latest, a.media.up, a.media.upSeq
			a.mu.Unlock()
			if up == "" { // none, or its inner call ended
				seenUp = upSeq
			}
			// New output waits at most one tick behind inner call
			// progress: a server's stream cannot starve the output's.
			outputTick := ticks%outputTicks == 0
			if upSeq != seenUp && (!outputTick || seq == seen) {
				seenUp, quiet, n = upSeq, 0, n+1
				send(n, up)
				continue
			}
			if !outputTick {
				continue
			}
			if seq == seen {
				if quiet++; quiet < heartbeatTicks {
					continue
				}
			}
			quiet, seen = 0, seq
			n++
			send(n, progressMessage(latest))
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// progressMessage is the last progressLines lines of the newest output, or
// "running" before any output. Clients show it as it is, often on a
// terminal: controls and invalid UTF-8 are rendered as escapes
// (printable.String), as bridge exec renders output on a terminal.
func progressMessage(latest string) string {
	lines := strings.Split(strings.TrimRight(latest, "\n"), "\n")
	if len(lines) > progressLines {
		lines = lines[len(lines)-progressLines:]
	}
	msg := strings.Join(lines, "\n")
	if strings.TrimSpace(msg) == "" {
		return "running"
	}
	return printable.String(msg)
}
