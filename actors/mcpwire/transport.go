package mcpwire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/protocol/printable"
)

// Options configure a Transport.
type Options struct {
	// Server names the server in every message.
	Server string
	// MaxFrame caps one line from the server (MCP_BRIDGE_MAX_FRAME_BYTES).
	MaxFrame int
	// WriteBound is the longest one write to the server may take; a server
	// that stops reading for that long loses its connection. 0: 10 s.
	WriteBound time.Duration
	// MaxHandlers bounds the server→client requests handled at once; the
	// rest are refused at once. 0: 32.
	MaxHandlers int
	Log         zerolog.Logger
}

// Transport is mcp-go's transport.BidirectionalInterface over a stdio
// server's pipes, owned by the bridge because a server's frames are not
// trusted (issue 34). Its invariants:
//   - no line costs more than MaxFrame bytes of memory;
//   - every reply the bridge waits for ends its wait: a reply that cannot
//     be used (over the cap, too deep, a wrong JSON type, invalid JSON)
//     fails the request its id names with a *BadReplyError, and a stream
//     that ends fails every request still waiting;
//   - invalid UTF-8 is replaced with U+FFFD before decoding;
//   - no write waits longer than WriteBound, and at most MaxHandlers
//     server→client requests run at once;
//   - a panic on its reader ends the connection, never the process;
//   - Close stops and waits for every goroutine it started.
type Transport struct {
	opt Options
	r   io.ReadCloser
	w   io.WriteCloser
	log zerolog.Logger

	wmu    sync.Mutex // serializes frames on w
	broken error      // the first failed write: framing is lost; guarded by wmu

	mu        sync.Mutex
	pending   map[string]chan answer
	onNotify  func(mcp.JSONRPCNotification)
	onRequest transport.RequestHandler
	errWhy    error // why the stream ended

	handlers chan struct{} // a slot per running server→client request
	life     context.Context
	endLife  context.CancelFunc
	done     chan struct{} // closed when the stream has ended
	doneOnce sync.Once
	start    sync.Once
	close    sync.Once
	wg       sync.WaitGroup

	skipped  int  // frames skipped, for the log; reader-owned
	replaced bool // invalid UTF-8 was replaced once already; reader-owned

	// testPanic, when set, is called on the reader for each frame: tests
	// inject a panic with it.
	testPanic func()
}

var _ transport.BidirectionalInterface = (*Transport)(nil)

// answer is what a waiting request gets: the server's response, or why
// none can be used.
type answer struct {
	resp *transport.JSONRPCResponse
	err  error
}

// BadReplyError is a frame that answered a request but could not be used.
// OverCap says it was over the frame cap: errors.Is(err, ErrOverCap).
type BadReplyError struct {
	Msg     string
	OverCap bool
}

func (e *BadReplyError) Error() string { return e.Msg }

// Unwrap is ErrOverCap for a reply over the cap, so that a caller can say
// what the reply was for ("Resource x: the reply is over ...").
func (e *BadReplyError) Unwrap() error {
	if e.OverCap {
		return ErrOverCap
	}
	return nil
}

// ErrOverCap marks a reply over MCP_BRIDGE_MAX_FRAME_BYTES.
var ErrOverCap = errors.New("reply over the frame limit")

// New returns a transport reading the server's frames from r and writing
// the bridge's to w; Close closes both.
func New(r io.ReadCloser, w io.WriteCloser, opt Options) *Transport {
	if opt.WriteBound <= 0 {
		opt.WriteBound = 10 * time.Second
	}
	if opt.MaxHandlers <= 0 {
		opt.MaxHandlers = 32
	}
	if opt.MaxFrame <= 0 {
		opt.MaxFrame = 16 << 20
	}
	t := &Transport{opt: opt, r: r, w: w, log: opt.Log,
		pending: map[string]chan answer{}, handlers: make(chan struct{}, opt.MaxHandlers), done: make(chan struct{})}
	t.life, t.endLife = context.WithCancel(context.Background())
	return t
}

// Start starts the reader; later calls do nothing.
func (t *Transport) Start(context.Context) error {
	t.start.Do(func() {
		t.wg.Add(1)
		go t.read()
	})
	return nil
}

// Done is closed when the stream has ended: the server's stdout closed, a
// write stalled, the reader panicked, or Close.
func (t *Transport) Done() <-chan struct{} { return t.done }

// Err says why the stream ended; nil while it runs.
func (t *Transport) Err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.errWhy
}

// end ends the stream for why (the first why wins) and fails every request
// still waiting.
func (t *Transport) end(why error) {
	t.doneOnce.Do(func() {
		t.mu.Lock()
		t.errWhy = why
		waiting := t.pending
		t.pending = map[string]chan answer{}
		t.mu.Unlock()
		close(t.done)
		for _, ch := range waiting {
			ch <- answer{err: transport.ErrTransportClosed}
		}
	})
}

// Close ends the stream, closes both pipes, and waits for the reader and
// the request handlers (whose context it cancels).
func (t *Transport) Close() error {
	t.close.Do(func() {
		t.end(errors.New("closed"))
		t.endLife()
		_ = t.w.Close()
		_ = t.r.Close()
		t.wg.Wait()
	})
	return nil
}

// GetSessionId is empty: stdio has no session.
func (t *Transport) GetSessionId() string { return "" }

// SetNotificationHandler sets the handler of server notifications; it runs
// on the reader and must not block.
func (t *Transport) SetNotificationHandler(h func(mcp.JSONRPCNotification)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.onNotify = h
}

// SetRequestHandler sets the handler of server→client requests; each runs
// on its own goroutine, with a context Close cancels.
func (t *Transport) SetRequestHandler(h transport.RequestHandler) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.onRequest = h
}

// SendRequest writes req and waits for its answer, ctx, or the end of the
// stream.
func (t *Transport) SendRequest(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	key := req.ID.String()
	ch := make(chan answer, 1)
	t.mu.Lock()
	if t.errWhy != nil {
		t.mu.Unlock()
		return nil, transport.ErrTransportClosed
	}
	t.pending[key] = ch
	t.mu.Unlock()
	if err := t.write(ctx, req); err != nil {
		t.forget(key)
		return nil, err
	}
	select {
	case a := <-ch:
		return a.resp, a.err
	case <-ctx.Done():
		t.forget(key)
		return nil, ctx.Err()
	}
}

// SendNotification writes n.
func (t *Transport) SendNotification(ctx context.Context, n mcp.JSONRPCNotification) error {
	return t.write(ctx, n)
}

func (t *Transport) forget(key string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pending, key)
}

// write sends msg as one line, within WriteBound (and ctx's deadline, when
// sooner). A write that fails or times out may have sent part of a line:
// the framing is lost, so the stream ends.
func (t *Transport) write(ctx context.Context, msg any) error {
	data, err := json.Marshal(msg)
	if err != nil {
		return fmt.Errorf("frame: %w", err)
	}
	data = append(data, '\n')
	t.wmu.Lock()
	defer t.wmu.Unlock()
	if t.broken != nil {
		return t.broken
	}
	select {
	case <-t.done:
		return transport.ErrTransportClosed
	default:
	}
	deadline := time.Now().Add(t.opt.WriteBound)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	dw, bounded := t.w.(interface{ SetWriteDeadline(time.Time) error })
	bounded = bounded && dw.SetWriteDeadline(deadline) == nil
	_, err = t.w.Write(data)
	if err == nil {
		return nil
	}
	if bounded && errors.Is(err, os.ErrDeadlineExceeded) {
		err = fmt.Errorf("Server '%s' stopped reading its stdin (a write made no progress before its deadline)", t.opt.Server)
	}
	t.broken = err
	t.end(err)
	return err
}

// read is the reader goroutine: one frame at a time until the stream ends.
// A panic while it handles a frame (a handler's, or its own) ends the
// stream: the connection is lost and its owner restarts the server.
func (t *Transport) read() {
	defer t.wg.Done()
	defer func() {
		if v := recover(); v != nil {
			t.log.Error().Str("panic", printable.Log(clip(fmt.Sprint(v), 200))).Str("stack", stack()).Msg("stdio reader panicked; ending the server's connection")
			t.end(fmt.Errorf("the bridge's reader of server '%s' failed (internal error, see the bridge's log)", t.opt.Server))
		}
	}()
	fr := newFrameReader(t.r, t.opt.MaxFrame)
	for {
		f, err := fr.next(t.overCap)
		if errors.Is(err, io.EOF) {
			t.end(errors.New("the server closed its stdout"))
			return
		}
		if err != nil {
			t.end(fmt.Errorf("stream: %w", err))
			return
		}
		if t.testPanic != nil {
			t.testPanic()
		}
		t.handle(f)
	}
}

// overCap answers the request a frame over the cap names, unless the
// frame is a request or a notification (its "method" came first).
func (t *Transport) overCap(s *scan) {
	if s.methodSeen {
		return
	}
	t.deliver(s.id, answer{err: overCapError(t.opt.Server, t.opt.MaxFrame)})
}

// handle routes one frame.
func (t *Transport) handle(f *frame) {
	if f.line == nil {
		t.skip("frame over MCP_BRIDGE_MAX_FRAME_BYTES", fmt.Sprintf("%d bytes", f.size))
		return
	}
	if len(bytes.TrimSpace(f.line)) == 0 {
		return
	}
	if !utf8.Valid(f.line) {
		f.line = bytes.ToValidUTF8(f.line, []byte("\uFFFD"))
		if !t.replaced {
			t.replaced = true
			t.log.Warn().Msg("server sent invalid UTF-8; replaced with U+FFFD (logged once per connection)")
		}
	}
	m := decode(f)
	switch {
	case m.kind == reply && m.why == "":
		resp, err := m.response()
		if !t.deliver(m.id, answer{resp: resp, err: err}) {
			t.skip("reply to no request in flight (a stray, late or repeated id)", printable.Log(clip(string(m.id), 80)))
		}
	case m.why != "":
		if !t.deliver(m.id, answer{err: &BadReplyError{Msg: fmt.Sprintf("Server '%s' sent a reply the bridge cannot read (%s)", t.opt.Server, m.why)}}) {
			t.skip(m.why, printable.Log(clip(string(f.line), 200)))
		}
	case m.kind == notification:
		t.notify(f.line)
	case m.kind == request:
		t.serve(f.line, m)
	}
}

// deliver answers the waiting request of id; false when none waits (a
// stray, duplicate or late id, or none at all).
func (t *Transport) deliver(id json.RawMessage, a answer) bool {
	key, ok := idKey(id)
	if !ok {
		return false
	}
	t.mu.Lock()
	ch, ok := t.pending[key]
	delete(t.pending, key)
	t.mu.Unlock()
	if ok {
		ch <- a // buffered, and only one answer per request: never blocks
	}
	return ok
}

// skip drops a frame nobody waits for: the first of a connection is
// logged at warn, the rest at debug, so a flood costs no log volume.
func (t *Transport) skip(why, detail string) {
	t.skipped++
	ev := t.log.Debug()
	if t.skipped == 1 {
		ev = t.log.Warn()
	}
	ev.Str("why", why).Str("frame", detail).Int("skipped", t.skipped).Msg("skipped a frame from the server")
}

func (t *Transport) notify(line []byte) {
	var n mcp.JSONRPCNotification
	if err := json.Unmarshal(line, &n); err != nil {
		t.skip("notification that cannot be decoded", clip(err.Error(), 120))
		return
	}
	t.mu.Lock()
	h := t.onNotify
	t.mu.Unlock()
	if h != nil {
		h(n)
	}
}

// serve runs a server→client request's handler on its own goroutine, or
// refuses it at once when MaxHandlers already run.
func (t *Transport) serve(line []byte, m message) {
	var id mcp.RequestId
	if _, ok := idKey(m.id); !ok || id.UnmarshalJSON(m.id) != nil {
		t.skip("request with an id that is not a string or a number", printable.Log(clip(string(line), 200)))
		return
	}
	var method string
	_ = json.Unmarshal(m.env.Method, &method)
	req := transport.JSONRPCRequest{JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: method}
	if !IsNull(m.env.Params) {
		req.Params = m.env.Params
	}
	t.mu.Lock()
	h := t.onRequest
	t.mu.Unlock()
	if h == nil {
		t.respond(transport.NewJSONRPCErrorResponse(id, mcp.METHOD_NOT_FOUND, "no request handler", nil))
		return
	}
	select {
	case t.handlers <- struct{}{}:
	default:
		t.respond(transport.NewJSONRPCErrorResponse(id, mcp.INTERNAL_ERROR,
			fmt.Sprintf("too many requests in flight from this server (at most %d)", t.opt.MaxHandlers), nil))
		return
	}
	t.wg.Add(1)
	go func() {
		defer t.wg.Done()
		defer func() { <-t.handlers }()
		t.respond(t.run(h, req))
	}()
}

// run calls the handler; its panic or error becomes an error response.
func (t *Transport) run(h transport.RequestHandler, req transport.JSONRPCRequest) (resp *transport.JSONRPCResponse) {
	defer func() {
		if v := recover(); v != nil {
			t.log.Error().Str("panic", printable.Log(clip(fmt.Sprint(v), 200))).Str("stack", stack()).Str("method", printable.Log(req.Method)).Msg("a server request's handler panicked")
			resp = transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR, "internal error", nil)
		}
	}()
	resp, err := h(t.life, req)
	if err != nil {
		return transport.NewJSONRPCErrorResponse(req.ID, mcp.INTERNAL_ERROR, err.Error(), nil)
	}
	return resp
}

func (t *Transport) respond(resp *transport.JSONRPCResponse) {
	if resp == nil {
		return
	}
	if err := t.write(t.life, resp); err != nil {
		t.log.Debug().Err(err).Msg("answering a server request")
	}
}

// overCapError is the error of a reply over the frame cap.
func overCapError(server string, maxFrame int) *BadReplyError {
	return &BadReplyError{OverCap: true, Msg: fmt.Sprintf(
		"Server '%s' sent a reply over the %d-byte frame limit (MCP_BRIDGE_MAX_FRAME_BYTES); ask it for less, or raise the limit",
		server, maxFrame)}
}

// stack is the panicking goroutine's stack, bounded for the log.
func stack() string {
	return clip(string(debug.Stack()), 8<<10)
}
