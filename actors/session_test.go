package actors

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"
	"github.com/thejerf/suture/v4"

	"github.com/bridge-mcp/bridge/protocol/result"
)

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

// execOnce runs one call with a 10 s timeout in s and returns its result.
func execOnce(t *testing.T, s *Session) result.Result {
	t.Helper()
	ctx := context.Background()
	req := newRequest(ctx, 10*time.Second)
	if !s.Exec(ctx, req) {
		t.Fatal("Exec refused")
	}
	return <-req.Reply
}

// callIn runs one call in m's session name (execOnce).
func callIn(t *testing.T, m *Sessions, name string) result.Result {
	t.Helper()
	s, err := m.Get(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return execOnce(t, s)
}

// TestEvictedSessionAnswersEveryCall: a caller that got a session just
// before it was evicted still gets exactly one reply; the evicted session
// is done and refuses to queue the call itself (issue 14).
func TestEvictedSessionAnswersEveryCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := startSessions(t, testConfig(&pipeLauncher{script: noSandbox}), 1)
		a, err := m.Get(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Get(ctx, "b"); err != nil { // evicts the idle "a"
			t.Fatal(err)
		}
		select {
		case <-a.Done():
		default:
			t.Fatal("the evicted session is not done when the eviction returned")
		}
		req := newRequest(ctx, 5*time.Second)
		if !a.Exec(ctx, req) {
			t.Fatal("Exec refused a call while its context is live")
		}
		select {
		case got := <-req.Reply:
			if want := errNoSandbox.Error(); got.Status != result.StatusError || got.Error != want {
				t.Errorf("got %s %q, want the error of a replacement session's start %q", got.Status, got.Error, want)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a call to the evicted session never got a reply")
		}
		synctest.Wait()
		select {
		case got := <-req.Reply:
			t.Fatalf("a second reply: %+v", got)
		default:
		}
	})
}

// TestQueuedCallOwnDeadline: a queued call whose timeout is shorter than
// the one ahead of it times out at its own deadline, while the running call
// is still running and ends unaffected (TMO-1, issue 14).
func TestQueuedCallOwnDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const execTime = 10 * time.Second
		cfg := testConfig(&pipeLauncher{script: func(int64) boxScript { return boxScript{execTime: execTime} }})
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
		start := time.Now()
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
			if got, want := time.Since(start), time.Second; got != want {
				t.Errorf("short queued call answered after %v, want %v (its own timeout)", got, want)
			}
		case got := <-first.Reply:
			t.Fatalf("the running call ended (%q) before the queued call with a 1 s timeout was answered", got.Error)
		}
		for _, tc := range []struct {
			name string
			req  *ExecRequest
			at   time.Duration
		}{{"first", first, execTime}, {"long", long, 2 * execTime}} {
			got := <-tc.req.Reply
			if got.Status != result.StatusSuccess {
				t.Errorf("%s call: %s %q, want success", tc.name, got.Status, got.Error)
			}
			if got := time.Since(start); got != tc.at {
				t.Errorf("%s call ended after %v, want %v", tc.name, got, tc.at)
			}
		}
	})
}

// TestEvictionDoesNotBlockManager: evicting a session whose sandbox takes
// long to stop does not stall the manager: the call that caused the
// eviction gets its session at once, while that stop is still in progress
// (issue 14).
func TestEvictionDoesNotBlockManager(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Stubborn boxes: a polite stop waits in vain, then the kill, then
		// a container removal that hangs until the test ends.
		l := &pipeLauncher{script: func(int64) boxScript { return boxScript{stubborn: true} }, gate: make(chan struct{})}
		ctx := context.Background()
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
		// The reply comes before the session marks itself idle: let the
		// bubble settle, or "a" may still count as busy (seen under load).
		synctest.Wait()
		before, asked := l.removed.Load(), time.Now()
		if _, err := m.Get(ctx, "b"); err != nil { // evicts "a", whose container removal hangs
			t.Fatal(err)
		}
		if got := time.Since(asked); got != 0 {
			t.Errorf("Get took %v while the evicted sandbox stopped; want no time at all", got)
		}
		if got := l.removed.Load(); got != before {
			t.Fatalf("Get returned only after the evicted sandbox's removal (%d removals returned); the manager waited for it", got-before)
		}
	})
}

// TestSpareReplacedAfterFirstCall: the spare that replaces an adopted one
// starts once the adopted one has served its first call (plus
// spareSettle), or spareDelay after it was ready when that call runs
// longer, not beside it (a container start slowed that call); and never
// with SingleUse.
func TestSpareReplacedAfterFirstCall(t *testing.T) {
	for _, tc := range []struct {
		name     string
		single   bool
		execTime time.Duration
		next     time.Duration // when the next spare starts, from the call; 0 for never
	}{
		{"quick first call", false, 600 * time.Millisecond, 600*time.Millisecond + spareSettle},
		{"slow first call", false, 3 * time.Second, spareDelay},
		{"SingleUse", true, 600 * time.Millisecond, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l := &pipeLauncher{script: func(int64) boxScript { return boxScript{execTime: tc.execTime} }}
				sup := quietSupervisor("sessions-test")
				m := NewSessions(testConfig(l), sup, 4, 0)
				m.SingleUse = tc.single
				sup.Add(m)
				serveUntilCleanup(t, sup)
				synctest.Wait() // the spare is ready
				called := time.Now()
				if r := callIn(t, m, "a"); r.Status != result.StatusSuccess {
					t.Fatalf("call: %+v", r)
				}
				time.Sleep(spareDelay + time.Second)
				starts := l.startTimes()
				want := 2
				if tc.next == 0 {
					want = 1
				}
				if len(starts) != want {
					t.Fatalf("%d containers started; want %d", len(starts), want)
				}
				if want == 2 {
					if got := starts[1].Sub(called); got != tc.next {
						t.Errorf("the next spare started %v after the call, want %v", got, tc.next)
					}
				}
			})
		})
	}
}

// TestFailedSpareStartsFresh: a call whose spare failed to start gets a
// fresh sandbox, not the spare's error; nor the spare itself when its
// failure asks for a retry, as the engine does after it changed the OCI
// runtime.
func TestFailedSpareStartsFresh(t *testing.T) {
	for _, retry := range []bool{false, true} {
		t.Run(fmt.Sprintf("retry=%v", retry), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// The first sandbox (the spare) exits at once.
				l := &pipeLauncher{retry: retry, script: func(n int64) boxScript {
					if n == 1 {
						return boxScript{exit: 3}
					}
					return boxScript{}
				}}
				m := startSessions(t, testConfig(l), 2)
				if got := callIn(t, m, "a"); got.Status != result.StatusSuccess {
					t.Errorf("got %s %q, want success from a fresh sandbox", got.Status, got.Error)
				}
			})
		})
	}
}

// TestIdleSessionReaped: the reaper ends a session's sandbox, and the
// spare, at the first tick after they were idle for longer than the idle
// limit; the session's next call runs on a fresh sandbox and reports the
// state loss (SES-3).
func TestIdleSessionReaped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const idle = 5 * time.Second
		l := &pipeLauncher{}
		sup := quietSupervisor("sessions-test")
		m := NewSessions(testConfig(l), sup, 2, idle)
		sup.Add(m)
		sup.Add(&Reaper{Sessions: m, Every: time.Second})
		serveUntilCleanup(t, sup)
		start, ctx := time.Now(), context.Background()
		s, err := m.Get(ctx, "a")
		if err != nil {
			t.Fatal(err)
		}
		call := func() result.Result { return execOnce(t, s) }
		if got := call(); got.Status != result.StatusSuccess || got.StateLost {
			t.Fatalf("first call: %s %q, state lost %v", got.Status, got.Error, got.StateLost)
		}
		time.Sleep(2 * idle)
		// Box 0 is the spare the session adopted at once, box 1 the next
		// spare, started spareSettle after the call: both idle out at the
		// first tick more than idle after their last use.
		for i, want := range []time.Duration{idle + time.Second, idle + time.Second} {
			b := l.box(i)
			if !isClosed(b.exited) {
				t.Fatalf("%s still runs after %v idle", b.name, 2*idle)
			}
			if got := b.endedAt.Sub(start); got != want {
				t.Errorf("%s ended %v after the call, want %v", b.name, got, want)
			}
		}
		got := call()
		if got.Status != result.StatusSuccess || !got.StateLost || got.LossReason != "idle for more than 5s" {
			t.Errorf("call after the idle stop: %s %q, state lost %v (%q); want success reporting the idle loss", got.Status, got.Error, got.StateLost, got.LossReason)
		}
	})
}

// TestOutputInExecReply: the output an exec reply carries follows the
// call's output notifications, and a chunk of neither stream is dropped.
func TestOutputInExecReply(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &pipeLauncher{script: func(int64) boxScript {
			return boxScript{
				before:      `{"jsonrpc":"2.0","method":"output","params":{"call":%d,"stream":"stdout","data":"streamed "}}` + "\n",
				replyOutput: `[{"stream":"stdout","data":"then"},{"stream":"stdin","data":"bogus"},{"stream":"stderr","data":"err"}]`,
			}
		}}
		m := startSessions(t, testConfig(l), 4)
		r := callIn(t, m, "a")
		var got []string
		for _, c := range r.Output {
			got = append(got, c.Stream+":"+c.Data)
		}
		if want := []string{"stdout:streamed then", "stderr:err"}; fmt.Sprint(got) != fmt.Sprint(want) || r.Status != result.StatusSuccess {
			t.Errorf("output %q (status %s), want %q", got, r.Status, want)
		}
	})
}
