package protocol

// stream_test.go is over 500 lines on purpose: every way a hostile peer can
// misuse the line stream (oversized, junk, stalled, concurrent) is a case.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/sourcegraph/jsonrpc2"
)

// closers closes each of its members, returning the first error.
type closers []io.Closer

func (cs closers) Close() error {
	var first error
	for _, c := range cs {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// syncBuffer is a bytes.Buffer safe for a logger writing from another goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// handlerFunc is a synchronous jsonrpc2.Handler.
type handlerFunc func(ctx context.Context, c *jsonrpc2.Conn, r *jsonrpc2.Request)

func (f handlerFunc) Handle(ctx context.Context, c *jsonrpc2.Conn, r *jsonrpc2.Request) { f(ctx, c, r) }

var quiet = jsonrpc2.SetLogger(log.New(io.Discard, "", 0))

// echo replies to every request with its params.
var echo = jsonrpc2.AsyncHandler(handlerFunc(func(ctx context.Context, c *jsonrpc2.Conn, r *jsonrpc2.Request) {
	if r.Notif {
		return
	}
	var params json.RawMessage
	if r.Params != nil {
		params = *r.Params
	}
	_ = c.Reply(ctx, r.ID, params)
}))

// link is a pair of jsonrpc2 connections over LineStreams on io.Pipe pairs.
type link struct {
	client, server *jsonrpc2.Conn
}

// newLink connects a client (frame cap clientMax) to a server (frame cap
// serverMax, handler h, logging to serverLog) and closes both at cleanup.
func newLink(t *testing.T, clientMax, serverMax int, h jsonrpc2.Handler, serverLog io.Writer) *link {
	t.Helper()
	toServerR, toServerW := io.Pipe()
	toClientR, toClientW := io.Pipe()
	cs := NewLineStream(toClientR, toServerW, closers{toServerW, toClientR}, clientMax, zerolog.Nop())
	ss := NewLineStream(toServerR, toClientW, closers{toClientW, toServerR}, serverMax, zerolog.New(serverLog))
	ctx := context.Background()
	l := &link{
		server: jsonrpc2.NewConn(ctx, ss, h, quiet),
		client: jsonrpc2.NewConn(ctx, cs, handlerFunc(func(context.Context, *jsonrpc2.Conn, *jsonrpc2.Request) {}), quiet),
	}
	t.Cleanup(func() {
		_ = l.client.Close()
		_ = l.server.Close()
		<-l.client.DisconnectNotify()
		<-l.server.DisconnectNotify()
	})
	return l
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// TestLineStreamRoundTrip checks that requests and replies of every size,
// including single lines of 1 MB and 10 MB (far above bufio.Scanner's
// 64 KiB), cross a jsonrpc2 link intact in both directions.
func TestLineStreamRoundTrip(t *testing.T) {
	const maxFrame = 16 << 20
	l := newLink(t, maxFrame, maxFrame, echo, io.Discard)
	tests := []struct {
		name  string
		value string
	}{
		{"empty", ""},
		{"small", "hello"},
		{"unicode and escapes", "héllo 世界 \U0001F600 \"quoted\" \\ back\tslash"},
		{"embedded newlines", "line1\nline2\r\nline3\n"},
		{"html chars", "<a href='x'>&amp;</a>"},
		{"64 KiB boundary", strings.Repeat("b", 64<<10)},
		{"1 MB single line", strings.Repeat("m", 1_000_000)},
		{"10 MB single line", strings.Repeat("t", 10_000_000)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Each 10 MB pass through encoding/json takes tens of ms,
			// and the round trip makes about ten; under -race on a loaded
			// 2-core machine that took 34 s. The deadline is for a hang.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var got struct{ S string }
			if err := l.client.Call(ctx, "echo", struct{ S string }{tt.value}, &got); err != nil {
				t.Fatalf("Call: %v", err)
			}
			if got.S != tt.value {
				t.Errorf("echo of %d bytes returned %d bytes (differ)", len(tt.value), len(got.S))
			}
		})
	}
}

// TestLineStreamConcurrentCalls checks that concurrent calls through an
// AsyncHandler all get their own replies, whatever the reply order.
func TestLineStreamConcurrentCalls(t *testing.T) {
	l := newLink(t, 1<<20, 1<<20, echo, io.Discard)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for i := range 32 {
		wg.Go(func() {
			want := fmt.Sprintf("call-%d-%s", i, strings.Repeat("x", i*1000))
			var got string
			if err := l.client.Call(callCtx(t), "echo", want, &got); err != nil {
				errs <- err
				return
			}
			if got != want {
				errs <- fmt.Errorf("call %d got %.20q, want %.20q", i, got, want)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestLineStreamOversizedLineLinkStaysUp checks LNK-1: a line longer than
// the reader's maxFrame is discarded with a warning, and the next frame on
// the same link is still delivered.
func TestLineStreamOversizedLineLinkStaysUp(t *testing.T) {
	const serverMax = 1 << 20
	logs := &syncBuffer{}
	got := make(chan string, 4)
	h := jsonrpc2.AsyncHandler(handlerFunc(func(ctx context.Context, c *jsonrpc2.Conn, r *jsonrpc2.Request) {
		got <- r.Method
		if !r.Notif {
			_ = c.Reply(ctx, r.ID, "pong")
		}
	}))
	l := newLink(t, 4*serverMax, serverMax, h, logs)
	ctx := callCtx(t)
	// The client's own cap is higher, so it sends what the server refuses.
	if err := l.client.Notify(ctx, "too-big", strings.Repeat("z", serverMax)); err != nil {
		t.Fatalf("Notify: %v", err)
	}
	var reply string
	if err := l.client.Call(ctx, "ping", nil, &reply); err != nil {
		t.Fatalf("Call after the oversized frame: %v", err)
	}
	if reply != "pong" {
		t.Errorf("reply %q, want pong", reply)
	}
	if m := <-got; m != "ping" {
		t.Errorf("server received %q first, want ping (too-big discarded)", m)
	}
	if s := logs.String(); !strings.Contains(s, `"level":"warn"`) || !strings.Contains(s, "discarded a frame over MCP_BRIDGE_MAX_FRAME_BYTES") {
		t.Errorf("no warning for the discarded frame; log: %s", s)
	}
}

// TestLineStreamSkipsJunkOverJSONRPC checks through a jsonrpc2 server that
// blank lines, non-JSON text, JSON that is not JSON-RPC, JSON-RPC objects
// that are neither request nor response, and lines over the cap are skipped
// without ending the link, and that valid frames around them arrive in order.
func TestLineStreamSkipsJunkOverJSONRPC(t *testing.T) {
	const maxFrame = 256
	got := make(chan string, 16)
	h := handlerFunc(func(_ context.Context, _ *jsonrpc2.Conn, r *jsonrpc2.Request) { got <- r.Method })
	r, w := io.Pipe()
	ss := NewLineStream(r, io.Discard, closers{r}, maxFrame, zerolog.Nop())
	server := jsonrpc2.NewConn(context.Background(), ss, h, quiet)
	defer func() {
		_ = server.Close()
		<-server.DisconnectNotify()
	}()
	input := strings.Join([]string{
		`{"jsonrpc":"2.0","method":"first"}`,
		``,
		`   `,
		"\t\r",
		`Traceback (most recent call last):`,
		`hello world`,
		`{not json`,
		`{"jsonrpc":"2.0","method":`,
		`{"a":1}`,
		`[{"jsonrpc":"2.0","method":"batch"}]`,
		`"jsonrpc"`,
		`42`,
		`null`,
		`{"jsonrpc":"2.0","id":1}`,
		`{"jsonrpc":"2.0","id":2,"method":"both","result":1}`,
		`{"jsonrpc":"2.0","method":"trailing"} garbage`,
		`{"jsonrpc":"2.0","method":"huge","params":"` + strings.Repeat("h", maxFrame) + `"}`,
		`  {"jsonrpc":"2.0","method":"padded"}  ` + "\r",
		`{"jsonrpc":"2.0","method":"last"}`,
	}, "\n") + "\n"
	go func() {
		_, _ = io.WriteString(w, input)
	}()
	want := []string{"first", "padded", "last"}
	var methods []string
	for len(methods) < len(want) {
		select {
		case m := <-got:
			methods = append(methods, m)
		case <-time.After(10 * time.Second):
			t.Fatalf("got methods %q, then nothing; want %q", methods, want)
		}
	}
	if !slices.Equal(methods, want) {
		t.Errorf("got methods %q, want %q", methods, want)
	}
	select {
	case <-server.DisconnectNotify():
		t.Errorf("junk ended the link")
	default:
	}
	_ = w.Close()
	select {
	case <-server.DisconnectNotify():
	case <-time.After(10 * time.Second):
		t.Errorf("EOF did not end the link")
	}
}

// readAll calls ReadObject until it fails, returning the frames (as raw
// JSON) and the final error.
func readAll(t *testing.T, s *LineStream, maxReads int) ([]string, error) {
	t.Helper()
	var frames []string
	for range maxReads {
		var raw json.RawMessage
		if err := s.ReadObject(&raw); err != nil {
			return frames, err
		}
		frames = append(frames, string(raw))
	}
	t.Fatalf("ReadObject returned %d frames without an error: %q", maxReads, frames)
	return nil, nil
}

// frameOfLen returns a JSON-RPC notification of exactly n bytes (n >= 29).
func frameOfLen(n int) string {
	const prefix, suffix = `{"jsonrpc":"2.0","method":"`, `"}`
	return prefix + strings.Repeat("p", n-len(prefix)-len(suffix)) + suffix
}

// TestLineStreamReadObject checks ReadObject on fixed inputs with a 64-byte
// cap: the frames it returns (trimmed lines), in order, then io.EOF.
func TestLineStreamReadObject(t *testing.T) {
	const maxFrame = 64
	a := `{"jsonrpc":"2.0","method":"a"}`
	b := `{"jsonrpc":"2.0","method":"b"}`
	exact, over := frameOfLen(maxFrame), frameOfLen(maxFrame+1)
	if len(exact) != maxFrame || len(over) != maxFrame+1 {
		t.Fatalf("frameOfLen: lengths %d and %d", len(exact), len(over))
	}
	tests := []struct {
		name  string
		input string
		want  []string
	}{
		{"empty input", "", nil},
		{"one frame", a + "\n", []string{a}},
		{"two frames", a + "\n" + b + "\n", []string{a, b}},
		{"final line without newline", a + "\n" + b, []string{a, b}},
		{"only a final line without newline", a, []string{a}},
		{"blank lines", "\n\n \n\t\n" + a + "\n\n", []string{a}},
		{"crlf", a + "\r\n" + b + "\r\n", []string{a, b}},
		{"surrounding spaces trimmed", "  " + a + "\t\n", []string{a}},
		{"non-JSON lines skipped", "hello\nTraceback:\n" + a + "\nbye\n", []string{a}},
		{"JSON that is not JSON-RPC skipped", `{"a":1}` + "\n[1,2]\n42\n\"jsonrpc\"\n" + a + "\n", []string{a}},
		{"broken JSON with a jsonrpc key skipped", `{"jsonrpc":"2.0",` + "\n" + a + "\n", []string{a}},
		{"trailing garbage skipped", a + " x\n" + b + "\n", []string{b}},
		{"lone brace skipped", "{\n" + a + "\n", []string{a}},
		{"line of exactly maxFrame kept", exact + "\n" + a + "\n", []string{exact, a}},
		{"line of maxFrame+1 discarded", over + "\n" + a + "\n", []string{a}},
		{"final line of exactly maxFrame kept", exact, []string{exact}},
		{"long final line without newline discarded", strings.Repeat("x", 10*maxFrame), nil},
		{"long line then frame", strings.Repeat("y", 200_000) + "\n" + a, []string{a}},
		{"oversized JSON-RPC then frame", `{"jsonrpc":"2.0","method":"` + strings.Repeat("q", 100_000) + `"}` + "\n" + b + "\n", []string{b}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewLineStream(strings.NewReader(tt.input), io.Discard, nil, maxFrame, zerolog.Nop())
			got, err := readAll(t, s, 100)
			if !errors.Is(err, io.EOF) {
				t.Errorf("final error %v, want io.EOF", err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("frames\n got %q\nwant %q", got, tt.want)
			}
			var raw json.RawMessage
			if err := s.ReadObject(&raw); !errors.Is(err, io.EOF) {
				t.Errorf("ReadObject after EOF: %v, want io.EOF", err)
			}
		})
	}
}

// errReader returns data, then err.
type errReader struct {
	data []byte
	err  error
}

func (r *errReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

// TestLineStreamReadError checks that a read error other than EOF is
// returned as is, and that a partial line before it is not delivered.
func TestLineStreamReadError(t *testing.T) {
	boom := errors.New("boom")
	a := `{"jsonrpc":"2.0","method":"a"}`
	s := NewLineStream(&errReader{data: []byte(a + "\n" + a), err: boom}, io.Discard, nil, 1024, zerolog.Nop())
	got, err := readAll(t, s, 10)
	if !errors.Is(err, boom) {
		t.Errorf("error %v, want boom", err)
	}
	if want := []string{a}; !slices.Equal(got, want) {
		t.Errorf("frames %q, want %q", got, want)
	}
}

// TestLineStreamSkipLogs checks that a skipped line is logged at debug level
// with its first 200 bytes only.
func TestLineStreamSkipLogs(t *testing.T) {
	logs := &syncBuffer{}
	noise := strings.Repeat("n", 1000)
	s := NewLineStream(strings.NewReader(noise+"\n"), io.Discard, nil, 4096, zerolog.New(logs))
	var raw json.RawMessage
	if err := s.ReadObject(&raw); !errors.Is(err, io.EOF) {
		t.Fatalf("ReadObject: %v, want io.EOF", err)
	}
	var entry struct {
		Level string `json:"level"`
		Line  string `json:"line"`
	}
	if err := json.Unmarshal([]byte(logs.String()), &entry); err != nil {
		t.Fatalf("log %q: %v", logs.String(), err)
	}
	if got, want := entry, (struct {
		Level string `json:"level"`
		Line  string `json:"line"`
	}{"debug", noise[:200]}); got != want {
		t.Errorf("log entry %+v, want %+v", got, want)
	}
}

// TestLineStreamOnSkip checks that with OnSkip every skipped or discarded
// line is reported to it, with a bounded detail, and nothing is logged.
func TestLineStreamOnSkip(t *testing.T) {
	logs := &syncBuffer{}
	noise := strings.Repeat("n", 1000)
	over := `{"jsonrpc":"2.0","method":"` + strings.Repeat("o", 5000) + `"}`
	in := noise + "\n" + `{"jsonrpc":"2.0",` + noise + "\n" + over + "\n" + `{"jsonrpc":"2.0","method":"m"}` + "\n"
	s := NewLineStream(strings.NewReader(in), io.Discard, nil, 4096, zerolog.New(logs))
	type skip struct{ reason, detail string }
	var got []skip
	s.OnSkip(func(reason, detail string) { got = append(got, skip{reason, detail}) })
	var raw json.RawMessage
	if err := s.ReadObject(&raw); err != nil || string(raw) != `{"jsonrpc":"2.0","method":"m"}` {
		t.Fatalf("ReadObject: %s, %v; want the last frame", raw, err)
	}
	want := []skip{
		{"line that is not a JSON-RPC frame", noise[:200]},
		{"invalid JSON-RPC frame", (`{"jsonrpc":"2.0",` + noise)[:200]},
		{"frame over MCP_BRIDGE_MAX_FRAME_BYTES", fmt.Sprintf("%d bytes, limit 4096", len(over)+1)},
	}
	if !slices.Equal(got, want) {
		t.Errorf("skips %q\nwant %q", got, want)
	}
	if logs.String() != "" {
		t.Errorf("logged with OnSkip set: %s", logs.String())
	}
}

// TestLineStreamDataFrames: a data frame's bytes are taken as they are,
// newlines and JSON-looking text included, and the frames after it are
// read; a header whose count is missing, negative, over the cap or not a
// number is skipped alone, named by OnSkip; a frame cut off by the end of
// the link is EOF.
func TestLineStreamDataFrames(t *testing.T) {
	payload := "line one\n{\"jsonrpc\":\"2.0\",\"method\":\"forged\"}\n\x00\xff"
	in := string(DataHeader([]byte("#W u1 0"), len(payload))) + payload +
		"#W u1 x\n#W u1 -1\n#W u1 99999\n#W\n" +
		`{"jsonrpc":"2.0","method":"m"}` + "\n" + "#R 0 10\nshort"
	s := NewLineStream(strings.NewReader(in), io.Discard, nil, 4096, zerolog.Nop())
	type frame struct{ head, payload string }
	var frames []frame
	s.OnData(func(head, payload []byte) { frames = append(frames, frame{string(head), string(payload)}) })
	var skips []string
	s.OnSkip(func(reason, detail string) { skips = append(skips, reason+": "+detail) })
	var raw json.RawMessage
	if err := s.ReadObject(&raw); err != nil || string(raw) != `{"jsonrpc":"2.0","method":"m"}` {
		t.Fatalf("ReadObject: %s, %v; want the frame after the data", raw, err)
	}
	if got, want := frames, []frame{{"#W u1 0", payload}}; !slices.Equal(got, want) {
		t.Errorf("data frames %q, want %q", got, want)
	}
	want := []string{"invalid data frame header: #W u1 x", "invalid data frame header: #W u1 -1",
		"invalid data frame header: #W u1 99999", "invalid data frame header: #W"}
	if !slices.Equal(skips, want) {
		t.Errorf("skips %q, want %q", skips, want)
	}
	if err := s.ReadObject(&raw); !errors.Is(err, io.EOF) {
		t.Errorf("a data frame cut off: %v, want EOF", err)
	}
}

// TestLineStreamWriteObject checks that WriteObject writes one compact line
// per object, accepts an encoding of exactly maxFrame bytes, refuses a
// larger one with an error wrapping ErrFrameTooLarge without writing
// anything, stays usable afterwards, and reports marshal errors.
func TestLineStreamWriteObject(t *testing.T) {
	const maxFrame = 100
	tests := []struct {
		name    string
		obj     any
		want    string // the bytes written
		tooBig  bool
		wantErr bool
	}{
		{"object", map[string]any{"jsonrpc": "2.0", "method": "m"}, `{"jsonrpc":"2.0","method":"m"}` + "\n", false, false},
		{"raw message with newlines is compacted", json.RawMessage("{\n  \"a\": [1,\n 2]\n}"), `{"a":[1,2]}` + "\n", false, false},
		{"string with newline escaped", "a\nb", `"a\nb"` + "\n", false, false},
		{"exactly maxFrame", strings.Repeat("x", maxFrame-2), `"` + strings.Repeat("x", maxFrame-2) + `"` + "\n", false, false},
		{"maxFrame+1", strings.Repeat("x", maxFrame-1), "", true, true},
		{"far over", strings.Repeat("x", 10*maxFrame), "", true, true},
		{"marshal error", make(chan int), "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			s := NewLineStream(strings.NewReader(""), &buf, nil, maxFrame, zerolog.Nop())
			err := s.WriteObject(tt.obj)
			if (err != nil) != tt.wantErr {
				t.Fatalf("WriteObject error %v, want error %v", err, tt.wantErr)
			}
			if got := errors.Is(err, ErrFrameTooLarge); got != tt.tooBig {
				t.Errorf("errors.Is(%v, ErrFrameTooLarge) = %v, want %v", err, got, tt.tooBig)
			}
			if got := buf.String(); got != tt.want {
				t.Errorf("wrote %q, want %q", got, tt.want)
			}
			// The stream stays usable.
			buf.Reset()
			if err := s.WriteObject(1); err != nil || buf.String() != "1\n" {
				t.Errorf("next WriteObject: %v, wrote %q, want 1\\n", err, buf.String())
			}
		})
	}
}

// TestLineStreamCallTooLarge checks that a jsonrpc2 call whose request is
// over the sender's cap fails with ErrFrameTooLarge and the link stays up.
func TestLineStreamCallTooLarge(t *testing.T) {
	l := newLink(t, 1<<20, 1<<20, echo, io.Discard)
	ctx := callCtx(t)
	var got string
	err := l.client.Call(ctx, "echo", strings.Repeat("b", 1<<20), &got)
	if !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("Call error %v, want ErrFrameTooLarge", err)
	}
	if err := l.client.Call(ctx, "echo", "small", &got); err != nil || got != "small" {
		t.Errorf("next Call: %q, %v; want small, nil", got, err)
	}
}

// TestLineStreamConcurrentWrites checks that concurrent WriteObject calls
// never interleave: every written line is one whole object.
func TestLineStreamConcurrentWrites(t *testing.T) {
	var buf bytes.Buffer
	s := NewLineStream(strings.NewReader(""), &buf, nil, 1<<20, zerolog.Nop())
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				_ = s.WriteObject(map[string]any{"g": g, "i": i, "pad": strings.Repeat("p", 5000)})
			}
		})
	}
	wg.Wait()
	sc := bufio.NewScanner(&buf)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		var v struct{ G, I int }
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("line %d is not one object: %v", n, err)
		}
		n++
	}
	if n != 8*50 {
		t.Errorf("got %d lines, want %d", n, 8*50)
	}
}

// countCloser counts Close calls and returns err from each.
type countCloser struct {
	n   int
	err error
}

func (c *countCloser) Close() error { c.n++; return c.err }

// TestLineStreamClose checks that Close closes the closer exactly once
// (later calls return nil), that a nil closer is fine, and that WriteObject
// after Close fails with io.ErrClosedPipe and writes nothing.
func TestLineStreamClose(t *testing.T) {
	failing := errors.New("close failed")
	tests := []struct {
		name      string
		closer    *countCloser
		wantFirst error
	}{
		{"nil closer", nil, nil},
		{"closer", &countCloser{}, nil},
		{"failing closer", &countCloser{err: failing}, failing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			var c io.Closer
			if tt.closer != nil {
				c = tt.closer
			}
			s := NewLineStream(strings.NewReader(""), &buf, c, 1024, zerolog.Nop())
			if got := s.Close(); !errors.Is(got, tt.wantFirst) || (tt.wantFirst == nil && got != nil) {
				t.Errorf("first Close = %v, want %v", got, tt.wantFirst)
			}
			for range 2 {
				if got := s.Close(); got != nil {
					t.Errorf("repeated Close = %v, want nil", got)
				}
			}
			if tt.closer != nil && tt.closer.n != 1 {
				t.Errorf("closer closed %d times, want 1", tt.closer.n)
			}
			if err := s.WriteObject(1); !errors.Is(err, io.ErrClosedPipe) {
				t.Errorf("WriteObject after Close = %v, want io.ErrClosedPipe", err)
			}
			if buf.Len() != 0 {
				t.Errorf("wrote %q after Close", buf.String())
			}
		})
	}
}

// TestLineStreamCloseConcurrent checks Close racing with itself and with
// writers under -race: the closer runs once.
func TestLineStreamCloseConcurrent(t *testing.T) {
	var closes sync.WaitGroup
	c := &countCloser{}
	s := NewLineStream(strings.NewReader(""), io.Discard, c, 1024, zerolog.Nop())
	for range 8 {
		closes.Go(func() {
			_ = s.WriteObject("x")
			_ = s.Close()
		})
	}
	closes.Wait()
	if c.n != 1 {
		t.Errorf("closer closed %d times, want 1", c.n)
	}
}

// modelFrames is what ReadObject must return for data under cap maxFrame
// (LNK-1): each '\n'-separated line, a final one without '\n' included, that
// is at most maxFrame bytes long and, trimmed, is a JSON object containing a
// "jsonrpc" key.
func modelFrames(data []byte, maxFrame int) []string {
	var out []string
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(line) > maxFrame {
			continue
		}
		line = bytes.TrimSpace(line)
		if len(line) > 1 && line[0] == '{' && bytes.Contains(line, []byte(`"jsonrpc"`)) && json.Valid(line) {
			out = append(out, string(line))
		}
	}
	return out
}

// FuzzLineStream feeds arbitrary bytes under an arbitrary cap and checks
// that ReadObject never panics, never returns a frame longer than maxFrame,
// returns exactly the frames of modelFrames in order, and ends with io.EOF
// after at most one read per line (plus one).
func FuzzLineStream(f *testing.F) {
	a := `{"jsonrpc":"2.0","method":"a"}`
	seeds := []struct {
		data string
		max  uint32
	}{
		{"", 64},
		{a + "\n", 64},
		{a, 64},
		{a + "\r\n\n  \n" + a, 64},
		{"hello\n" + a + "\n{\"a\":1}\n[1]\n", 64},
		{`{"jsonrpc":"2.0",` + "\n" + a + " junk\n" + a + "\n", 64},
		{a + "\n", uint32(len(a) - 1)}, // maxFrame == len(a): kept
		{a + "\n", uint32(len(a) - 2)}, // maxFrame == len(a)-1: discarded
		{strings.Repeat("x", 70_000) + "\n" + a + "\n", 100_000},
		{strings.Repeat("x", 70_000) + "\n" + a + "\n", 1000},
		{`{"jsonrpc":"2.0","method":"` + strings.Repeat("u", 66_000) + `"}` + "\n" + a, 70_000},
		{"\n\n\n", 1},
		{"{\"jsonrpc\":\"2.0\",\"params\":\"\\u00e9\\n\"}\n", 64},
	}
	for _, s := range seeds {
		f.Add([]byte(s.data), s.max)
	}
	f.Fuzz(func(t *testing.T, data []byte, m uint32) {
		maxFrame := 1 + int(m%(1<<17)) // 1 B .. 128 KiB, so lines cross bufio's 64 KiB
		s := NewLineStream(bytes.NewReader(data), io.Discard, nil, maxFrame, zerolog.Nop())
		limit := bytes.Count(data, []byte("\n")) + 2
		var got []string
		for i := 0; ; i++ {
			if i > limit {
				t.Fatalf("no io.EOF after %d reads of %d lines", i, limit-1)
			}
			var raw json.RawMessage
			err := s.ReadObject(&raw)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("ReadObject error %v, want frames then io.EOF", err)
			}
			if len(raw) > maxFrame {
				t.Fatalf("frame of %d bytes over maxFrame %d: %.80q", len(raw), maxFrame, raw)
			}
			got = append(got, string(raw))
		}
		if want := modelFrames(data, maxFrame); !slices.Equal(got, want) {
			t.Fatalf("maxFrame %d: frames\n got %.300q\nwant %.300q", maxFrame, got, want)
		}
		var raw json.RawMessage
		if err := s.ReadObject(&raw); !errors.Is(err, io.EOF) {
			t.Fatalf("ReadObject after EOF: %v, want io.EOF", err)
		}
	})
}

// TestLineStreamFinalLineOverCap checks that a final line without '\n' is
// held to the same cap as every other line.
func TestLineStreamFinalLineOverCap(t *testing.T) {
	const maxFrame = 64
	for _, n := range []int{maxFrame + 1, maxFrame + 2} {
		s := NewLineStream(strings.NewReader(frameOfLen(n)), io.Discard, nil, maxFrame, zerolog.Nop())
		var raw json.RawMessage
		err := s.ReadObject(&raw)
		if got, want := err, io.EOF; !errors.Is(got, want) {
			t.Errorf("final line of %d bytes, cap %d: got frame of %d bytes (err %v), want io.EOF", n, maxFrame, len(raw), got)
		}
	}
}

// TestLineStreamStalledPeer: a peer that stops reading cannot hold a writer
// past the bound: the write fails with ErrLinkStalled, stalled is called
// once, later writes fail at once, and Close never waits for a blocked
// write.
func TestLineStreamStalledPeer(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	s := NewLineStream(strings.NewReader(""), w, w, 1<<20, zerolog.Nop())
	var stalls int
	s.BoundWrites(200*time.Millisecond, func() { stalls++ })
	big := map[string]string{"pad": strings.Repeat("x", 512<<10)} // over any pipe buffer
	if err := s.WriteObject(big); !errors.Is(err, ErrLinkStalled) {
		t.Fatalf("write to a peer that reads nothing: %v, want ErrLinkStalled", err)
	}
	if err := s.WriteObject(map[string]int{"a": 1}); !errors.Is(err, ErrLinkStalled) {
		t.Fatalf("write after a stall: %v, want ErrLinkStalled", err)
	}
	if stalls != 1 {
		t.Fatalf("stalled called %d times, want 1", stalls)
	}

	// An unbounded writer blocked on the same kind of peer: Close ends it.
	r2, w2, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r2.Close()
	s2 := NewLineStream(strings.NewReader(""), w2, w2, 1<<20, zerolog.Nop())
	done := make(chan error, 1)
	go func() { done <- s2.WriteObject(big) }()
	time.Sleep(100 * time.Millisecond) // the write is blocked on the full pipe
	closed := make(chan struct{})
	go func() {
		_ = s2.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close waited for a blocked write")
	}
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("the blocked write succeeded after Close")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the blocked write did not end after Close")
	}
}
