package mcpwire

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"
)

// discard is a pipe end that takes every write.
type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
func (discard) Close() error                { return nil }

// FuzzReader feeds a server's stdout to the reader and the router of its
// frames (without the reader's recover, so a panic fails the fuzzer). It
// holds: no kept line exceeds the cap; an id the scan reads always keys a
// request; a reply that passes the checks converts; and on a frame
// encoding/json decodes with a single "id" member, the scan reads that id.
func FuzzReader(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{}}` + "\n",
		`{"jsonrpc":"2.0","id":"bridge-1","error":{"code":-32022,"message":"x","data":{"supported":["2026-07-28"]}}}` + "\n",
		`{"result":{"a":[` + strings.Repeat("[", 40) + `]},"id":"x"}`,
		`{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info"}}` + "\n" + `{"jsonrpc":"2.0","id":7,"method":"ping"}` + "\n",
		"{\"id\":1,\"result\":{\"t\":\"\xff\"}}\n",
		`{"id":1,"error":{"code":"1","message":null}}` + "\n\n\r\n",
	} {
		f.Add([]byte(s))
	}
	const maxFrame = 512
	f.Fuzz(func(t *testing.T, data []byte) {
		tr := New(io.NopCloser(bytes.NewReader(nil)), discard{}, Options{Server: "f", MaxFrame: maxFrame, Log: zerolog.Nop()})
		tr.SetNotificationHandler(func(mcp.JSONRPCNotification) {})
		defer tr.Close()
		fr := newFrameReader(bytes.NewReader(data), maxFrame)
		for {
			frm, err := fr.next(func(s *scan) {
				if _, ok := idKey(s.id); !ok {
					t.Fatalf("over-cap frame named id %q, which keys nothing", s.id)
				}
			})
			if err != nil {
				return
			}
			if len(frm.line) > maxFrame {
				t.Fatalf("kept a line of %d bytes, cap %d", len(frm.line), maxFrame)
			}
			if frm.line == nil {
				continue
			}
			if id := frm.scan.id; id != nil {
				if _, ok := idKey(id); !ok {
					t.Fatalf("scan read id %q, which keys nothing", id)
				}
			}
			m := decode(frm)
			if m.kind == reply && m.why == "" {
				if _, err := m.response(); err != nil {
					t.Fatalf("a checked reply did not convert: %v", err)
				}
			}
			var env envelope
			if json.Unmarshal(frm.line, &env) == nil && bytes.Count(frm.line, []byte(`"id"`)) == 1 && !bytes.Contains(frm.line, []byte(`\`)) {
				if _, ok := idKey(env.ID); ok && !bytes.Equal(bytes.TrimSpace(env.ID), frm.scan.id) {
					t.Fatalf("scan read id %q, the decoder %q, in %q", frm.scan.id, env.ID, frm.line)
				}
			}
			tr.handle(frm)
		}
	})
}
