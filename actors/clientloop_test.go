package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/rs/zerolog"
)

// pipeServers is ClientDeps.dial for fake-time tests: every start serves an
// in-process MCP server over net.Pipe, so nothing waits on a real process
// or socket. Each start's connection is sent on conns.
type pipeServers struct {
	conns chan *serverConn
	wg    sync.WaitGroup
}

func newPipeServers() *pipeServers { return &pipeServers{conns: make(chan *serverConn, 16)} }

func (p *pipeServers) dial(_ context.Context, conn *serverConn) error {
	hostR, serverW := net.Pipe()
	serverR, hostW := net.Pipe()
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		servePipe(serverR, serverW)
	}()
	conn.tr = transport.NewIO(hostR, hostW, nil)
	conn.mc = client.NewClient(conn.tr)
	conn.cancel = func() {
		for _, c := range []net.Conn{hostR, hostW, serverR, serverW} {
			_ = c.Close()
		}
	}
	p.conns <- conn
	return conn.mc.Start(context.Background())
}

// servePipe is a minimal MCP server with one tool, echo, until r closes.
// (mcp-go's stdio server waits on a channel from outside the bubble, which
// synctest cannot see through.)
func servePipe(r io.Reader, w io.Writer) { serveScript(r, w, pipeReply) }

// pipeReply is servePipe's answer to each request.
func pipeReply(id json.RawMessage, method string) string {
	var res string
	switch method {
	case "initialize":
		res = `{"protocolVersion":"` + childProtocolVersion + `","capabilities":{"tools":{}},"serverInfo":{"name":"pipe","version":"1"}}`
	case "tools/list":
		res = `{"tools":[{"name":"echo","inputSchema":{"type":"object"}}]}`
	default:
		res = `{"content":[{"type":"text","text":"ok"}]}`
	}
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, id, res)
}

// runPipeClient runs a client actor over p under a supervisor until the
// returned stop is called; it must be called inside the bubble.
func runPipeClient(p *pipeServers, idle time.Duration) (*Client, func()) {
	deps := &ClientDeps{StartTimeout: 5 * time.Second, CallTimeout: 5 * time.Second, IdleTimeout: idle,
		Store: noStore{}, OnTools: func(string, string, []ToolInfo) {}, Log: zerolog.Nop(), dial: p.dial}
	c := NewClient(ServerSpec{Name: "pipe", Type: "stdio", Hash: "p"}, deps)
	sup := quietSupervisor("client-test")
	sup.Add(c)
	ctx, cancel := context.WithCancel(context.Background())
	errc := sup.ServeBackground(ctx)
	return c, func() {
		cancel()
		<-errc
		p.wg.Wait()
	}
}

// TestClientBackoffAfterCrash: a server that crashes is restarted after
// 500 ms, then 1 s, then 2 s: the backoff doubles with each crash of a
// server that never served a call (PXY-3).
func TestClientBackoffAfterCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeServers()
		c, stop := runPipeClient(p, 0)
		defer stop()
		if _, err := c.Tools(context.Background()); err != nil {
			t.Fatal(err)
		}
		conn := <-p.conns
		for _, want := range []time.Duration{500 * time.Millisecond, time.Second, 2 * time.Second} {
			crashed := time.Now()
			conn.markDone("crashed")
			conn = <-p.conns
			if got := time.Since(crashed); got != want {
				t.Errorf("restarted %v after the crash, want %v", got, want)
			}
			synctest.Wait() // the start completes: no time passes
			if !c.State().Ready {
				t.Fatalf("the restart after %v did not come up", want)
			}
		}
		if s := c.State(); s.Failures != 3 || !s.Ready {
			t.Errorf("state after three crashes and restarts: %+v, want 3 failures and ready", s)
		}
	})
}

// TestClientStopsIdleServer: a server unused for the idle timeout is
// stopped at the first idle check after it, and a use restarts it.
func TestClientStopsIdleServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPipeServers()
		const idle = 2 * time.Second
		c, stop := runPipeClient(p, idle)
		defer stop()
		used := time.Now()
		if _, err := c.Tools(context.Background()); err != nil {
			t.Fatal(err)
		}
		conn := <-p.conns
		<-conn.closing
		if got, check := time.Since(used), idle/4; got <= idle || got > idle+check {
			t.Errorf("stopped %v after the last use, want within (%v, %v]", got, idle, idle+check)
		}
		// The client publishes its state after it starts closing the
		// connection: wait until it has nothing left to do.
		synctest.Wait()
		if c.State().Ready {
			t.Error("state still says ready after the idle stop")
		}
		if _, err := c.Tools(context.Background()); err != nil {
			t.Fatalf("use after the idle stop: %v", err)
		}
		if next := <-p.conns; next == conn {
			t.Error("the use after the idle stop got the stopped connection")
		}
	})
}
