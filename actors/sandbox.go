package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/bridge-mcp/bridge/protocol"
	"github.com/bridge-mcp/bridge/protocol/printable"
	"github.com/bridge-mcp/bridge/protocol/result"
)

// Launcher is a sandbox backend: it starts sandboxes and explains those
// that end before they are ready. engine/container (podman, docker) and
// engine/local (tests only) implement it; how a sandbox runs (a local
// process, a container CLI's argv, a watchdog) is the backend's business.
type Launcher interface {
	// Start starts the sandbox of session. ctx bounds the start, not the
	// sandbox's life. On error nothing of the sandbox is left.
	Start(ctx context.Context, session string) (Sandbox, error)
	// StartError explains a sandbox that exited before its ready frame,
	// from its Logs and exit code; retry asks for one more attempt (the
	// backend changed its settings).
	StartError(logs string, exitCode int) (err error, retry bool)
}

// Sandbox is one started sandbox as its backend runs it: a process, or
// anything else that ends, can be killed and speaks the link. The sandbox
// actor owns it and decides when to hang up, kill and remove it; every
// wait on it has a deadline on the actor's side, except for its exit after
// Kill.
type Sandbox interface {
	// Name names the sandbox in logs (a container's name); "" for none.
	Name() string
	// Link is the host's end of the link; the same value on every call.
	Link() Link
	// HangUp ends the host's side of the link politely (EOF to the box,
	// which the box takes as a shutdown) while its replies are still read.
	HangUp()
	// Exited is closed when the sandbox has ended; ExitCode is valid then:
	// the box's exit code, 128+signal when it was signalled.
	Exited() <-chan struct{}
	ExitCode() int
	// Logs is the tail of what the sandbox (and its runtime) wrote outside
	// the link, after waiting up to wait for the rest of it once exited.
	Logs(wait time.Duration) string
	// Kill ends the sandbox at once, and whatever it started on the host.
	Kill()
	// Remove removes what a stopped sandbox leaves behind (a container),
	// bounded by ctx; a no-op when there is nothing. It may run twice.
	Remove(ctx context.Context)
	// Release frees what is left (descriptors, helpers, reserved ids) and
	// waits for the backend's goroutines; called once, after the sandbox
	// has exited and Remove ran.
	Release()
}

// Link is the host's end of a sandbox's link: newline-delimited JSON-RPC
// frames both ways. Close closes the host's end at once. Writes must honour
// SetWriteDeadline: a box that stops reading must never hold a host writer
// beyond linkWriteBound.
type Link interface {
	io.ReadWriteCloser
	SetWriteDeadline(t time.Time) error
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

	// Snapshots keeps sessions' snapshots (durable.go); nil: durability
	// is off. Durability is when sandboxes take them (Boot.Durability
	// says the same to the sandbox), Image names the image in them.
	Snapshots  SnapshotStore
	Durability string
	Image      string

	// panicAt injects panics into the link's handlers (guard.go) in tests;
	// nil in production.
	panicAt panicHook
}

// sandbox is one started sandbox (its backend's Sandbox) and its link.
// Its goroutines (jsonrpc2 reader, request handlers, link watch) and the
// backend's are stopped and waited for by close.
type sandbox struct {
	cfg     *SandboxConfig
	name    string // Sandbox.Name
	session string
	box     Sandbox
	conn    *jsonrpc2.Conn
	log     zerolog.Logger

	readyOnce sync.Once
	ready     chan struct{} // closed by the ready frame
	info      protocol.ReadyParams
	// served is closed once a call has ended in it (markServed); the
	// sessions manager starts the next spare after that.
	served     chan struct{}
	servedOnce sync.Once

	exited <-chan struct{} // box.Exited()
	// life is the context of the link's requests (serveRequest): close
	// ends it, so the inner calls still in flight (a job's, or an abandoned
	// call's) are cancelled upstream instead of running out their timeouts.
	life      context.Context
	endLife   context.CancelCauseFunc
	firstExec atomic.Bool // an exec frame was built for this sandbox (it carries the saved tools)
	kept      keptEntries // the server entries its worker keeps (grants.go)
	// execReplies gets the reply to the exec frame in flight (onRecv); a
	// session sends one exec at a time, and waits for its reply or the
	// link's end before the next.
	execReplies chan *jsonrpc2.Response
	active      atomic.Pointer[activeCall]
	// activeCh is closed and replaced whenever a call becomes active, for
	// the job calls that wait for one (approve.go); guarded by activeMu.
	activeMu  sync.Mutex
	activeCh  chan struct{}
	jobs      jobScopes  // grants of the calls that started background jobs (jobs.go)
	drops     frameDrops // refused or dropped frames, logged as counts (drops.go)
	closeOnce sync.Once
	slots     chan struct{} // bounds concurrent sandbox requests (CON-3)
	admitted  chan struct{} // bounds running plus queued sandbox requests
	refusing  chan struct{} // bounds refusals waiting on the link (refuse)
	held      atomic.Int64  // params bytes of admitted requests, within budget
	budget    int64
	stalled   chan struct{} // closed when a write to stdin hit linkWriteBound
	stallOnce sync.Once
	// broken is closed when one of the link's handlers panicked (fail):
	// the sandbox is killed as a stalled one is.
	broken    chan struct{}
	breakOnce sync.Once
	spawned   time.Time
	weight    cpuWeight            // its share of its principal's CPU weight (cpuweight.go)
	snap      durable              // its snapshot uploads and the snapshot it restores (durable.go)
	stream    *protocol.LineStream // the link's frames; data lines are written on it directly (durable.go)
	wg        sync.WaitGroup
}

// setActive makes a the active call (nil: none), waking the job calls
// that wait for one.
func (s *sandbox) setActive(a *activeCall) {
	s.active.Store(a)
	if a == nil {
		return
	}
	s.activeMu.Lock()
	defer s.activeMu.Unlock()
	if s.activeCh != nil {
		close(s.activeCh)
		s.activeCh = nil
	}
}

// activeChanged is closed when the next call becomes active.
func (s *sandbox) activeChanged() <-chan struct{} {
	s.activeMu.Lock()
	defer s.activeMu.Unlock()
	if s.activeCh == nil {
		s.activeCh = make(chan struct{})
	}
	return s.activeCh
}

// activeCall is the state of the call a sandbox is running, shared with the
// link goroutines: output is appended under mu.
type activeCall struct {
	scope Scope
	// ctx is the context of the call's requests: it ends with the call, so
	// an inner call the cell abandoned (interrupt, cancel, timeout) is
	// cancelled upstream.
	ctx context.Context

	mu        sync.Mutex
	output    []result.Chunk  // finished runs; the current run is in cur
	cur       strings.Builder // the run being appended to: linear in its size
	curStream string
	bytes     int
	limit     int // the host keeps at most this many bytes (2·C, TRN-3)
	truncated bool
	reset     bool
	media     media      // images and progress (media.go)
	asks      *approvals // the call's approvals (approve.go)
	notes     []string   // from the questions relayed (relay.go)
	// inflight labels the call's tool calls in flight by inner call key
	// (media.go's began and ended).
	inflight map[uint64]string

	// during is what inflight held when the call's deadline passed, for
	// its timeout result. Written and read by the call's goroutine only
	// (Session.await, then runCall).
	during []string
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

// startSandbox starts a sandbox through the backend and writes its boot
// frame; it does not wait for the ready frame (waitReady does).
func startSandbox(cfg *SandboxConfig, session string) (*sandbox, error) {
	spawned := time.Now()
	box, err := cfg.Launcher.Start(context.Background(), session)
	if err != nil {
		return nil, err
	}
	s := &sandbox{
		cfg: cfg, name: box.Name(), session: session, box: box,
		log:      cfg.Log.With().Str("session", session).Str("container", box.Name()).Logger(),
		ready:    make(chan struct{}),
		served:   make(chan struct{}),
		slots:    make(chan struct{}, maxRunning),
		admitted: make(chan struct{}, maxRunning+maxQueued),
		refusing: make(chan struct{}, maxRefusing),
		budget:   int64(max(cfg.MaxFrame, minRequestBudget)),
		stalled:  make(chan struct{}),
		broken:   make(chan struct{}),
		exited:   box.Exited(),
		spawned:  spawned,
	}
	link := box.Link()
	stream := protocol.NewLineStream(link, link, link, cfg.MaxFrame, s.log)
	stream.BoundWrites(linkWriteBound, func() { s.stallOnce.Do(func() { close(s.stalled) }) })
	stream.OnSkip(s.dropped)
	stream.OnData(s.onData)
	s.stream = stream
	// Not the link's context: jsonrpc2 closes the link when it ends, and
	// close hangs up politely first.
	s.life, s.endLife = context.WithCancelCause(context.Background())
	s.execReplies = make(chan *jsonrpc2.Response, 1)
	s.conn = jsonrpc2.NewConn(context.Background(), stream, s, jsonrpc2.SetLogger(linkLogger{s}), jsonrpc2.OnRecv(s.onRecv))
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.watchLink()
	}()
	boot, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": protocol.MethodBoot, "params": bootParams(cfg, link)})
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

// onRecv runs on the link's reader for every frame: the reply to an exec
// frame in flight (req is the request it answers, nil for a reply to none)
// goes to the call waiting for it.
func (s *sandbox) onRecv(req *jsonrpc2.Request, resp *jsonrpc2.Response) {
	if resp == nil || req == nil || req.Method != protocol.MethodExec {
		return
	}
	select {
	case s.execReplies <- resp:
	default: // cannot be: one exec at a time
	}
}

// watchLink kills the sandbox when a write to its stdin stalled (the link
// is dead, and nothing may wait on it any more) or a handler of its link
// panicked (fail). It ends when the process exits.
func (s *sandbox) watchLink() {
	select {
	case <-s.stalled:
		s.log.Warn().Dur("bound_ms", linkWriteBound).Msg("link: the sandbox stopped reading its stdin; killing it")
		s.kill()
	case <-s.broken:
		s.log.Warn().Msg("link: a handler panicked (logged above); killing the sandbox")
		s.kill()
	case <-s.exited:
	}
}

// fail ends the sandbox after a panic in one of its link's handlers
// (guard.go): what the panic left half done is not trusted, so the session
// starts afresh. watchLink kills the sandbox; the call in flight ends as
// one whose link was lost (linkLost), an idle session notes the loss at
// its next tick, and either way the next call gets a new sandbox.
func (s *sandbox) fail() { s.breakOnce.Do(func() { close(s.broken) }) }

// linkBroken reports whether fail ended the sandbox.
func (s *sandbox) linkBroken() bool {
	select {
	case <-s.broken:
		return true
	default:
		return false
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

// markServed records that a call has ended in the sandbox.
func (s *sandbox) markServed() { s.servedOnce.Do(func() { close(s.served) }) }

// waitReady waits for the ready frame, bounded by the start timeout.
func (s *sandbox) waitReady(ctx context.Context) (retry bool, err error) {
	timer := time.NewTimer(s.cfg.StartTimeout)
	defer timer.Stop()
	select {
	case <-s.ready:
		s.log.Debug().Dur("sinceSpawn_ms", time.Since(s.spawned)).Str("python", printable.Log(s.info.Python)).Msg("sandbox ready")
		if !pythonAtLeast(s.info.Python, 3, 11) {
			return false, fmt.Errorf("Sandbox image has Python %s; 3.11+ is required", s.info.Python)
		}
		return false, nil
	case <-s.exited:
		code := s.box.ExitCode()
		err, retry := s.cfg.Launcher.StartError(s.box.Logs(time.Second), code)
		if err == nil {
			// A sandbox that exited is never ready, even when the launcher
			// changed its settings and asks for another start.
			err = fmt.Errorf("Sandbox exited with code %d before it was ready", code)
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
// box is killed first (a container CLI's process group), so nothing can
// create the container any more; then it is removed (CLN-4). Removing first
// would race with a container still being created.
func (s *sandbox) kill() {
	s.box.Kill()
	s.waitExit(stopBound)
	ctx, cancel := context.WithTimeout(context.Background(), stopBound)
	defer cancel()
	s.box.Remove(ctx)
}

// close stops the sandbox politely (link EOF, which the supervisor treats
// as a shutdown frame), else kills it; the container is always removed. It
// then waits for every goroutine of the sandbox and its backend. Nothing
// here waits on the sandbox reading: hanging up ends any write in
// progress. A sandbox still starting is closed politely too: killing the
// CLI while it creates the container strands conmon and `runc init`
// outside podman's records.
func (s *sandbox) close() {
	s.closeOnce.Do(func() {
		s.endLife(errSandboxEnded)
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
			s.box.HangUp()
			polite = s.waitExit(wait)
		}
		if polite {
			ctx, cancel := context.WithTimeout(context.Background(), stopBound)
			s.box.Remove(ctx)
			cancel()
		} else {
			s.kill()
		}
		if !s.waitExit(stopBound) {
			s.box.Kill()
			<-s.exited
		}
		// The box is gone and removed (or its removal timed out, and the
		// backend tries once more before Release returns). Release closes
		// what the link readers may still block on.
		s.box.Release()
		_ = s.conn.Close()
		<-s.conn.DisconnectNotify()
		s.wg.Wait()
		s.endDurable()
		s.reportDrops(0)
	})
}

func (s *sandbox) waitExit(d time.Duration) bool { return waitClosed(s.exited, d) }

// exitCode is the box's exit code; valid once exited is closed.
func (s *sandbox) exitCode() int { return s.box.ExitCode() }
