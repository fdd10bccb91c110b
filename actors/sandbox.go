package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/bridge-mcp/bridge/protocol"
	"github.com/bridge-mcp/bridge/protocol/printable"
	"github.com/bridge-mcp/bridge/protocol/result"
)

// SandboxCommand is how to start one sandbox process.
type SandboxCommand struct {
	Argv []string
	Name string // container name; "" for the local backend
	Dir  string // working directory of the process; "" inherits the bridge's
	// Release frees what the launcher reserved for this container (its id
	// map); called once, after the container is gone. nil for nothing.
	Release func()
	// LinkFD: the link is a socket the process gets as fd 3 (its stdout
	// then carries logs only); otherwise its stdin and stdout.
	LinkFD bool
}

// Launcher starts and removes sandbox processes; the engine implements it.
type Launcher interface {
	Command(session string) (SandboxCommand, error)
	// Remove force-removes a container by name, bounded by ctx.
	Remove(ctx context.Context, name string)
	// StartError explains a sandbox that exited before its ready frame;
	// retry asks for one more attempt (the launcher changed its settings).
	StartError(stderr string, exitCode int) (err error, retry bool)
}

// stopBound is how long a stopping sandbox may take before SIGKILL (TMO-4).
const stopBound = 3 * time.Second

// linkWriteBound is the longest one host write to a sandbox's stdin may
// take. A sandbox that reads nothing for that long (its supervisor stopped,
// or user code jams the link) is declared dead and killed; no host
// goroutine ever waits on the sandbox reading without this bound.
const linkWriteBound = 10 * time.Second

// Bounds on what sandbox→host requests may hold on the host at once: at most
// maxRunning are served, at most maxQueued more wait for a slot, and their
// params together stay within the request budget (requestBudget). A request
// beyond any bound is refused at once, without keeping its frame.
const (
	maxRunning = 32
	maxQueued  = 32
	// minRequestBudget is the request budget unless one frame is larger.
	minRequestBudget = 32 << 20
)

// maxErrorText caps the message of an error the host sends to the sandbox,
// and maxEcho caps sandbox-supplied text (a method name) quoted in one, so
// hostile frames cannot make the host's replies large.
const (
	maxErrorText = 8 << 10
	maxEcho      = 64
)

// SandboxConfig is what every sandbox of this process shares.
type SandboxConfig struct {
	Launcher     Launcher
	Router       RequestRouter
	Boot         protocol.BootParams
	MaxFrame     int
	MaxOutput    int
	StartTimeout time.Duration
	MemoryLabel  string // MCP_BRIDGE_MEMORY as configured, for the OOM message
	Log          zerolog.Logger
}

// sandbox is one container process and its link. Its goroutines (process
// waiter, stderr drain, jsonrpc2 reader, request handlers) are stopped and
// waited for by close.
type sandbox struct {
	cfg     *SandboxConfig
	name    string // container name
	session string
	child   *child
	proc    *process // child.proc
	// releaseCmd frees the launcher's reservation (SandboxCommand.Release)
	// once close is done.
	releaseCmd func()
	conn       *jsonrpc2.Conn
	// hangUp ends the host's side of the link politely (EOF to the box)
	// while its replies are still read: stdin's close, or the link
	// socket's write shutdown.
	hangUp func()
	log    zerolog.Logger
	stderr *tailBuffer // child.stderr

	readyOnce sync.Once
	ready     chan struct{} // closed by the ready frame
	info      protocol.ReadyParams
	// served is closed once a call has ended in it (markServed); the
	// sessions manager starts the next spare after that.
	served     chan struct{}
	servedOnce sync.Once

	exited    <-chan struct{} // closed when the process has exited
	firstExec atomic.Bool     // an exec frame was built for this sandbox (it carries the saved tools)
	active    atomic.Pointer[activeCall]
	jobs      jobScopes  // grants of the calls that started background jobs (jobs.go)
	drops     frameDrops // refused or dropped frames, logged as counts (drops.go)
	closeOnce sync.Once
	slots     chan struct{} // bounds concurrent sandbox requests (CON-3)
	admitted  chan struct{} // bounds running plus queued sandbox requests
	held      atomic.Int64  // params bytes of admitted requests, within budget
	budget    int64
	stalled   chan struct{} // closed when a write to stdin hit linkWriteBound
	stallOnce sync.Once
	watchPipe io.Closer // the watchdog's pipe, held open until close
	watchdog  *process  // removes the container when its pipe ends (close, or the bridge's death); nil when none
	spawned   time.Time
	wg        sync.WaitGroup
}

// activeCall is the state of the call a sandbox is running, shared with the
// link goroutines: output is appended under mu.
type activeCall struct {
	scope Scope

	mu        sync.Mutex
	output    []result.Chunk  // finished runs; the current run is in cur
	cur       strings.Builder // the run being appended to: linear in its size
	curStream string
	bytes     int
	limit     int // the host keeps at most this many bytes (2·C, TRN-3)
	truncated bool
	reset     bool
	media     media // images and progress (media.go)
}

func (a *activeCall) add(stream, data string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.media.noteOutput(data)
	if room := a.limit - a.bytes; len(data) > room {
		a.truncated = true
		data = data[:max(room, 0)]
	}
	if data == "" {
		return
	}
	a.bytes += len(data)
	if a.cur.Len() > 0 && a.curStream != stream {
		a.output = append(a.output, result.Chunk{Stream: a.curStream, Data: a.cur.String()})
		a.cur = strings.Builder{}
	}
	a.curStream = stream
	a.cur.WriteString(data)
}

func (a *activeCall) snapshot() ([]result.Chunk, bool, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := append([]result.Chunk(nil), a.output...)
	if a.cur.Len() > 0 {
		out = append(out, result.Chunk{Stream: a.curStream, Data: a.cur.String()})
	}
	return out, a.truncated, a.reset
}

// startSandbox spawns a sandbox process and writes its boot frame; it does
// not wait for the ready frame (waitReady does).
func startSandbox(cfg *SandboxConfig, session string) (*sandbox, error) {
	cmdSpec, err := cfg.Launcher.Command(session)
	if err != nil {
		return nil, err
	}
	if cmdSpec.Release == nil {
		cmdSpec.Release = func() {}
	}
	s := &sandbox{
		cfg: cfg, name: cmdSpec.Name, session: session, releaseCmd: cmdSpec.Release,
		log:      cfg.Log.With().Str("session", session).Str("container", cmdSpec.Name).Logger(),
		ready:    make(chan struct{}),
		served:   make(chan struct{}),
		slots:    make(chan struct{}, maxRunning),
		admitted: make(chan struct{}, maxRunning+maxQueued),
		budget:   int64(max(cfg.MaxFrame, minRequestBudget)),
		stalled:  make(chan struct{}),
	}
	cmd := exec.Command(cmdSpec.Argv[0], cmdSpec.Argv[1:]...)
	cmd.Dir = cmdSpec.Dir
	var link *net.UnixConn
	if cmdSpec.LinkFD {
		var boxEnd *os.File
		if link, boxEnd, err = socketLink(); err != nil {
			cmdSpec.Release()
			return nil, fmt.Errorf("sandbox: link: %w", err)
		}
		defer boxEnd.Close() // the CLI has its own copy once started
		cmd.ExtraFiles = []*os.File{boxEnd}
	}
	s.spawned = time.Now()
	// The CLI dies with the bridge (CLN-2); its own process group lets the
	// bridge kill it and anything it started.
	s.child, err = startChild(cmd, link != nil, s.log)
	if err != nil {
		if link != nil {
			link.Close()
		}
		cmdSpec.Release()
		return nil, fmt.Errorf("sandbox: start %s: %w", cmdSpec.Argv[0], err)
	}
	s.proc, s.stderr = s.child.proc, s.child.stderr
	var stream *protocol.LineStream
	if link != nil {
		stream = protocol.NewLineStream(link, link, multiCloser{link, s.child.stdin}, cfg.MaxFrame, s.log)
		s.hangUp = func() {
			_ = link.CloseWrite()
			_ = s.child.stdin.Close()
		}
	} else {
		stream = protocol.NewLineStream(s.child.stdout, s.child.stdin, multiCloser{s.child.stdin, s.child.stdout}, cfg.MaxFrame, s.log)
		s.hangUp = func() { _ = s.child.stdin.Close() }
	}
	stream.BoundWrites(linkWriteBound, func() { s.stallOnce.Do(func() { close(s.stalled) }) })
	stream.OnSkip(s.dropped)
	s.conn = jsonrpc2.NewConn(context.Background(), stream, s, jsonrpc2.SetLogger(linkLogger{s}))
	s.exited = s.proc.exited
	s.startWatchdog()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.watchLink()
	}()
	boot, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": protocol.MethodBoot, "params": cfg.Boot})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		// The boot frame may exceed the pipe buffer; writing it must not
		// block the caller. The container may take the whole start timeout
		// to read it; a failed write shows up as an early exit.
		_ = stream.WriteLine(append(boot, '\n'), cfg.StartTimeout)
	}()
	return s, nil
}

// socketLink returns the two ends of a sandbox's link socket: the host's,
// with write deadlines (BoundWrites), and the box's, for the CLI's fd 3.
func socketLink() (*net.UnixConn, *os.File, error) {
	host, box, err := protocol.SocketPair()
	if err != nil {
		return nil, nil, err
	}
	conn, err := net.FileConn(host) // a dup of the descriptor
	host.Close()
	if err != nil {
		box.Close()
		return nil, nil, err
	}
	return conn.(*net.UnixConn), box, nil
}

// removeArgver is implemented by launchers that can name the command that
// force-removes a container.
type removeArgver interface {
	RemoveArgv(name string) []string
}

// startWatchdog starts a small process outside the bridge's reach that
// removes the container when the bridge dies, however it dies: it waits for
// EOF on a pipe only the bridge holds. Code in the sandbox can stop the
// supervisor (same uid), so the container's own reaction to stdin EOF is
// not enough (CLN-2). close ends its pipe too: the watchdog then removes
// the container a second time (a no-op when it is gone), which covers a
// removal of the bridge's own that ran out of time; close waits for it.
func (s *sandbox) startWatchdog() {
	ra, ok := s.cfg.Launcher.(removeArgver)
	if !ok || s.name == "" {
		return
	}
	argv := ra.RemoveArgv(s.name)
	if argv == nil {
		return
	}
	r, w, err := os.Pipe()
	if err != nil {
		s.log.Debug().Err(err).Msg("no container watchdog")
		return
	}
	cmd := exec.Command("/bin/sh", append([]string{"-c", `read -r _ || exec "$@" >/dev/null 2>&1`, "sh"}, argv...)...)
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // no parent-death signal: it must outlive the bridge
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		s.log.Debug().Err(err).Msg("no container watchdog")
		return
	}
	p := &process{cmd: cmd, exited: make(chan struct{})}
	s.watchdog = p
	s.watchPipe = w
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		p.code = exitCode(cmd, cmd.Wait())
		close(p.exited)
	}()
}

// watchLink kills the sandbox when a write to its stdin stalled: the link is
// dead, and nothing may wait on it any more. It ends when the process exits.
func (s *sandbox) watchLink() {
	select {
	case <-s.stalled:
		s.log.Warn().Dur("bound", linkWriteBound).Msg("link: the sandbox stopped reading its stdin; killing it")
		s.kill()
	case <-s.exited:
	}
}

// linkStalled reports whether the link was declared dead by a stalled write.
func (s *sandbox) linkStalled() bool {
	select {
	case <-s.stalled:
		return true
	default:
		return false
	}
}

// multiCloser closes each of its members.
type multiCloser []io.Closer

func (m multiCloser) Close() error {
	var first error
	for _, c := range m {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// markServed records that a call has ended in the sandbox.
func (s *sandbox) markServed() { s.servedOnce.Do(func() { close(s.served) }) }

// waitReady waits for the ready frame, bounded by the start timeout.
func (s *sandbox) waitReady(ctx context.Context) (retry bool, err error) {
	timer := time.NewTimer(s.cfg.StartTimeout)
	defer timer.Stop()
	select {
	case <-s.ready:
		s.log.Debug().Dur("sinceSpawn", time.Since(s.spawned)).Str("python", printable.Log(s.info.Python)).Msg("sandbox ready")
		if !pythonAtLeast(s.info.Python, 3, 11) {
			return false, fmt.Errorf("Sandbox image has Python %s; 3.11+ is required", s.info.Python)
		}
		return false, nil
	case <-s.exited:
		s.stderr.waitDrained(time.Second)
		err, retry := s.cfg.Launcher.StartError(s.stderr.String(), s.proc.code)
		if err == nil {
			// A sandbox that exited is never ready, even when the launcher
			// changed its settings and asks for another start.
			err = fmt.Errorf("Sandbox exited with code %d before it was ready", s.proc.code)
		}
		return retry, err
	case <-timer.C:
		return false, fmt.Errorf("Sandbox did not become ready within %ds (MCP_BRIDGE_START_TIMEOUT)", int(s.cfg.StartTimeout/time.Second))
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

func pythonAtLeast(v string, major, minor int) bool {
	var a, b int
	if _, err := fmt.Sscanf(v, "%d.%d", &a, &b); err != nil {
		return false
	}
	return a > major || (a == major && b >= minor)
}

// alive reports whether the process is still running.
func (s *sandbox) alive() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// interrupt sends the interrupt frame for call without waiting for it: the
// write may wait behind a stalled link, for at most linkWriteBound, and the
// caller's own deadlines must keep running meanwhile. close waits for it.
func (s *sandbox) interrupt(call int64) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		_ = s.conn.Notify(context.Background(), protocol.MethodInterrupt, protocol.CallParams{Call: call})
	}()
}

// kill stops the sandbox at once (hard timeout, failed start, shutdown). The
// CLI's process group is killed first, so nothing can create the container
// any more; then the container is removed by name (CLN-4). Removing first
// would race with a container still being created.
func (s *sandbox) kill() {
	s.signalGroup(syscall.SIGKILL)
	s.waitExit(stopBound)
	ctx, cancel := context.WithTimeout(context.Background(), stopBound)
	defer cancel()
	s.cfg.Launcher.Remove(ctx, s.name)
}

// close stops the sandbox politely (stdin EOF, which the supervisor treats
// as a shutdown frame), else kills it; the container is always removed by
// name. It then waits for every goroutine of the sandbox. Nothing here waits
// on the sandbox reading: closing stdin ends any write in progress. A
// sandbox still starting is closed politely too: killing the CLI while it
// creates the container strands conmon and `runc init` outside podman's
// records.
func (s *sandbox) close() {
	s.closeOnce.Do(func() {
		polite := s.alive() && !s.linkStalled()
		if polite {
			wait := time.Second
			select {
			case <-s.ready:
			default:
				// Still starting: the container sees EOF once it runs.
				wait = stopBound
			}
			// The host's side only: the link keeps draining the box, so
			// the CLI never blocks on, or dies of, a closed pipe while it
			// finishes.
			s.hangUp()
			polite = s.waitExit(wait)
		}
		if polite {
			ctx, cancel := context.WithTimeout(context.Background(), stopBound)
			s.cfg.Launcher.Remove(ctx, s.name)
			cancel()
		} else {
			s.kill()
		}
		if !s.waitExit(stopBound) {
			s.signalGroup(syscall.SIGKILL)
			<-s.exited
		}
		// A grandchild may still hold the write ends; give the drains a
		// moment, then close the read ends so no goroutine stays blocked.
		s.child.release(time.Second)
		_ = s.conn.Close()
		if s.watchPipe != nil {
			_ = s.watchPipe.Close()
		}
		<-s.conn.DisconnectNotify()
		s.wg.Wait()
		s.reportDrops(0)
		// The container is removed (or its removal timed out and the
		// watchdog, which close waited for, tried once more).
		s.releaseCmd()
	})
}

func (s *sandbox) waitExit(d time.Duration) bool { return s.child.waitExit(d) }

func (s *sandbox) signalGroup(sig syscall.Signal) { s.proc.signalGroup(sig) }

// exitCode is the process's exit code; valid once exited is closed.
func (s *sandbox) exitCode() int { return s.proc.code }
