package mcpwire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bridge-mcp/bridge/protocol/printable"
)

// badReplyMark marks, in error.data, an error reply the filter wrote in
// place of a reply it could not use; AsBadReply turns it back into a
// BadReplyError. A server could send the mark itself: it would only dress
// its own error message as the bridge's.
const badReplyMark = "bridgeBadReply"

// overCapMark is the mark's value for a reply over the cap (ErrOverCap).
const overCapMark = "overCap"

// AsBadReply is the BadReplyError that an error reply written by
// HTTPFilter carries; nil for any other error reply.
func AsBadReply(e *mcp.JSONRPCErrorDetails) error {
	if e == nil {
		return nil
	}
	if data, ok := e.Data.(map[string]any); ok && (data[badReplyMark] == true || data[badReplyMark] == overCapMark) {
		return &BadReplyError{Msg: e.Message, OverCap: data[badReplyMark] == overCapMark}
	}
	return nil
}

// HTTPFilter wraps base (nil: http.DefaultTransport) so that the response
// bodies of a streamable-HTTP or SSE server meet the stdio transport's
// rules before mcp-go reads them: a JSON body, and each data event of an
// event stream, is one frame. A frame that cannot be used becomes an error
// reply (see AsBadReply) to the request it answers: the id it names, or
// else, in the response to a POSTed request, that request's id. An
// unusable frame that answers nothing is dropped. Other bodies (errors, say)
// are cut at the cap.
func HTTPFilter(base http.RoundTripper, server string, maxFrame int) http.RoundTripper {
	if base == nil {
		base = HTTPTransport
	}
	if maxFrame <= 0 {
		maxFrame = 16 << 20
	}
	return &httpFilter{base: base, server: server, max: maxFrame}
}

// HTTPTransport is the base transport for upstream HTTP servers:
// http.DefaultTransport's settings, but an idle connection is dropped after
// 4 s, under the 5 s keep-alive of Node's HTTP server, which most MCP
// servers run on. A POST is not retried when the connection it reused was
// being closed by the server, so the bridge reuses none the server may be
// closing. The filter reads every JSON body to its end, which returns more
// connections to the pool than mcp-go's decoder alone did.
var HTTPTransport http.RoundTripper = func() http.RoundTripper {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.IdleConnTimeout = 4 * time.Second
	return t
}()

type httpFilter struct {
	base   http.RoundTripper
	server string
	max    int
}

func (f *httpFilter) RoundTrip(req *http.Request) (*http.Response, error) {
	posted := f.postedID(req)
	resp, err := f.base.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch {
	case resp.StatusCode/100 == 2 && mt == "application/json":
		resp.Body = &jsonBody{f: f, src: resp.Body, posted: posted}
		resp.ContentLength = -1
		resp.Header.Del("Content-Length")
	case resp.StatusCode/100 == 2 && mt == "text/event-stream":
		resp.Body = &sseBody{f: f, src: resp.Body, in: bufio.NewReaderSize(resp.Body, 64<<10), posted: posted}
	default:
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.LimitReader(resp.Body, int64(f.max)), resp.Body}
	}
	return resp, nil
}

// postedID is the id of the JSON-RPC request a POST carries; nil for
// anything else (a notification, a GET).
func (f *httpFilter) postedID(req *http.Request) json.RawMessage {
	if req.Method != http.MethodPost || req.GetBody == nil {
		return nil
	}
	body, err := req.GetBody()
	if err != nil {
		return nil
	}
	defer body.Close()
	data, err := io.ReadAll(io.LimitReader(body, int64(f.max)+1))
	if err != nil {
		return nil
	}
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(data, &m) != nil || m.Method == "" || IsNull(m.ID) {
		return nil
	}
	return m.ID
}

// check holds one frame to the rules: it returns the frame to pass on
// (invalid UTF-8 replaced), or an error reply in its place, or nil to
// drop it. In the response to a POSTed request (posted), every reply
// answers that request: mcp-go takes the first reply it reads for the
// answer, whatever its id. In a stream, a good reply to another id is
// dropped; as a whole JSON body, it is refused.
func (f *httpFilter) check(fr *frame, posted json.RawMessage, stream bool) []byte {
	var m message
	if fr.line != nil {
		if !utf8.Valid(fr.line) {
			fr.line = bytes.ToValidUTF8(fr.line, []byte("\uFFFD"))
		}
		m = decode(fr)
	}
	switch {
	case fr.line != nil && m.why == "" && m.kind == reply && posted != nil && !sameID(m.id, posted):
		if stream {
			return nil
		}
		return f.refuse(posted, fmt.Sprintf("Server '%s' sent a reply the bridge cannot read (it answers id %s, not the request's %s)",
			f.server, printable.Log(clip(string(m.id), 40)), posted))
	case fr.line != nil && m.why == "":
		return fr.line
	case fr.scan.methodSeen:
		return nil // a request or notification the bridge cannot use: nothing waits for it
	case fr.line == nil:
		return f.refuseOverCap(firstID(posted, fr.scan.id))
	}
	return f.refuse(firstID(posted, fr.scan.id), fmt.Sprintf("Server '%s' sent a reply the bridge cannot read (%s)", f.server, m.why))
}

// sameID says whether two raw ids name the same request.
func sameID(a, b json.RawMessage) bool {
	ka, okA := idKey(a)
	kb, okB := idKey(b)
	return okA && okB && ka == kb
}

func (f *httpFilter) brokeOff(err error) string {
	return fmt.Sprintf("Server '%s' broke off its reply (%s)", f.server, printable.Log(clip(err.Error(), 120)))
}

// refuse is an error reply to id with msg; nil without an id.
func (f *httpFilter) refuse(id json.RawMessage, msg string) []byte {
	return f.refuseMarked(id, msg, true)
}

// refuseOverCap is refuse for a reply over the cap.
func (f *httpFilter) refuseOverCap(id json.RawMessage) []byte {
	return f.refuseMarked(id, overCapError(f.server, f.max).Msg, overCapMark)
}

func (f *httpFilter) refuseMarked(id json.RawMessage, msg string, mark any) []byte {
	if _, ok := idKey(id); !ok {
		return nil
	}
	out, _ := json.Marshal(map[string]any{"jsonrpc": mcp.JSONRPC_VERSION, "id": id,
		"error": map[string]any{"code": mcp.INTERNAL_ERROR, "message": msg, "data": map[string]any{badReplyMark: mark}}})
	return out
}

func firstID(ids ...json.RawMessage) json.RawMessage {
	for _, id := range ids {
		if _, ok := idKey(id); ok {
			return id
		}
	}
	return nil
}

// jsonBody is a JSON response body, checked whole (up to the cap) on the
// first read.
type jsonBody struct {
	f      *httpFilter
	src    io.ReadCloser
	posted json.RawMessage
	out    *bytes.Reader
	err    error
}

func (b *jsonBody) Read(p []byte) (int, error) {
	if b.out == nil {
		b.fill()
	}
	if b.out.Len() == 0 && b.err != nil {
		return 0, b.err
	}
	return b.out.Read(p)
}

func (b *jsonBody) fill() {
	fr, err := newFrameReader(b.src, b.f.max).whole()
	_ = b.src.Close() // read whole, or over the cap: the rest is not read
	if err != nil {
		// A body broken off (the server died mid-reply): its request
		// gets the line a stdio server's exit would give, or the error.
		b.out, b.err = bytes.NewReader(b.f.refuse(b.posted, b.f.brokeOff(err))), io.EOF
		if b.out.Len() == 0 {
			b.err = err
		}
		return
	}
	b.out = bytes.NewReader(b.f.check(fr, b.posted, false))
	b.err = io.EOF
}

func (b *jsonBody) Close() error { return b.src.Close() }

// sseBody is an event stream, passed on event by event: the data of each
// event is checked as one frame (an event over the cap is answered as soon
// as its id is known, and the rest of it dropped); other fields pass.
type sseBody struct {
	f      *httpFilter
	src    io.ReadCloser
	in     *bufio.Reader
	posted json.RawMessage
	out    bytes.Buffer
	err    error

	midLine, isData bool   // a line has begun; it is a data line
	other           []byte // the line so far, when not a data line

	fields   []byte // the event's other lines, kept
	data     []byte // its data lines, joined with '\n'; nil once over the cap
	size     int
	scan     scan
	hasData  bool
	answered bool // an over-cap event was answered already
	// notMessage: the event's type is not "message" (the SSE transport's
	// "endpoint"), so its data is not a JSON-RPC frame.
	notMessage bool
	// replied: a reply to the posted request passed; resumable: the
	// server sent an event id, so mcp-go may resume a broken stream.
	replied, resumable bool
}

func (b *sseBody) Read(p []byte) (int, error) {
	for b.out.Len() == 0 && b.err == nil {
		b.err = b.step()
	}
	if b.out.Len() > 0 {
		return b.out.Read(p)
	}
	return 0, b.err
}

func (b *sseBody) Close() error { return b.src.Close() }

// step reads the next chunk of the stream (a line, or a part of a long
// one). A data line goes to the event's data chunk by chunk, so its size
// costs nothing past the cap, and an over-cap answer leaves before the
// line ends; any other line is kept, up to the cap, for the event's fields.
func (b *sseBody) step() error {
	chunk, err := b.in.ReadSlice('\n')
	if len(chunk) > 0 {
		b.take(chunk)
	}
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil // the line goes on
	case err == nil:
		b.endLine()
		return nil
	}
	if b.midLine {
		b.endLine() // a last line without its '\n'
	}
	if b.hasData || len(b.fields) > 0 {
		b.endEvent() // a last event without its blank line
	}
	// A POST's stream that ends unanswered, with no event id to resume
	// from (SEP-1699), fails its request with a line that names the server.
	if b.posted != nil && !b.replied && !b.resumable {
		why := fmt.Sprintf("Server '%s' ended its reply stream without an answer", b.f.server)
		if !errors.Is(err, io.EOF) {
			why = b.f.brokeOff(err)
		}
		b.emit(b.f.refuse(b.posted, why))
		b.replied = true
	}
	return err
}

// take is the next chunk of a line.
func (b *sseBody) take(chunk []byte) {
	if !b.midLine {
		b.midLine = true
		if b.isData = bytes.HasPrefix(chunk, []byte("data:")); b.isData {
			if b.hasData {
				b.feed([]byte("\n"))
			}
			b.hasData = true
			chunk = bytes.TrimPrefix(bytes.TrimPrefix(chunk, []byte("data:")), []byte(" "))
		}
	}
	if b.isData {
		b.feed(bytes.TrimSuffix(bytes.TrimSuffix(chunk, []byte("\n")), []byte("\r")))
	} else if len(b.other)+len(chunk) <= b.f.max {
		b.other = append(b.other, chunk...)
	}
}

// endLine ends a line of the stream: a blank line ends the event.
func (b *sseBody) endLine() {
	b.midLine = false
	if b.isData {
		return
	}
	line := bytes.TrimSuffix(bytes.TrimSuffix(b.other, []byte("\n")), []byte("\r"))
	b.other = b.other[:0]
	if len(line) == 0 {
		b.endEvent()
		return
	}
	if bytes.HasPrefix(line, []byte("id:")) {
		b.resumable = true
	}
	if v, ok := bytes.CutPrefix(line, []byte("event:")); ok {
		b.notMessage = string(bytes.TrimSpace(v)) != "message"
	}
	b.fields = append(append(b.fields, line...), '\n')
}

// feed takes data bytes of the event.
func (b *sseBody) feed(chunk []byte) {
	b.size += len(chunk)
	b.scan.feed(chunk)
	if b.size <= b.f.max {
		b.data = append(b.data, chunk...)
		return
	}
	b.data = nil
	// Answered as soon as its id is known, unless it is a request or
	// a notification (its "method" came first).
	if !b.answered && !b.notMessage && b.scan.id != nil && !b.scan.methodSeen {
		b.answered, b.replied = true, true
		b.emit(b.f.refuseOverCap(firstID(b.posted, b.scan.id)))
	}
}

// endEvent passes the event on: its fields, then its checked data.
func (b *sseBody) endEvent() {
	b.scan.finish()
	switch {
	case b.hasData && b.notMessage:
		// Not a JSON-RPC message (the SSE transport's endpoint event):
		// it passes, within the cap.
		b.out.Write(b.fields)
		if b.data != nil {
			for _, l := range bytes.Split(b.data, []byte("\n")) {
				b.out.WriteString("data: ")
				b.out.Write(l)
				b.out.WriteByte('\n')
			}
		}
		b.out.WriteByte('\n')
	case b.hasData && !b.answered:
		fr := &frame{line: b.data, size: b.size, scan: b.scan}
		if b.size > b.f.max {
			fr.line = nil
		}
		b.out.Write(b.fields)
		out := b.f.check(fr, b.posted, true)
		b.replied = b.replied || out != nil && !fr.scan.methodSeen
		b.emit(out)
	case !b.hasData:
		b.out.Write(b.fields)
		b.out.WriteByte('\n')
	}
	b.fields, b.data, b.size, b.scan, b.hasData, b.answered, b.notMessage = b.fields[:0], nil, 0, scan{}, false, false, false
}

// emit writes one data event; nothing for nil.
func (b *sseBody) emit(data []byte) {
	if data == nil {
		return
	}
	b.out.WriteString("data: ")
	b.out.Write(bytes.ReplaceAll(data, []byte("\n"), []byte(" ")))
	b.out.WriteString("\n\n")
}
