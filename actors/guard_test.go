package actors

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/protocol/result"
)

// logBuf is a log writer whose lines a test reads.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// errorLines are the lines logged at error level.
func (l *logBuf) errorLines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(l.b.String(), "\n") {
		if strings.Contains(line, `"level":"error"`) {
			out = append(out, line)
		}
	}
	return out
}

// panicOnce is a panicHook that panics the first time its site is reached.
type panicOnce struct {
	site  string
	fired chan struct{} // closed just before the panic
	once  sync.Once
	at    atomic.Int64 // when it panicked (UnixNano)
}

func newPanicOnce(site string) *panicOnce { return &panicOnce{site: site, fired: make(chan struct{})} }

func (p *panicOnce) hook(site string) {
	if site != p.site {
		return
	}
	first := false
	p.once.Do(func() { first = true })
	if first {
		p.at.Store(time.Now().UnixNano())
		close(p.fired)
		panic("test: a panic injected at " + site)
	}
}

// checkLoggedOnce checks that logs hold exactly one error line, the panic
// injected at site with its stack.
func checkLoggedOnce(t *testing.T, logs *logBuf, site string) {
	t.Helper()
	lines := logs.errorLines()
	if len(lines) != 1 {
		t.Fatalf("%d error lines, want the panic's only:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	var got struct{ Panic, Stack, Message string }
	if err := json.Unmarshal([]byte(lines[0]), &got); err != nil {
		t.Fatal(err)
	}
	if got.Panic != "test: a panic injected at "+site || !strings.Contains(got.Stack, "runtime/debug.Stack") ||
		!strings.Contains(got.Message, "internal error in ") || len(got.Stack) > maxPanicStack+64 {
		t.Errorf("logged %q, want the injected panic with its stack (at most %d bytes)", lines[0], maxPanicStack)
	}
}

// scriptedServers is ClientDeps.dial for the guard tests: every start
// serves serveScripted over net.Pipe, and is recorded.
type scriptedServers struct {
	answers chan string // the client's answers to the server's requests
	dials   chan time.Time
	wg      sync.WaitGroup

	mu    sync.Mutex
	conns []*serverConn
}

func newScriptedServers() *scriptedServers {
	return &scriptedServers{answers: make(chan string, 4), dials: make(chan time.Time, 8)}
}

func (p *scriptedServers) dial(_ context.Context, conn *serverConn) error {
	hostR, serverW := net.Pipe()
	serverR, hostW := net.Pipe()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		serveScripted(serverR, serverW, p.answers)
	}()
	conn.tr = transport.NewIO(hostR, hostW, nil)
	conn.mc = client.NewClient(conn.tr)
	conn.cancel = func() {
		for _, c := range []net.Conn{hostR, hostW, serverR, serverW} {
			_ = c.Close()
		}
	}
	p.mu.Lock()
	p.conns = append(p.conns, conn)
	p.mu.Unlock()
	p.dials <- time.Now()
	return conn.mc.Start(context.Background())
}

func (p *scriptedServers) all() []*serverConn {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*serverConn(nil), p.conns...)
}

// serveScripted is an MCP server written for the guard tests, until r
// closes: it declares tools and tasks; tools/call "notify" sends
// list_changed first, "ask" pings the client and answers once the client
// answered (the answer goes to answers), "task" creates a task whose
// tasks/result is "done"; any other call answers "ok".
func serveScripted(r io.Reader, w io.Writer, answers chan<- string) {
	in := bufio.NewScanner(r)
	send := func(format string, a ...any) bool {
		_, err := fmt.Fprintf(w, format+"\n", a...)
		return err == nil
	}
	var asking json.RawMessage // the call that waits for the client's answer
	for in.Scan() {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(in.Bytes(), &msg) != nil || msg.ID == nil {
			continue // a notification
		}
		res := `{"content":[{"type":"text","text":"ok"}]}`
		switch msg.Method {
		case "": // the client's answer to the ping
			answers <- in.Text()
			if asking == nil {
				continue
			}
			msg.ID, asking = asking, nil
		case "initialize":
			res = `{"protocolVersion":"` + childProtocolVersion + `","capabilities":{"tools":{"listChanged":true},"tasks":{"requests":{"tools":{"call":{}}}}},"serverInfo":{"name":"scripted","version":"1"}}`
		case "tools/list":
			res = `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`
		case "tasks/get":
			res = `{"taskId":"t1","status":"working"}`
		case "tasks/result":
			res = `{"content":[{"type":"text","text":"done"}]}`
		case "tools/call":
			switch msg.Params.Name {
			case "notify":
				if !send(`{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`) {
					return
				}
			case "ask":
				asking = msg.ID
				if !send(`{"jsonrpc":"2.0","id":"srv-1","method":"ping"}`) {
					return
				}
				continue
			case "task":
				res = `{"task":{"taskId":"t1","status":"working"}}`
			}
		}
		if !send(`{"jsonrpc":"2.0","id":%s,"result":%s}`, msg.ID, res) {
			return
		}
	}
}

// TestClientGoroutinePanics: a panic injected into each kind of the
// client's guarded goroutines ends that server connection (or fails that
// start), is logged once with its stack, and the server comes back after
// the backoff; the test binary, the bridge's process, lives on.
func TestClientGoroutinePanics(t *testing.T) {
	ctx := context.Background()
	useTools := func(c *Client) error { _, err := c.Tools(ctx); return err }
	call := func(tool string) func(*Client) error {
		return func(c *Client) error { _, err := c.Call(ctx, tool, nil, 5*time.Second, "test", nil); return err }
	}
	const exitErr = "Server 'scripted' exited during the call (ended by an internal error (see the bridge's log))"
	for _, tc := range []struct {
		site    string
		first   func(*Client) error // what reaches the site
		wantErr string              // the error first gets; "" for none
		// mayFail: first may also get exitErr, when the connection's end
		// came before the answer it was waiting for.
		mayFail bool
	}{
		{site: "start", first: useTools, wantErr: "Server 'scripted' failed to start: internal error (see the bridge's log)"},
		{site: "connect", first: useTools, wantErr: "Server 'scripted' failed to start: internal error (see the bridge's log)"},
		{site: "initialize", first: useTools, wantErr: "Server 'scripted' failed to start: ended by an internal error (see the bridge's log)"},
		{site: "watch", first: useTools},
		{site: "refresh", first: call("notify")},
		{site: "notification", first: call("notify"), mayFail: true},
		{site: "relay", first: call("ask"), mayFail: true}, // its answer: TestRelayPanicAnswers
		{site: "tasks", first: func(c *Client) error {
			_, err := c.CallTask(ctx, "task", nil, 5*time.Second, "test", nil)
			return err
		}, wantErr: exitErr},
	} {
		t.Run(tc.site, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := newScriptedServers()
				hook := newPanicOnce(tc.site)
				logs := &logBuf{}
				// A disk catalog, so nothing starts before the first use.
				deps := &ClientDeps{StartTimeout: 5 * time.Second, CallTimeout: 5 * time.Second, Store: knownStore{},
					OnTools: func(string, string, []ToolInfo) {}, Log: zerolog.New(logs), dial: p.dial, panicAt: hook.hook}
				c := NewClient(ServerSpec{Name: "scripted", Type: "stdio", Hash: "s"}, deps)
				sup := quietSupervisor("client-test")
				sup.Add(c)
				runCtx, stop := context.WithCancel(ctx)
				errc := sup.ServeBackground(runCtx)
				defer func() {
					stop()
					<-errc
					p.wg.Wait()
				}()

				err := tc.first(c)
				switch {
				case tc.mayFail && err != nil && strings.HasPrefix(err.Error(), exitErr):
				case tc.wantErr == "" && err != nil:
					t.Fatalf("%v, want no error", err)
				case tc.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.wantErr)):
					t.Fatalf("%v, want %q", err, tc.wantErr)
				}
				<-hook.fired
				synctest.Wait() // the connection ended and the client took it in
				before := p.all()
				for i, conn := range before {
					if !isClosed(conn.closing) {
						t.Errorf("connection %d is still open after the panic", i+1)
					}
				}
				if c.State().Ready {
					t.Error("the client says ready after the panic")
				}

				if _, err := c.Call(ctx, "echo", nil, 5*time.Second, "test", nil); err != nil {
					t.Fatalf("call after the panic: %v", err)
				}
				after := p.all()
				if len(after) != len(before)+1 {
					t.Fatalf("%d connections after the call, want one more than the %d before", len(after), len(before))
				}
				var dialed time.Time
				for range after {
					dialed = <-p.dials
				}
				if got := dialed.Sub(time.Unix(0, hook.at.Load())); got != backoffStart {
					t.Errorf("the server came back %v after the panic, want %v (the backoff)", got, backoffStart)
				}
				checkLoggedOnce(t, logs, tc.site)
			})
		})
	}
}

// TestRelayPanicAnswers: a relay handler that panicked still answers the
// server's request (-32603) and ends the connection. (Whether the answer
// reaches the server races with the connection's end.)
func TestRelayPanicAnswers(t *testing.T) {
	hook := newPanicOnce("relay")
	logs := &logBuf{}
	conn := &serverConn{name: "fake", done: make(chan struct{}), log: zerolog.New(logs), panicAt: hook.hook}
	resp, err := conn.handleRequest(context.Background(), transport.JSONRPCRequest{ID: mcp.NewRequestId("srv-1"), Method: "ping"})
	if err != nil || resp == nil || resp.Error == nil || resp.Error.Code != mcp.INTERNAL_ERROR || resp.ID.Value() != "srv-1" {
		t.Errorf("answer %+v (%v), want -32603 for srv-1", resp, err)
	}
	if !isClosed(conn.done) || conn.exitDesc() != abortedDesc {
		t.Errorf("the connection is not ended (%q)", conn.exitDesc())
	}
	checkLoggedOnce(t, logs, "relay")
}

// TestLinkHandlerPanics: a panic in a handler of the sandbox's link (a
// request's goroutine, or the reader for a notification) answers the
// request with an internal error, ends the sandbox and the call in flight
// with it, and is logged once with its stack; the next call gets a fresh
// sandbox.
func TestLinkHandlerPanics(t *testing.T) {
	for _, tc := range []struct {
		site, onExec string
		reply        string // in the sandbox's reply; "" for none
	}{
		{site: "box request", onExec: `{"jsonrpc":"2.0","id":"r1","method":"list_servers","params":{}}` + "\n",
			reply: `"code":-32003`},
		{site: "box output", onExec: `{"jsonrpc":"2.0","method":"output","params":{"call":%d,"stream":"stdout","data":"x"}}` + "\n"},
	} {
		t.Run(tc.site, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := &pipeLauncher{script: func(n int64) boxScript {
					if n == 1 {
						return boxScript{onExec: tc.onExec}
					}
					return boxScript{}
				}}
				hook := newPanicOnce(tc.site)
				logs := &logBuf{}
				cfg := testConfig(l)
				cfg.Log, cfg.panicAt = zerolog.New(logs), hook.hook
				s := NewSession("p", cfg, nil, 0, "")
				ctx, cancel := context.WithCancel(context.Background())
				served := make(chan struct{})
				go func() {
					defer close(served)
					_ = s.Serve(ctx)
				}()
				defer func() {
					cancel()
					<-served
				}()

				got := execOnce(t, s)
				if got.Status != result.StatusError || !got.StateLost || got.LossReason != lossInternal ||
					!strings.Contains(got.Error, "internal error") {
					t.Errorf("the call in flight: %s %q, state lost %v (%q); want an error and the state lost to an internal error",
						got.Status, got.Error, got.StateLost, got.LossReason)
				}
				first := l.box(0)
				<-first.Exited()
				if first.ExitCode() != exitKilled {
					t.Errorf("the first sandbox exited with %d, want it killed", first.ExitCode())
				}
				replies := strings.Join(first.replies, "")
				if tc.reply != "" && (!strings.Contains(replies, tc.reply) || !strings.Contains(replies, `"id":"r1"`)) {
					t.Errorf("the sandbox got %q, want its request answered with %s", replies, tc.reply)
				}
				if tc.reply == "" && replies != "" {
					t.Errorf("the sandbox got %q for a notification, want nothing", replies)
				}

				if got := execOnce(t, s); got.Status != result.StatusSuccess || got.StateLost {
					t.Errorf("the next call: %s %q (state lost %v), want success in a fresh sandbox", got.Status, got.Error, got.StateLost)
				}
				if n := l.started.Load(); n != 2 {
					t.Errorf("%d sandboxes started, want 2", n)
				}
				checkLoggedOnce(t, logs, tc.site)
			})
		})
	}
}
