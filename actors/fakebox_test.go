package actors

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bridge-mcp/bridge/protocol"
)

// pipeLauncher is a backend with no local process, as a pod backend would
// be: each sandbox is a goroutine speaking the link over net.Pipe. Nothing
// waits on a real process or the wall clock, so tests run it under
// testing/synctest. It counts what the sandbox actor asked of its
// sandboxes.
type pipeLauncher struct {
	// script gives the behaviour of the n-th sandbox started (from 1); nil
	// is a box that answers everything at once.
	script func(n int64) boxScript
	// gate, when set, holds every Remove until it is closed or Remove's
	// context ends, as a slow container removal would.
	gate chan struct{}
	// retry: StartError asks for another start.
	retry bool

	started, removed, released atomic.Int64

	mu     sync.Mutex
	starts []time.Time // when each sandbox was started, in order
	boxes  []*pipeBox  // every sandbox started, in order
}

// boxScript is how one fake sandbox behaves.
type boxScript struct {
	// noStart: Start fails with this error; no sandbox exists.
	noStart error
	// exit, when not 0, is the code the box exits with at once, before it
	// reads its boot frame (a container that fails to start).
	exit int
	// neverReady: the box reads its boot frame and says nothing more.
	neverReady bool
	// execTime is how long each exec runs before its reply.
	execTime time.Duration
	// stubborn: the box ignores HangUp (EOF on its link) and, after its
	// first exec reply, stops reading its link; only Kill ends it.
	stubborn bool
	// before is written ahead of each exec reply (frames with their
	// '\n', "%d" standing for the exec's call); replyOutput is the JSON
	// of the reply's output member, when not empty.
	before, replyOutput string
	// onExec, when set, is written instead of each exec reply (frames
	// with their '\n', "%d" standing for the exec's call): the box then
	// reads on, keeping the replies the host sends it (pipeBox.replies),
	// as a cell waiting on a tool would.
	onExec string
	// forgets: the box keeps no server entries, so an exec frame that
	// names one by digest (cached) is answered with CodeStaleServers.
	forgets bool
}

func (l *pipeLauncher) Start(ctx context.Context, session string) (Sandbox, error) {
	var script boxScript
	if l.script != nil {
		script = l.script(l.started.Load() + 1)
	}
	if script.noStart != nil {
		return nil, script.noStart
	}
	n := l.started.Add(1)
	host, box := net.Pipe()
	b := &pipeBox{
		l: l, script: script, name: fmt.Sprintf("pipe-%s-%d", session, n), host: host, box: box,
		exited: make(chan struct{}), killed: make(chan struct{}),
	}
	l.mu.Lock()
	l.starts = append(l.starts, time.Now())
	l.boxes = append(l.boxes, b)
	l.mu.Unlock()
	go b.serve()
	return b, nil
}

// startTimes returns when each sandbox was started so far.
func (l *pipeLauncher) startTimes() []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.starts...)
}

// box returns the i-th sandbox started (from 0).
func (l *pipeLauncher) box(i int) *pipeBox {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.boxes[i]
}

func (l *pipeLauncher) StartError(logs string, code int) (error, bool) {
	if l.retry {
		return nil, true
	}
	return fmt.Errorf("pipe sandbox ended with %d", code), false
}

// pipeBox plays the sandbox side of the link protocol as its script says:
// the ready frame for the boot frame, a success reply for each exec. It
// ends when it is killed, or (unless stubborn) when either end of the pipe
// closes.
type pipeBox struct {
	l         *pipeLauncher
	script    boxScript
	name      string
	host, box net.Conn
	exited    chan struct{}
	code      int       // written before exited is closed
	endedAt   time.Time // when it ended; written before exited is closed
	killed    chan struct{}
	killOnce  sync.Once
	// replies are the reply frames the host sent; written by serve, read
	// once exited is closed.
	replies []string
	// execServers are the servers param of each exec frame, as sent.
	mu          sync.Mutex
	execServers []string
}

// servers returns the servers param of each exec frame so far.
func (b *pipeBox) servers() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.execServers...)
}

// exitKilled is the exit code of a killed box, as for SIGKILL.
const exitKilled = 137

func (b *pipeBox) serve() {
	defer close(b.exited)
	defer func() { b.endedAt = time.Now() }()
	defer b.box.Close()
	if b.script.exit != 0 {
		b.code = b.script.exit
		return
	}
	r := bufio.NewReader(b.box)
	for {
		line, err := r.ReadBytes('\n')
		if err != nil {
			b.endRead()
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
			if b.script.neverReady {
				b.waitKill()
				return
			}
			reply = `{"jsonrpc":"2.0","method":"ready","params":{"python":"3.12.0"}}`
		case protocol.MethodExec:
			var ps struct {
				Params struct {
					Servers json.RawMessage `json:"servers"`
				} `json:"params"`
			}
			_ = json.Unmarshal(line, &ps)
			b.mu.Lock()
			b.execServers = append(b.execServers, string(ps.Params.Servers))
			b.mu.Unlock()
			if b.script.forgets && bytes.Contains(ps.Params.Servers, []byte(`"cached":true`)) {
				reply = fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":%d,"message":"not kept"}}`, frame.ID, protocol.CodeStaleServers)
				break
			}
			if b.script.onExec != "" {
				var p struct {
					Params struct{ Call int64 } `json:"params"`
				}
				_ = json.Unmarshal(line, &p)
				if _, err := fmt.Fprintf(b.box, b.script.onExec, p.Params.Call); err != nil {
					b.endRead()
					return
				}
				continue
			}
			select {
			case <-time.After(b.script.execTime):
			case <-b.killed:
				b.code = exitKilled
				return
			}
			var output string
			if b.script.replyOutput != "" {
				output = `,"output":` + b.script.replyOutput
			}
			var p struct {
				Params struct{ Call int64 } `json:"params"`
			}
			_ = json.Unmarshal(line, &p)
			if b.script.before != "" {
				reply = fmt.Sprintf(b.script.before, p.Params.Call)
			}
			reply += `{"jsonrpc":"2.0","id":` + string(frame.ID) +
				`,"result":{"outcome":"ok","exitCode":0,"truncated":false,"outputBytes":0,"reset":false` + output + `}}`
		case "":
			if frame.ID != nil {
				b.replies = append(b.replies, string(line))
			}
			continue
		default:
			continue
		}
		if _, err := b.box.Write([]byte(reply + "\n")); err != nil {
			b.endRead()
			return
		}
		if b.script.stubborn && frame.Method == protocol.MethodExec {
			b.waitKill()
			return
		}
	}
}

// endRead ends a box whose link closed: killed, hung up, or the host's end
// closed.
func (b *pipeBox) endRead() {
	if isClosed(b.killed) {
		b.code = exitKilled
	}
}

// waitKill holds the box, reading nothing, until it is killed.
func (b *pipeBox) waitKill() {
	<-b.killed
	b.code = exitKilled
}

func (b *pipeBox) Name() string { return b.name }
func (b *pipeBox) Link() Link   { return b.host }
func (b *pipeBox) HangUp() {
	if !b.script.stubborn && !b.script.neverReady {
		_ = b.box.Close() // the box reads EOF and ends
	}
}
func (b *pipeBox) Exited() <-chan struct{}        { return b.exited }
func (b *pipeBox) ExitCode() int                  { return b.code }
func (b *pipeBox) Logs(wait time.Duration) string { return "" }
func (b *pipeBox) Kill() {
	b.killOnce.Do(func() {
		close(b.killed)
		_ = b.box.Close()
	})
}

func (b *pipeBox) Remove(ctx context.Context) {
	if b.l.gate != nil {
		select {
		case <-b.l.gate:
		case <-ctx.Done():
		}
	}
	b.l.removed.Add(1)
}

func (b *pipeBox) Release() {
	<-b.exited
	_ = b.host.Close()
	b.l.released.Add(1)
}

var _ Sandbox = (*pipeBox)(nil)

// errNoSandbox is the start error of a pipeLauncher with no sandbox.
var errNoSandbox = errors.New("no sandbox in this test")

// noSandbox is a script whose every start fails.
func noSandbox(int64) boxScript { return boxScript{noStart: errNoSandbox} }
