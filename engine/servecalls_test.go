package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/engine/httpd"
)

// TestCallGate: a principal's calls beyond its cap wait in turn, each
// within its own deadline; another principal's calls never wait on them.
func TestCallGate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newCallGate(1, 1)
		ctx := context.Background()
		now := time.Now()
		release, err := g.acquire(ctx, "alice", now.Add(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		// bob has his own slots.
		if rb, err := g.acquire(ctx, "bob", now.Add(time.Second)); err != nil {
			t.Fatalf("bob waited on alice: %v", err)
		} else {
			rb()
		}
		// alice's second call times out at its own deadline, not later.
		_, err = g.acquire(ctx, "alice", now.Add(2*time.Second))
		if !errors.Is(err, context.DeadlineExceeded) || time.Since(now) != 2*time.Second {
			t.Fatalf("queued call: %v after %v, want a deadline error after 2s", err, time.Since(now))
		}
		// A longer deadline gets the slot once it is released.
		done := make(chan error, 1)
		go func() {
			r, err := g.acquire(ctx, "alice", time.Now().Add(time.Minute))
			if err == nil {
				r()
			}
			done <- err
		}()
		time.Sleep(5 * time.Second)
		release()
		if err := <-done; err != nil {
			t.Fatalf("queued call after the release: %v", err)
		}
		// A cancelled caller stops waiting at once.
		r, _ := g.acquire(ctx, "alice", time.Now().Add(time.Minute))
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := g.acquire(cctx, "alice", time.Now().Add(time.Minute)); !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled: %v", err)
		}
		r()
	})
}

func TestCheckListen(t *testing.T) {
	for _, c := range []struct {
		opts   HTTPOptions
		tokens string
		want   string // "" ok, else a substring
	}{
		{HTTPOptions{Listen: "127.0.0.1:8080", InsecureNoAuth: true}, "", ""},
		{HTTPOptions{Listen: "[::1]:8080", InsecureNoAuth: true}, "", ""},
		{HTTPOptions{Listen: "localhost:8080", InsecureNoAuth: true}, "", ""},
		{HTTPOptions{Listen: "0.0.0.0:8080", InsecureNoAuth: true}, "", "only on a loopback address"},
		{HTTPOptions{Listen: ":8080", InsecureNoAuth: true}, "", "only on a loopback address"},
		{HTTPOptions{Listen: "10.0.0.5:8080", InsecureNoAuth: true}, "", "only on a loopback address"},
		{HTTPOptions{Listen: "127.0.0.1:8080"}, "", "MCP_BRIDGE_TOKENS_FILE is not set"},
		{HTTPOptions{Listen: "0.0.0.0:8080"}, "/t", ""},
		{HTTPOptions{Listen: "0.0.0.0:8080", InsecureNoAuth: true}, "/t", "choose one"},
		{HTTPOptions{Listen: "8080"}, "/t", "want HOST:PORT"},
		{HTTPOptions{Listen: ":8080", TLSCert: "c"}, "/t", "go together"},
		{HTTPOptions{Listen: ":8080", MetricsPrincipals: []string{"prometheus", "ops.team-1"}}, "/t", ""},
		{HTTPOptions{Listen: ":8080", MetricsPrincipals: []string{"prom/etheus"}}, "/t", `--metrics-principal "prom/etheus"`},
		{HTTPOptions{Listen: ":8080", MetricsPrincipals: []string{".."}}, "/t", "--metrics-principal"},
	} {
		err := CheckListen(c.opts, c.tokens)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("CheckListen(%+v, %q) = %v, want %q", c.opts, c.tokens, err, c.want)
		}
	}
}

// TestServeSkipsProjectConfig: bridge serve does not read the working
// directory's project config files (they are the operator's, not the
// callers'); bridge run does.
func TestServeSkipsProjectConfig(t *testing.T) {
	for _, serving := range []bool{false, true} {
		env, err := LoadEnv(envOf(map[string]string{"MCP_BRIDGE_RUNTIME": "local", "MCP_BRIDGE_UNSAFE_LOCAL": "1"}), t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		env.Serving = serving
		e := New(env, "test", zerolog.Nop(), envOf(nil), false)
		if got := e.configOptions().Project; got == serving {
			t.Errorf("Serving=%v: reads project files = %v, want %v", serving, got, !serving)
		}
	}
}

// TestReadinessRechecks: /readyz turns ready once the runtime answers, and
// back to not ready when a later check fails (a runtime that stopped, an
// image removed), each change logged once.
func TestReadinessRechecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs strings.Builder
		answers := []bool{false, true, true, false, true}
		var calls int
		r := &readiness{e: &Engine{Log: zerolog.New(&logs)}}
		r.check = func(context.Context) bool {
			ok := answers[min(calls, len(answers)-1)]
			calls++
			return ok
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { r.run(ctx); close(done) }()
		var got []bool
		for range answers {
			synctest.Wait()
			got = append(got, r.ok())
			if r.ok() {
				time.Sleep(readyRecheck)
			} else {
				time.Sleep(readyRetry)
			}
		}
		cancel()
		<-done
		if want := answers; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("ready after each check: got %v, want %v", got, want)
		}
		if n := strings.Count(logs.String(), "not ready:"); n != 1 {
			t.Errorf("%d 'not ready' lines, want 1:\n%s", n, logs.String())
		}
		if n := strings.Count(logs.String(), `"ready: `); n != 2 {
			t.Errorf("%d 'ready' lines, want 2:\n%s", n, logs.String())
		}
	})
}

// TestCallGateShares: alone, a principal runs up to its cap; while another
// principal works (a call in flight, or one ended less than the linger
// ago), its extra calls wait until it has fewer in flight than the other,
// and the other's first call never waits on it.
func TestCallGateShares(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newCallGate(4, 1)
		ctx := context.Background()
		far := time.Now().Add(time.Hour)
		var flood []func()
		for i := range 2 {
			r, err := g.acquire(ctx, "flood", far)
			if err != nil {
				t.Fatalf("flood call %d alone: %v", i, err)
			}
			flood = append(flood, r)
		}
		// The probe's first call starts at once, whatever the flood runs.
		probe, err := g.acquire(ctx, "probe", time.Now().Add(time.Millisecond))
		if err != nil {
			t.Fatalf("probe's first call waited on the flood: %v", err)
		}
		// The flood's next call waits while the probe works...
		started := make(chan time.Time, 1)
		floodCall := func() {
			r, err := g.acquire(ctx, "flood", far)
			if err != nil {
				t.Error(err)
				return
			}
			flood = append(flood, r)
			started <- time.Now()
		}
		go floodCall()
		// ...even after one of its own ends: it still has as many in
		// flight as the probe.
		flood[0]()
		time.Sleep(time.Second)
		synctest.Wait()
		if len(started) != 0 {
			t.Fatal("the flood started a second call beside the probe's one")
		}
		flood[1]()
		synctest.Wait()
		select {
		case <-started: // 0 in flight: its next call goes at once
		default:
			t.Fatal("the flood's call waited with none of its own in flight")
		}
		// The next extra call waits out the probe's linger once the probe
		// is done.
		go floodCall()
		synctest.Wait()
		end := time.Now()
		probe()
		if got, want := (<-started).Sub(end), gateLinger; got != want {
			t.Errorf("the flood's extra call started %v after the probe's end, want its linger %v", got, want)
		}
		// Alone again: up to the cap, then no more.
		for range 2 {
			r, err := g.acquire(ctx, "flood", far)
			if err != nil {
				t.Fatal(err)
			}
			flood = append(flood, r)
		}
		if _, err := g.acquire(ctx, "flood", time.Now().Add(time.Second)); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("a fifth call past the cap of 4: %v, want a deadline error", err)
		}
		for _, r := range flood[2:] {
			r()
		}
	})
}

// TestCallGateOrder: a principal's waiting calls start in arrival order,
// and one that gives up leaves the queue without blocking the rest.
func TestCallGateOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newCallGate(1, 1)
		ctx := context.Background()
		first, err := g.acquire(ctx, "alice", time.Now().Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
		var order []int
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range 4 {
			deadline := time.Now().Add(time.Hour)
			if i == 1 {
				deadline = time.Now().Add(time.Second) // gives up
			}
			wg.Go(func() {
				r, err := g.acquire(ctx, "alice", deadline)
				if err != nil {
					return
				}
				mu.Lock()
				order = append(order, i)
				mu.Unlock()
				time.Sleep(time.Millisecond)
				r()
			})
			synctest.Wait() // queued in this order
		}
		time.Sleep(2 * time.Second)
		first()
		wg.Wait()
		if got, want := fmt.Sprint(order), "[0 2 3]"; got != want {
			t.Errorf("start order %s, want %s", got, want)
		}
	})
}

// TestCallGateLongCalls: a call older than gateYoung (a cell that sleeps,
// or waits on a person) stops holding back another principal's calls.
func TestCallGateLongCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := newCallGate(4, 1)
		ctx := context.Background()
		far := time.Now().Add(time.Hour)
		long, err := g.acquire(ctx, "alice", far)
		if err != nil {
			t.Fatal(err)
		}
		aliceStart := time.Now()
		time.Sleep(500 * time.Millisecond) // bob's own call grows old later than alice's
		bob, err := g.acquire(ctx, "bob", far)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		r, err := g.acquire(ctx, "bob", far)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := time.Since(aliceStart), gateYoung; got != want {
			t.Errorf("bob's second call started %v after alice's long one, want when it grew old (%v); asked %v before",
				got, want, time.Since(start))
		}
		// alice's long call does not count for her either: her next call
		// goes at once although bob has two in flight.
		start = time.Now()
		r2, err := g.acquire(ctx, "alice", far)
		if err != nil || time.Since(start) != 0 {
			t.Errorf("alice's call beside her long one: %v after %v", err, time.Since(start))
		}
		for _, f := range []func(){long, bob, r, r2} {
			f()
		}
	})
}

// TestServeTokensRevoked: bridge serve's tokens (loadTokens) are revoked
// when the file is emptied, or deleted for two checks, with one warning;
// a file back with tokens is taken again.
func TestServeTokensRevoked(t *testing.T) {
	for _, c := range []struct {
		name   string
		revoke func(path string) error
		checks int
	}{
		{"emptied", func(p string) error { return os.WriteFile(p, []byte("\n# none\n"), 0o600) }, 1},
		{"deleted", os.Remove, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "tokens")
			if err := os.WriteFile(p, []byte("alice t1\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			var logs strings.Builder
			tokens, err := loadTokens(p, zerolog.New(&logs))
			if err != nil {
				t.Fatal(err)
			}
			if err := c.revoke(p); err != nil {
				t.Fatal(err)
			}
			for range c.checks {
				tokens.Check()
			}
			if got, _ := tokens.Get().Lookup("t1"); got != "" {
				t.Errorf("after %s: t1 -> %q, want revoked", c.name, got)
			}
			if got := strings.Count(logs.String(), `"level":"warn"`); got != 1 {
				t.Errorf("warn lines = %d, want 1:\n%s", got, logs.String())
			}
			if err := os.WriteFile(p, []byte("alice t2\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			tokens.Check()
			if got, _ := tokens.Get().Lookup("t2"); got != "alice" {
				t.Errorf("written again: t2 -> %q, want alice", got)
			}
		})
	}
}

// TestUnknownMetricsPrincipals: bridge serve warns of a --metrics-principal
// that no caller has.
func TestUnknownMetricsPrincipals(t *testing.T) {
	p := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(p, []byte("alice t1\nprometheus t2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens, err := loadTokens(p, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		flags  []string
		tokens *httpd.Reloaded[httpd.TokenSet]
		want   []string
	}{
		{"none", nil, tokens, nil},
		{"listed", []string{"prometheus", "alice"}, tokens, nil},
		{"not listed", []string{"prometheus", "grafana"}, tokens, []string{"grafana"}},
		{"no auth, anonymous", []string{"anonymous"}, nil, nil},
		{"no auth, a name", []string{"prometheus"}, nil, []string{"prometheus"}},
	} {
		if got := unknownMetricsPrincipals(c.flags, c.tokens); !slices.Equal(got, c.want) {
			t.Errorf("%s: unknownMetricsPrincipals(%q) = %q, want %q", c.name, c.flags, got, c.want)
		}
	}
}
