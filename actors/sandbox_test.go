package actors

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/actors/childproc"
	"github.com/bridge-mcp/bridge/protocol"
	"github.com/bridge-mcp/bridge/protocol/result"
)

// procBox is a test backend's sandbox: argv as a local child speaking the
// link on its stdin and stdout. remove stands for the container's removal.
type procBox struct {
	*childproc.Linked
	name   string
	remove func(ctx context.Context)
}

func (b *procBox) Name() string               { return b.name }
func (b *procBox) Link() Link                 { return b.Linked.Link() }
func (b *procBox) Remove(ctx context.Context) { b.remove(ctx) }

var _ Sandbox = (*procBox)(nil)

// startProcBox starts argv as a procBox.
func startProcBox(argv []string, name string, remove func(ctx context.Context)) (Sandbox, error) {
	l, err := childproc.StartLinked(exec.Command(argv[0], argv[1:]...), false, zerolog.Nop())
	if err != nil {
		return nil, err
	}
	return &procBox{Linked: l, name: name, remove: remove}, nil
}

// pipeLauncher is a backend with no local process, as a pod backend would
// be: each sandbox is a goroutine speaking the link over net.Pipe. It
// counts what the sandbox actor asked of its sandboxes.
type pipeLauncher struct {
	started, removed, released atomic.Int64
}

func (l *pipeLauncher) Start(ctx context.Context, session string) (Sandbox, error) {
	host, box := net.Pipe()
	b := &pipeBox{l: l, name: fmt.Sprintf("pipe-%s-%d", session, l.started.Add(1)), host: host, box: box, exited: make(chan struct{})}
	go b.serve()
	return b, nil
}

func (l *pipeLauncher) StartError(logs string, code int) (error, bool) {
	return fmt.Errorf("pipe sandbox ended with %d", code), false
}

// pipeBox answers the boot frame with ready and every exec with success;
// it ends when its end of the pipe closes (HangUp, Kill) or the host's does.
type pipeBox struct {
	l         *pipeLauncher
	name      string
	host, box net.Conn
	exited    chan struct{}
}

func (b *pipeBox) serve() {
	defer close(b.exited)
	defer b.box.Close()
	r := bufio.NewReader(b.box)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			return
		}
		var frame struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(line, &frame)
		var reply string
		switch frame.Method {
		case protocol.MethodBoot:
			reply = `{"jsonrpc":"2.0","method":"ready","params":{"python":"3.12.0"}}`
		case protocol.MethodExec:
			reply = `{"jsonrpc":"2.0","id":` + string(frame.ID) + `,"result":{"outcome":"ok","exitCode":0,"truncated":false,"outputBytes":0,"reset":false}}`
		default:
			continue
		}
		if _, err := b.box.Write([]byte(reply + "\n")); err != nil {
			return
		}
	}
}

func (b *pipeBox) Name() string                   { return b.name }
func (b *pipeBox) Link() Link                     { return b.host }
func (b *pipeBox) HangUp()                        { _ = b.box.Close() }
func (b *pipeBox) Exited() <-chan struct{}        { return b.exited }
func (b *pipeBox) ExitCode() int                  { return 0 }
func (b *pipeBox) Logs(wait time.Duration) string { return "" }
func (b *pipeBox) Kill()                          { _ = b.box.Close() }
func (b *pipeBox) Remove(ctx context.Context)     { b.l.removed.Add(1) }
func (b *pipeBox) Release() {
	<-b.exited
	b.l.released.Add(1)
}

// TestBackendWithoutProcess: the sandbox actor runs a call on a backend
// that has no local process and no argv, and at shutdown removes and
// releases every sandbox it started (the spare too), each released once.
func TestBackendWithoutProcess(t *testing.T) {
	l := &pipeLauncher{}
	t.Cleanup(func() { // runs after the sessions stopped
		n := l.started.Load()
		if n < 1 || l.released.Load() != n || l.removed.Load() < n {
			t.Errorf("started %d sandboxes, removed %d times, released %d; want each removed and released once", n, l.removed.Load(), l.released.Load())
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := startSessions(t, testConfig(l), 2)
	s, err := m.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	req := newRequest(ctx, 10*time.Second)
	if !s.Exec(ctx, req) {
		t.Fatal("Exec refused")
	}
	select {
	case got := <-req.Reply:
		if got.Status != result.StatusSuccess {
			t.Errorf("got %s %q, want success", got.Status, got.Error)
		}
	case <-ctx.Done():
		t.Fatal("no reply")
	}
}
