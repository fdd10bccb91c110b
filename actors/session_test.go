package actors

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/thejerf/suture/v4"

	"github.com/bridge-mcp/bridge/protocol/result"
)

// fakeLauncher starts argv as every sandbox (none when argv is nil); Remove
// waits for gate (when set) or its context, and counts the calls that
// returned.
type fakeLauncher struct {
	argv     []string
	gate     chan struct{}
	n        atomic.Int64
	returned atomic.Int64
}

func (f *fakeLauncher) Start(ctx context.Context, session string) (Sandbox, error) {
	return f.start(session, func(int64) []string { return f.argv })
}

// start starts the sandbox argv gives for the number of this start.
func (f *fakeLauncher) start(session string, argv func(n int64) []string) (Sandbox, error) {
	if f.argv == nil {
		return nil, errors.New("no sandbox in this test")
	}
	n := f.n.Add(1)
	return startProcBox(argv(n), fmt.Sprintf("fake-%s-%d", session, n), f.remove)
}

func (f *fakeLauncher) remove(ctx context.Context) {
	if f.gate != nil {
		select {
		case <-f.gate:
		case <-ctx.Done():
		}
	}
	f.returned.Add(1)
}

func (f *fakeLauncher) StartError(stderr string, code int) (error, bool) {
	return fmt.Errorf("fake sandbox exited with code %d", code), false
}

// fakeSandboxScript answers the boot frame with ready and the first exec
// with success (echoing its random id), then stops reading (and ignores
// stdin EOF) until killed.
const fakeSandboxScript = `read -r boot
printf '%s\n' '{"jsonrpc":"2.0","method":"ready","params":{"python":"3.12.0"}}'
read -r exec
id=$(printf '%s' "$exec" | sed -n 's/.*"id":\("exec-[0-9a-f]*"\).*/\1/p')
printf '{"jsonrpc":"2.0","id":%s,"result":{"outcome":"ok","exitCode":0,"truncated":false,"outputBytes":0,"reset":false}}\n' "$id"
exec sleep 60`

func testConfig(l Launcher) *SandboxConfig {
	return &SandboxConfig{Launcher: l, MaxFrame: 1 << 20, MaxOutput: 1 << 10, StartTimeout: 2 * time.Second, Log: zerolog.Nop()}
}

// startSessions runs a sessions manager under its own supervisor until the
// test ends.
func startSessions(t *testing.T, cfg *SandboxConfig, maxSessions int) *Sessions {
	t.Helper()
	sup := quietSupervisor("sessions-test")
	m := NewSessions(cfg, sup, maxSessions, 0)
	sup.Add(m)
	serveUntilCleanup(t, sup)
	return m
}

// quietSupervisor is a supervisor that logs nothing.
func quietSupervisor(name string) *suture.Supervisor {
	return suture.New(name, suture.Spec{EventHook: func(suture.Event) {}})
}

// serveUntilCleanup runs sup until the test ends, and waits for it.
func serveUntilCleanup(t *testing.T, sup *suture.Supervisor) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := sup.ServeBackground(ctx)
	t.Cleanup(func() {
		cancel()
		<-errc
	})
}

func newRequest(ctx context.Context, timeout time.Duration) *ExecRequest {
	return &ExecRequest{Ctx: ctx, Code: "1", Timeout: timeout, Deadline: time.Now().Add(timeout), Reply: make(chan result.Result, 1)}
}

// TestEvictedSessionAnswersEveryCall: a caller that got a session just
// before it was evicted still gets exactly one reply; the evicted session
// is done and refuses to queue the call itself (issue 14).
func TestEvictedSessionAnswersEveryCall(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m := startSessions(t, testConfig(&fakeLauncher{}), 1)
	a, err := m.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Get(ctx, "b"); err != nil { // evicts the idle "a"
		t.Fatal(err)
	}
	select {
	case <-a.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the evicted session is not done")
	}
	req := newRequest(ctx, 5*time.Second)
	if !a.Exec(ctx, req) {
		t.Fatal("Exec refused a call while its context is live")
	}
	select {
	case got := <-req.Reply:
		if want := "no sandbox in this test"; got.Status != result.StatusError || got.Error != want {
			t.Errorf("got %s %q, want the error of a replacement session's start %q", got.Status, got.Error, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a call to the evicted session never got a reply")
	}
	select {
	case got := <-req.Reply:
		t.Fatalf("a second reply: %+v", got)
	default:
	}
}

// TestQueuedCallOwnDeadline: a queued call whose timeout is shorter than
// the one ahead of it times out at its own deadline, while the running call
// is still running (TMO-1, issue 14).
func TestQueuedCallOwnDeadline(t *testing.T) {
	cfg := testConfig(&fakeLauncher{argv: []string{"sleep", "30"}}) // never ready
	s := NewSession("q", cfg, nil, 0, "")
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
	first := newRequest(ctx, 20*time.Second)
	long := newRequest(ctx, 20*time.Second)
	short := newRequest(ctx, time.Second)
	for _, req := range []*ExecRequest{first, long, short} {
		if !s.Exec(ctx, req) {
			t.Fatal("Exec refused")
		}
	}
	select {
	case got := <-short.Reply:
		if got.Status != result.StatusTimeout {
			t.Errorf("short queued call: %s %q, want a timeout", got.Status, got.Error)
		}
	case got := <-first.Reply:
		t.Fatalf("the running call ended (%q) before the queued call with a 1 s timeout was answered", got.Error)
	}
	<-first.Reply
}

// TestEvictionDoesNotBlockManager: evicting a session whose sandbox takes
// long to stop does not stall the manager: the call that caused the
// eviction gets its session while that stop is still in progress (issue 14).
func TestEvictionDoesNotBlockManager(t *testing.T) {
	l := &fakeLauncher{argv: []string{"sh", "-c", fakeSandboxScript}, gate: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	m := startSessions(t, testConfig(l), 1)
	t.Cleanup(func() { close(l.gate) }) // runs before the manager stops
	a, err := m.Get(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	req := newRequest(ctx, 20*time.Second)
	a.Exec(ctx, req)
	if got := <-req.Reply; got.Status != result.StatusSuccess {
		t.Fatalf("call in a: %s %q", got.Status, got.Error)
	}
	before := l.returned.Load()
	if _, err := m.Get(ctx, "b"); err != nil { // evicts "a", whose container removal hangs
		t.Fatal(err)
	}
	if got := l.returned.Load(); got != before {
		t.Fatalf("Get returned only after the evicted sandbox's removal (%d removals returned); the manager waited for it", got-before)
	}
}

// slowFirstCallScript is fakeSandboxScript whose first call takes 600 ms.
const slowFirstCallScript = `read -r boot
printf '%s\n' '{"jsonrpc":"2.0","method":"ready","params":{"python":"3.12.0"}}'
read -r exec
sleep 0.6
id=$(printf '%s' "$exec" | sed -n 's/.*"id":\("exec-[0-9a-f]*"\).*/\1/p')
printf '{"jsonrpc":"2.0","id":%s,"result":{"outcome":"ok","exitCode":0,"truncated":false,"outputBytes":0,"reset":false}}\n' "$id"
exec sleep 60`

// TestSpareReplacedAfterFirstCall: the spare that replaces an adopted one
// starts once the adopted one has served its first call, not beside it
// (a container start slowed that call), and never with SingleUse.
func TestSpareReplacedAfterFirstCall(t *testing.T) {
	for _, single := range []bool{false, true} {
		t.Run(fmt.Sprintf("SingleUse=%v", single), func(t *testing.T) {
			l := &fakeLauncher{argv: []string{"sh", "-c", slowFirstCallScript}}
			sup := suture.New("sessions-test", suture.Spec{EventHook: func(suture.Event) {}})
			m := NewSessions(testConfig(l), sup, 4, 0)
			m.SingleUse = single
			sup.Add(m)
			ctx, cancel := context.WithCancel(context.Background())
			errc := sup.ServeBackground(ctx)
			defer func() {
				cancel()
				<-errc
			}()
			time.Sleep(300 * time.Millisecond) // the spare is ready
			s, err := m.Get(ctx, "a")
			if err != nil {
				t.Fatal(err)
			}
			req := newRequest(ctx, 10*time.Second)
			if !s.Exec(ctx, req) {
				t.Fatal("call not queued")
			}
			time.Sleep(300 * time.Millisecond)
			if n := l.n.Load(); n != 1 {
				t.Errorf("%d containers started while the adopted spare's first call ran; want 1", n)
			}
			if r := <-req.Reply; r.Status != result.StatusSuccess {
				t.Fatalf("call: %+v", r)
			}
			want := int64(2)
			if single {
				want = 1
				time.Sleep(spareDelay + 200*time.Millisecond)
			}
			deadline := time.Now().Add(5 * time.Second)
			for l.n.Load() < want && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if n := l.n.Load(); n != want {
				t.Errorf("%d containers started after the first call; want %d", n, want)
			}
		})
	}
}

// spareFailsLauncher gives its first sandbox (the spare) a process that
// exits at once, and every later one a working sandbox.
type spareFailsLauncher struct{ fakeLauncher }

func (f *spareFailsLauncher) Start(ctx context.Context, session string) (Sandbox, error) {
	return f.start(session, func(n int64) []string {
		if n == 1 {
			return []string{"sh", "-c", "exit 3"}
		}
		return f.argv
	})
}

// TestFailedSpareStartsFresh: a call whose spare failed to start gets a
// fresh sandbox, not the spare's error.
func TestFailedSpareStartsFresh(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := &spareFailsLauncher{fakeLauncher{argv: []string{"sh", "-c", fakeSandboxScript}}}
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
			t.Errorf("got %s %q, want success from a fresh sandbox", got.Status, got.Error)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no reply")
	}
}

// spareRetryLauncher is spareFailsLauncher whose failed spare asks for a
// retry, as the engine does after it changed the OCI runtime: the call
// must get a fresh sandbox, never the dead spare.
type spareRetryLauncher struct{ spareFailsLauncher }

func (f *spareRetryLauncher) StartError(stderr string, code int) (error, bool) { return nil, true }

// TestSpareRetryStartsFresh: a spare whose failure asks for a retry is not
// taken for ready.
func TestSpareRetryStartsFresh(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l := &spareRetryLauncher{spareFailsLauncher{fakeLauncher{argv: []string{"sh", "-c", fakeSandboxScript}}}}
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
			t.Errorf("got %s %q, want success from a fresh sandbox", got.Status, got.Error)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no reply")
	}
}
