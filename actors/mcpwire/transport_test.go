package mcpwire

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// peer is the server's end of a transport under test.
type peer struct {
	conn net.Conn
	in   *bufio.Reader
}

// pair returns a started transport and the server's end of its pipe; both
// are closed when the test ends.
func pair(t *testing.T, opt Options) (*Transport, *peer) {
	t.Helper()
	host, srv := net.Pipe()
	if opt.Server == "" {
		opt.Server = "s"
	}
	opt.Log = zerolog.Nop()
	tr := New(host, host, opt)
	if err := tr.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Close()
		_ = tr.Close()
	})
	return tr, &peer{conn: srv, in: bufio.NewReader(srv)}
}

// readID reads the next frame the bridge sent and returns its raw id.
func (p *peer) readID(t *testing.T) string {
	t.Helper()
	line, err := p.in.ReadBytes('\n')
	if err != nil {
		t.Fatalf("peer read: %v", err)
	}
	var m struct{ ID json.RawMessage }
	if err := json.Unmarshal(line, &m); err != nil {
		t.Fatalf("peer read %q: %v", line, err)
	}
	return string(m.ID)
}

func (p *peer) send(t *testing.T, frame string) {
	t.Helper()
	if _, err := io.WriteString(p.conn, frame); err != nil {
		t.Fatalf("peer write: %v", err)
	}
}

// call sends one request and returns its outcome, failing the test when it
// takes longer than 5 s.
func call(t *testing.T, tr *Transport, id string) (*transport.JSONRPCResponse, error) {
	t.Helper()
	type out struct {
		resp *transport.JSONRPCResponse
		err  error
	}
	done := make(chan out, 1)
	go func() {
		resp, err := tr.SendRequest(context.Background(), transport.JSONRPCRequest{JSONRPC: "2.0", ID: mcp.NewRequestId(id), Method: "tools/call"})
		done <- out{resp, err}
	}()
	select {
	case o := <-done:
		return o.resp, o.err
	case <-time.After(5 * time.Second):
		_ = tr.Close() // ends the call, so the goroutine is gone before goleak looks
		<-done
		t.Fatalf("request %s got no answer within 5 s", id)
		return nil, nil
	}
}

// TestBadRepliesEndTheirCall: a reply the bridge cannot use fails the
// request it names at once, with a line that says what was wrong, and the
// stream stays usable for the next request.
func TestBadRepliesEndTheirCall(t *testing.T) {
	for _, tc := range []struct{ reply, want string }{
		{`{"jsonrpc":"2.0","id":ID,"error":{"code":"x","message":"m"}}`, "error.code is a string, not an integer"},
		{`{"jsonrpc":"2.0","id":ID,"error":{"code":1.5,"message":"m"}}`, "error.code is a number, not an integer"},
		{`{"jsonrpc":"2.0","id":ID,"error":{"code":1,"message":{"a":1}}}`, "error.message is an object, not a string"},
		{`{"jsonrpc":"2.0","id":ID,"error":{"code":1,"message":null}}`, "error.message is null, not a string"},
		{`{"jsonrpc":"2.0","id":ID,"error":{"message":"m"}}`, "error.code is missing"},
		{`{"jsonrpc":"2.0","id":ID,"error":{"code":1}}`, "error.message is missing"},
		{`{"jsonrpc":"2.0","id":ID,"error":"boom"}`, "its error is a string, not an object"},
		{`{"jsonrpc":"2.0","id":ID,"error":[1]}`, "its error is an array, not an object"},
		{`{"jsonrpc":"2.0","id":ID,"error":{"code":1,"message":"m"},"result":{}}`, "both a result and an error"},
		{`{"jsonrpc":"2.0","id":ID}`, "neither a result nor an error"},
		{`{"jsonrpc":"2.0","id":ID,"result":5}`, "its result is a number, not an object"},
		{`{"jsonrpc":"2.0","id":ID,"result":"s"}`, "its result is a string, not an object"},
		{`{"jsonrpc":"2.0","id":ID,"result":{"a":1,}}`, "it is not valid JSON"},
		{`{"jsonrpc":"2.0","id":ID,"method":5}`, "its method is a number, not a name"},
		{`{"jsonrpc":"2.0","id":ID,"result":` + strings.Repeat("[", 512) + strings.Repeat("]", 512) + `}`, "nested deeper than 512 levels"},
		{`{"jsonrpc":"2.0","result":` + strings.Repeat("[", 200000) + strings.Repeat("]", 200000) + `,"id":ID}`, "nested deeper than 512 levels"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			tr, p := pair(t, Options{})
			go func() {
				id := p.readID(t)
				p.send(t, strings.Replace(tc.reply, "ID", id, 1)+"\n")
			}()
			_, err := call(t, tr, "bridge-1")
			var bad *BadReplyError
			if !errors.As(err, &bad) || !strings.Contains(err.Error(), "Server 's' sent a reply the bridge cannot read (") || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want a BadReplyError saying %q", err, tc.want)
			}
			go func() {
				id := p.readID(t)
				p.send(t, `{"jsonrpc":"2.0","id":`+id+`,"result":{"ok":true}}`+"\n")
			}()
			if resp, err := call(t, tr, "bridge-2"); err != nil || string(resp.Result) != `{"ok":true}` {
				t.Fatalf("the next request: %v, %v; want its result", resp, err)
			}
		})
	}
}

// TestReplyOverCap: a reply over the frame cap fails its request as soon
// as its id is known, even when the line never ends; one whose id comes
// last fails when the line ends. Either way the line is never kept whole.
func TestReplyOverCap(t *testing.T) {
	const maxFrame = 1 << 10
	for _, tc := range []struct {
		name  string
		frame func(id string) string
	}{
		{"id first, endless", func(id string) string {
			return `{"jsonrpc":"2.0","id":` + id + `,"result":{"text":"` + strings.Repeat("x", 64<<10)
		}},
		{"id last", func(id string) string {
			return `{"jsonrpc":"2.0","result":{"text":"` + strings.Repeat("x", 64<<10) + `"},"id":` + id + "}\n"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, p := pair(t, Options{MaxFrame: maxFrame})
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _ = io.WriteString(p.conn, tc.frame(p.readID(t))) // an endless line's write ends when the pipe closes
			}()
			_, err := call(t, tr, "bridge-1")
			if want := "sent a reply over the 1024-byte frame limit (MCP_BRIDGE_MAX_FRAME_BYTES)"; err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, ErrOverCap) {
				t.Errorf("error = %v, want %q, and ErrOverCap", err, want)
			}
			_ = p.conn.Close()
			wg.Wait()
		})
	}
}

// TestInvalidUTF8IsReplaced: invalid UTF-8 in a reply reaches the caller
// as U+FFFD, in valid JSON.
func TestInvalidUTF8IsReplaced(t *testing.T) {
	tr, p := pair(t, Options{})
	go func() {
		id := p.readID(t)
		p.send(t, `{"jsonrpc":"2.0","id":`+id+`,"result":{"text":"a`+"\xff\xfe"+`b"}}`+"\n")
	}()
	resp, err := call(t, tr, "bridge-1")
	if err != nil {
		t.Fatal(err)
	}
	var res struct{ Text string }
	if err := json.Unmarshal(resp.Result, &res); err != nil || res.Text != "a\uFFFDb" {
		t.Errorf("result %q (%v), want the text with one U+FFFD for the run of invalid bytes", resp.Result, err)
	}
}

// TestStrayAndRepeatedIDs: replies to ids nobody waits for (unknown,
// repeated, malformed) are skipped; the real reply still arrives.
func TestStrayAndRepeatedIDs(t *testing.T) {
	tr, p := pair(t, Options{})
	go func() {
		id := p.readID(t)
		p.send(t, `{"jsonrpc":"2.0","id":"nobody","result":{}}`+"\n"+
			`{"jsonrpc":"2.0","id":{"x":1},"result":{}}`+"\n"+
			`not json at all`+"\n"+
			`{"jsonrpc":"2.0","id":`+id+`,"result":{"n":1}}`+"\n"+
			`{"jsonrpc":"2.0","id":`+id+`,"result":{"n":2}}`+"\n")
	}()
	resp, err := call(t, tr, "bridge-1")
	if err != nil || string(resp.Result) != `{"n":1}` {
		t.Fatalf("reply %v, %v; want the first answer", resp, err)
	}
}

// TestCutOffReply: a stream that ends mid-line fails the waiting request
// with the transport's closed error, and Done says why.
func TestCutOffReply(t *testing.T) {
	tr, p := pair(t, Options{})
	go func() {
		p.readID(t)
		p.send(t, `{"jsonrpc":"2.0","id":"bridge-1","resu`)
		_ = p.conn.Close()
	}()
	if _, err := call(t, tr, "bridge-1"); !errors.Is(err, transport.ErrTransportClosed) {
		t.Errorf("error = %v, want transport.ErrTransportClosed", err)
	}
	<-tr.Done()
	if err := tr.Err(); err == nil || !strings.Contains(err.Error(), "closed its stdout") {
		t.Errorf("Err() = %v, want the stdout's end", err)
	}
}

// TestWriteStall: a server that stops reading ends the stream within the
// write bound instead of holding the writer.
func TestWriteStall(t *testing.T) {
	tr, _ := pair(t, Options{WriteBound: 100 * time.Millisecond})
	start := time.Now()
	_, err := call(t, tr, "bridge-1")
	if err == nil || !strings.Contains(err.Error(), "stopped reading its stdin") {
		t.Errorf("error = %v, want the stall", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("the stalled write took %v", d)
	}
	<-tr.Done()
}

// TestServerRequestsBounded: at most MaxHandlers server→client requests
// run at once; the rest are refused at once, and each gets one answer.
func TestServerRequestsBounded(t *testing.T) {
	tr, p := pair(t, Options{MaxHandlers: 2})
	release := make(chan struct{})
	tr.SetRequestHandler(func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return transport.NewJSONRPCResultResponse(req.ID, json.RawMessage(`{}`)), nil
	})
	go func() {
		for i := range 5 {
			p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"roots/list"}`+"\n", i))
		}
	}()
	refused, answered := 0, 0
	for range 5 {
		line, err := p.in.ReadBytes('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(line), "too many requests in flight") {
			refused++
			if refused == 3 {
				close(release)
			}
		} else {
			answered++
		}
	}
	if refused != 3 || answered != 2 {
		t.Errorf("refused %d and answered %d of 5 requests, want 3 and 2", refused, answered)
	}
}

// TestReaderPanicEndsStream: a panic on the reader (a notification
// handler's, say) ends the stream and fails the waiting request; the
// process goes on.
func TestReaderPanicEndsStream(t *testing.T) {
	tr, p := pair(t, Options{})
	tr.SetNotificationHandler(func(mcp.JSONRPCNotification) { panic("test: a handler panics") })
	go func() {
		p.readID(t)
		p.send(t, `{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}`+"\n")
	}()
	if _, err := call(t, tr, "bridge-1"); !errors.Is(err, transport.ErrTransportClosed) {
		t.Errorf("error = %v, want transport.ErrTransportClosed", err)
	}
	<-tr.Done()
	if err := tr.Err(); err == nil || !strings.Contains(err.Error(), "internal error") {
		t.Errorf("Err() = %v, want the internal error", err)
	}
}

// TestNotificationFlood: 20,000 notifications before a reply all reach the
// handler, in order, and the reply arrives.
func TestNotificationFlood(t *testing.T) {
	tr, p := pair(t, Options{})
	var got int
	tr.SetNotificationHandler(func(n mcp.JSONRPCNotification) { got++ })
	go func() {
		id := p.readID(t)
		w := bufio.NewWriter(p.conn)
		for range 20000 {
			_, _ = w.WriteString(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1}}` + "\n")
		}
		_, _ = w.WriteString(`{"jsonrpc":"2.0","id":` + id + `,"result":{}}` + "\n")
		_ = w.Flush()
	}()
	if _, err := call(t, tr, "bridge-1"); err != nil {
		t.Fatal(err)
	}
	if got != 20000 {
		t.Errorf("handler saw %d notifications, want 20000", got)
	}
}
