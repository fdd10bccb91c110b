package actors

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
)

// SandboxCommand is how to start one sandbox process.
type SandboxCommand struct {
	Argv []string
	Name string // container name; "" for the local backend
	Dir  string // working directory of the process; "" inherits the bridge's
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
	proc    *process
	conn    *jsonrpc2.Conn
	log     zerolog.Logger
	stderr  *tailBuffer

	readyOnce sync.Once
	ready     chan struct{} // closed by the ready frame
	info      protocol.ReadyParams

	exited    <-chan struct{} // closed when the process has exited
	active    atomic.Pointer[activeCall]
	killed    atomic.Bool // the bridge removed it on purpose
	closeOnce sync.Once
	slots     chan struct{} // bounds concurrent sandbox requests (CON-3)
	readers   []io.Closer   // read ends of stdout and stderr, closed by close
	stdin     io.Closer     // the container's stdin; closing it is the polite stop
	spawned   time.Time
	wg        sync.WaitGroup
}

// activeCall is the state of the call a sandbox is running, shared with the
// link goroutines: output is appended under mu.
type activeCall struct {
	scope Scope

	mu        sync.Mutex
	output    []Chunk
	bytes     int
	limit     int // the host keeps at most this many bytes (2·C, TRN-3)
	truncated bool
	reset     bool
}

func (a *activeCall) add(stream, data string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if room := a.limit - a.bytes; len(data) > room {
		a.truncated = true
		data = data[:max(room, 0)]
	}
	if data == "" {
		return
	}
	a.bytes += len(data)
	if n := len(a.output); n > 0 && a.output[n-1].Stream == stream {
		a.output[n-1].Data += data
		return
	}
	a.output = append(a.output, Chunk{Stream: stream, Data: data})
}

func (a *activeCall) snapshot() ([]Chunk, bool, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]Chunk(nil), a.output...), a.truncated, a.reset
}

// startSandbox spawns a sandbox process and writes its boot frame; it does
// not wait for the ready frame (waitReady does).
func startSandbox(cfg *SandboxConfig, session string) (*sandbox, error) {
	cmdSpec, err := cfg.Launcher.Command(session)
	if err != nil {
		return nil, err
	}
	s := &sandbox{
		cfg: cfg, name: cmdSpec.Name, session: session,
		log:    cfg.Log.With().Str("session", session).Str("container", cmdSpec.Name).Logger(),
		stderr: newTailBuffer(50, 8<<10),
		ready:  make(chan struct{}),
		slots:  make(chan struct{}, 32),
	}
	cmd := exec.Command(cmdSpec.Argv[0], cmdSpec.Argv[1:]...)
	cmd.Dir = cmdSpec.Dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	// Own the read ends: exec.Cmd.Wait would close StdoutPipe readers and
	// could drop the last frames the sandbox wrote before exiting.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	s.readers = []io.Closer{outR, errR}
	s.stdin = stdin
	stream := protocol.NewLineStream(outR, stdin, multiCloser{stdin, outR}, cfg.MaxFrame, s.log)
	s.conn = jsonrpc2.NewConn(context.Background(), stream, s, jsonrpc2.SetLogger(zerologPrintf{s.log}))
	s.spawned = time.Now()
	// The CLI dies with the bridge (CLN-2); its own process group lets the
	// bridge kill it and anything it started.
	s.proc, err = startProcess(cmd)
	outW.Close()
	errW.Close()
	if err != nil {
		s.conn.Close()
		errR.Close()
		return nil, fmt.Errorf("sandbox: start %s: %w", cmdSpec.Argv[0], err)
	}
	s.exited = s.proc.exited
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.stderr.drain(errR, s.log)
	}()
	boot, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": protocol.MethodBoot, "params": cfg.Boot})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		// The boot frame may exceed the pipe buffer; writing it must not
		// block the caller. A failed write shows up as an early exit.
		_, _ = stdin.Write(append(boot, '\n'))
	}()
	return s, nil
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

// waitReady waits for the ready frame, bounded by the start timeout.
func (s *sandbox) waitReady(ctx context.Context) (retry bool, err error) {
	timer := time.NewTimer(s.cfg.StartTimeout)
	defer timer.Stop()
	select {
	case <-s.ready:
		s.log.Debug().Dur("sinceSpawn", time.Since(s.spawned)).Str("python", s.info.Python).Msg("sandbox ready")
		if !pythonAtLeast(s.info.Python, 3, 11) {
			return false, fmt.Errorf("Sandbox image has Python %s; 3.11+ is required", s.info.Python)
		}
		return false, nil
	case <-s.exited:
		s.stderr.waitDrained(time.Second)
		err, retry := s.cfg.Launcher.StartError(s.stderr.String(), s.proc.code)
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

func (s *sandbox) interrupt(call int64) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.conn.Notify(ctx, protocol.MethodInterrupt, protocol.CallParams{Call: call})
}

// kill stops the sandbox at once (hard timeout, failed start, shutdown). The
// CLI's process group is killed first, so nothing can create the container
// any more; then the container is removed by name (CLN-4). Removing first
// would race with a container still being created.
func (s *sandbox) kill() {
	s.killed.Store(true)
	s.signalGroup(syscall.SIGKILL)
	s.waitExit(stopBound)
	ctx, cancel := context.WithTimeout(context.Background(), stopBound)
	defer cancel()
	s.cfg.Launcher.Remove(ctx, s.name)
}

// close stops the sandbox politely (shutdown frame when it is up, stdin
// EOF), else kills it; the container is always removed by name. It then
// waits for every goroutine of the sandbox. A sandbox still starting is
// closed politely too: killing the CLI while it creates the container
// strands conmon and `runc init` outside podman's records.
func (s *sandbox) close() {
	s.closeOnce.Do(func() {
		s.killed.Store(true)
		polite := s.alive()
		if polite {
			wait := time.Second
			select {
			case <-s.ready:
				ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
				_ = s.conn.Notify(ctx, protocol.MethodShutdown, struct{}{})
				cancel()
			default:
				// Still starting: the container sees EOF once it runs.
				wait = stopBound
			}
			// stdin only: the link keeps draining stdout, so the CLI never
			// blocks on, or dies of, a closed pipe while it finishes.
			_ = s.stdin.Close()
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
		s.stderr.waitDrained(time.Second)
		_ = s.conn.Close()
		for _, r := range s.readers {
			_ = r.Close()
		}
		<-s.conn.DisconnectNotify()
		s.wg.Wait()
	})
}

func (s *sandbox) waitExit(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-s.exited:
		return true
	case <-t.C:
		return false
	}
}

func (s *sandbox) signalGroup(sig syscall.Signal) { s.proc.signalGroup(sig) }

// exitCode is the process's exit code; valid once exited is closed.
func (s *sandbox) exitCode() int { return s.proc.code }

// Handle implements jsonrpc2.Handler. Notifications are handled in order on
// the reader goroutine; requests run concurrently, bounded by slots.
func (s *sandbox) Handle(ctx context.Context, conn *jsonrpc2.Conn, req *jsonrpc2.Request) {
	if req.Notif {
		s.handleNotification(req)
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		select {
		case s.slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		defer func() { <-s.slots }()
		result, err := s.serveRequest(ctx, req)
		if err != nil {
			var rpcErr *jsonrpc2.Error
			if !errors.As(err, &rpcErr) {
				rpcErr = LinkError(protocol.CodeServerError, protocol.KindServerError, err.Error())
			}
			_ = conn.ReplyWithError(ctx, req.ID, rpcErr)
			return
		}
		if err := conn.Reply(ctx, req.ID, result); err != nil && errors.Is(err, protocol.ErrFrameTooLarge) {
			_ = conn.ReplyWithError(ctx, req.ID, LinkError(protocol.CodeInvalidArguments, protocol.KindInvalidArguments, err.Error()))
		}
	}()
}

func (s *sandbox) handleNotification(req *jsonrpc2.Request) {
	switch req.Method {
	case protocol.MethodReady:
		var p protocol.ReadyParams
		if req.Params == nil || json.Unmarshal(*req.Params, &p) != nil {
			s.log.Warn().Msg("link: invalid ready frame dropped")
			return
		}
		s.readyOnce.Do(func() {
			s.info = p
			close(s.ready)
		})
	case protocol.MethodOutput:
		var p protocol.OutputParams
		if req.Params == nil || json.Unmarshal(*req.Params, &p) != nil ||
			(p.Stream != StreamStdout && p.Stream != StreamStderr) {
			s.log.Debug().Msg("link: invalid output frame dropped")
			return
		}
		a := s.active.Load()
		if a == nil || a.scope.Call != p.Call {
			s.log.Debug().Int64("call", p.Call).Int("bytes", len(p.Data)).Msg("link: output outside the active call discarded")
			return
		}
		a.add(p.Stream, p.Data)
	default:
		s.log.Debug().Str("method", req.Method).Msg("link: unknown notification dropped")
	}
}

func (s *sandbox) serveRequest(ctx context.Context, req *jsonrpc2.Request) (any, error) {
	if !knownBoxMethods[req.Method] {
		return nil, &jsonrpc2.Error{Code: protocol.CodeMethodNotFound, Message: fmt.Sprintf("Unknown method %q", req.Method)}
	}
	a := s.active.Load()
	if a == nil {
		return nil, LinkError(protocol.CodeNotAvailable, protocol.KindNotAvailable, "No run_python call is active in this session")
	}
	var params json.RawMessage
	if req.Params != nil {
		params = *req.Params
	}
	if req.Method == protocol.MethodReset {
		a.mu.Lock()
		a.reset = true
		a.mu.Unlock()
		return struct{}{}, nil
	}
	return s.cfg.Router.ServeSandbox(ctx, a.scope, req.Method, params)
}

var knownBoxMethods = map[string]bool{
	protocol.MethodListServers: true, protocol.MethodDiscoveredServers: true, protocol.MethodDescribeServer: true,
	protocol.MethodListTools: true, protocol.MethodCallTool: true, protocol.MethodQueryToolDocs: true,
	protocol.MethodSearchToolDocs: true, protocol.MethodSuggestTools: true, protocol.MethodReset: true,
	protocol.MethodMemoryGet: true, protocol.MethodMemoryPut: true, protocol.MethodMemoryDelete: true, protocol.MethodMemoryList: true,
	protocol.MethodSaveTool: true, protocol.MethodSavedTools: true, protocol.MethodDeleteTool: true,
}

// LinkError builds a link error with data.kind (LNK-6).
func LinkError(code int64, kind, msg string) *jsonrpc2.Error {
	e := &jsonrpc2.Error{Code: code, Message: msg}
	e.SetError(protocol.ErrorData{Kind: kind})
	return e
}

// tailBuffer keeps the last lines of a stream for error messages.
type tailBuffer struct {
	maxLines, maxBytes int
	mu                 sync.Mutex
	lines              []string
	drained            chan struct{}
}

func newTailBuffer(lines, bytes int) *tailBuffer {
	return &tailBuffer{maxLines: lines, maxBytes: bytes, drained: make(chan struct{})}
}

func (t *tailBuffer) drain(r io.Reader, log zerolog.Logger) {
	defer close(t.drained)
	buf := make([]byte, 32<<10)
	var partial string
	for {
		n, err := r.Read(buf)
		if n > 0 {
			text := partial + string(buf[:n])
			parts := strings.Split(text, "\n")
			partial = parts[len(parts)-1]
			for _, line := range parts[:len(parts)-1] {
				t.add(line)
				log.Debug().Str("stderr", line).Msg("sandbox stderr")
			}
		}
		if err != nil {
			if partial != "" {
				t.add(partial)
			}
			return
		}
	}
}

func (t *tailBuffer) add(line string) {
	if len(line) > t.maxBytes {
		line = line[:t.maxBytes]
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > t.maxLines {
		t.lines = t.lines[len(t.lines)-t.maxLines:]
	}
}

func (t *tailBuffer) waitDrained(d time.Duration) {
	select {
	case <-t.drained:
	case <-time.After(d):
	}
}

// String returns the kept lines, newest last, within maxBytes.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := strings.Join(t.lines, "\n")
	if len(out) > t.maxBytes {
		out = out[len(out)-t.maxBytes:]
	}
	return out
}

// zerologPrintf adapts zerolog to jsonrpc2.Logger.
type zerologPrintf struct{ log zerolog.Logger }

func (z zerologPrintf) Printf(format string, v ...any) {
	z.log.Debug().Msg(strings.TrimSpace(fmt.Sprintf(format, v...)))
}
