package entrypoint

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestBoxAcksWhatItReads: with a link window in the boot frame the worker
// acknowledges the bytes it reads (counted from the first byte after the
// boot frame), cumulatively and within the window, before a frame larger
// than the window is complete: the host sends a frame in pieces, each
// after an ack, so acks must not wait for the line's end. Without a window
// it sends no ack at all.
func TestBoxAcksWhatItReads(t *testing.T) {
	const window = 64 << 10
	b := startBoxLimits(t, "stdio", map[string]any{"linkWindow": window})
	if m := b.next(10 * time.Second); m["method"] != "ready" {
		t.Fatalf("first frame %v, want ready", m)
	}
	line, _ := json.Marshal(execFrame(1, "x = '"+strings.Repeat("a", 300<<10)+"'\nprint(len(x))"))
	line = append(line, '\n')
	// Half the frame: more than a window, no line end yet.
	half := len(line) / 2
	if _, err := b.in.Write(line[:half]); err != nil {
		t.Fatal(err)
	}
	m := b.next(10 * time.Second)
	got := ackBytes(t, m)
	if got < window/4 || got > int64(half) {
		t.Fatalf("first ack %d after %d bytes of an unfinished frame; want between %d and %d", got, half, window/4, half)
	}
	if _, err := b.in.Write(line[half:]); err != nil {
		t.Fatal(err)
	}
	last, replied := got, false
	for {
		m := b.next(10 * time.Second)
		if m["method"] == "ack" {
			n := ackBytes(t, m)
			if n <= last || n > int64(len(line)) {
				t.Fatalf("ack %d after ack %d, %d bytes sent; want increasing, at most what was sent", n, last, len(line))
			}
			last = n
			continue
		}
		if m["method"] != nil && m["id"] != nil { // saved_tools
			reply, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": map[string]any{"tools": []any{}}})
			line = append(line, append(reply, '\n')...) // counted as sent
			if _, err := b.in.Write(reply); err != nil {
				t.Fatal(err)
			}
			if _, err := b.in.Write([]byte("\n")); err != nil {
				t.Fatal(err)
			}
		}
		if m["method"] == nil && m["id"] == float64(1) {
			replied = true
		}
		// The ack thread may write after the reply.
		if replied && int64(len(line))-last < window/4 {
			break
		}
	}

	// No window: no acks.
	b = startBox(t, "stdio")
	if m := b.next(10 * time.Second); m["method"] != "ready" {
		t.Fatalf("first frame %v, want ready", m)
	}
	b.send(execFrame(1, "x = '"+strings.Repeat("a", 300<<10)+"'\nprint(len(x))"))
	for {
		m := b.next(10 * time.Second)
		if m["method"] == "ack" {
			t.Fatalf("an ack without a link window: %v", m)
		}
		if m["method"] != nil && m["id"] != nil {
			b.send(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": map[string]any{"tools": []any{}}})
		}
		if m["method"] == nil && m["id"] == float64(1) {
			break
		}
	}
}

func ackBytes(t *testing.T, m map[string]any) int64 {
	t.Helper()
	if m["method"] != "ack" {
		t.Fatalf("frame %v, want an ack", m)
	}
	p, _ := m["params"].(map[string]any)
	n, ok := p["bytes"].(float64)
	if !ok {
		t.Fatalf("ack without bytes: %v", m)
	}
	return int64(n)
}
