package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/bridge-mcp/bridge/engine/kube"
)

// failoverFigures measures what losing the leader costs: two bridge serve
// --leader-elect on this host, sharing one state directory and key as
// replicas share a volume, against the cluster of o (MCP_BRIDGE_RUNTIME
// =kubernetes). A session's state is set on the leader; the leader is
// stopped (SIGTERM, which releases the Lease) and, later, killed (SIGKILL,
// which leaves the Lease to expire); each time the figure is the time from
// the signal to the first call on the other replica that finds the state,
// as a client retrying through a Service would see it, less the Service's
// own endpoint update. The restore figure is that first call alone, against
// a new session's first call on the same replica.
func failoverFigures(ctx context.Context, o Options, r *Report) error {
	shared, err := os.MkdirTemp("", "bridge-bench-ha-")
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer os.RemoveAll(shared)
	extra := []string{"MCP_BRIDGE_STATE_DIR=" + shared, "MCP_BRIDGE_KEY_FILE=" + filepath.Join(shared, "key"),
		"MCP_BRIDGE_SESSION_DURABILITY=cell"}
	start := func(want string) (*served, error) {
		s, err := startServeArgs(ctx, o, nil, []string{"a"}, []string{"--leader-elect"}, extra...)
		if err != nil {
			return nil, fmt.Errorf("bench: failover: %w", err)
		}
		if err := waitReadyz(ctx, s, want, time.Minute); err != nil {
			s.stop()
			return nil, err
		}
		return s, nil
	}
	times := kube.DefaultElectionTimes
	lease := ms(times.LeaseDuration)

	a, err := start("ok\n")
	if err != nil {
		return err
	}
	defer a.stop()
	b, err := start("standby\n")
	if err != nil {
		return err
	}
	defer b.stop()
	if err := setState(ctx, a, "x = 1"); err != nil {
		return err
	}
	sigAt := time.Now()
	_ = a.cmd.Process.Signal(syscall.SIGTERM)
	restore, err := firstCallOn(ctx, b, "print(x)", 2*time.Minute)
	if err != nil {
		return err
	}
	graceful := ms(time.Since(sigAt))
	r.add(Figure{ID: "kube.failover.graceful", Name: "failover after the leader's SIGTERM (drain, Lease released) to the standby's first call with the session's state",
		Value: graceful, Unit: "ms", Baseline: "LeaseDuration, what a standby would wait had the Lease not been released (configured)", BaseVal: lease,
		Samples: 1, Target: "<= 10000 ms"}, graceful <= 10000)

	// The restore: that first call, against a new session's first call on
	// the same (now warm) replica.
	h, err := b.client(ctx, "a")
	if err != nil {
		return err
	}
	h.session = "bench-fresh"
	time.Sleep(3 * time.Second) // the warm pool the new leader started refills
	freshAt := time.Now()
	err = h.run(ctx, "print(1)")
	fresh := time.Since(freshAt)
	h.c.Close()
	if err != nil {
		return err
	}
	r.add(Figure{ID: "kube.failover.restore", Name: "the session's first call on the new leader, restoring its snapshot in a new pod",
		Value: ms(restore), Unit: "ms", Baseline: "a new session's first call on the same replica, its warm pool refilled", BaseVal: ms(fresh), Samples: 1}, true)

	// SIGKILL: a new standby, then the leader killed.
	c, err := start("standby\n")
	if err != nil {
		return err
	}
	defer c.stop()
	if err := setState(ctx, b, "x = 2"); err != nil {
		return err
	}
	sigAt = time.Now()
	_ = b.cmd.Process.Kill()
	if _, err := firstCallOn(ctx, c, "assert x == 2", 2*time.Minute); err != nil {
		return err
	}
	killed := ms(time.Since(sigAt))
	// The killed replica's sandbox pods are swept by the leader once its
	// owner Lease expires: wait for that sweep, so the bench leaves none.
	if left := time.Until(sigAt.Add(kube.SweptWithin)); left > 0 {
		time.Sleep(left)
	}
	r.add(Figure{ID: "kube.failover.kill", Name: "failover after the leader's SIGKILL (the Lease expires) to the standby's first call with the session's state",
		Value: killed, Unit: "ms", Baseline: "LeaseDuration (configured)", BaseVal: lease, Samples: 1,
		Target: "<= LeaseDuration + 10 s"}, killed <= lease+10000)
	return nil
}

// waitReadyz waits until s's /readyz answers want ("ok\n" or "standby\n").
func waitReadyz(ctx context.Context, s *served, want string, d time.Duration) error {
	url := strings.TrimSuffix(s.url, "/mcp") + "/readyz"
	var got string
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return fmt.Errorf("bench: %w", err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got = err.Error()
			continue
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		resp.Body.Close()
		if got = string(body); got == want {
			return nil
		}
	}
	return fmt.Errorf("bench: failover: /readyz answered %q, not %q, within %v: %s", got, want, d, tailOf(s.stderr.String(), 800))
}

// setState runs code and waits for the session's snapshot
// (runtime.snapshot): a cell's own is uploaded after its result, in the
// background, and a SIGKILL right after the call could lose it.
func setState(ctx context.Context, s *served, code string) error {
	h, err := s.client(ctx, "a")
	if err != nil {
		return err
	}
	defer h.c.Close()
	return h.run(ctx, code+"\nruntime.snapshot()")
}

// firstCallOn retries code on a new client of s until it succeeds, and
// returns the successful call's own duration.
func firstCallOn(ctx context.Context, s *served, code string, d time.Duration) (time.Duration, error) {
	var last error
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		h, err := s.client(cctx, "a")
		cancel()
		if err != nil {
			last = err
			continue
		}
		at := time.Now()
		err = h.run(ctx, code)
		took := time.Since(at)
		h.c.Close()
		if err == nil {
			return took, nil
		}
		if strings.Contains(err.Error(), "NameError") || strings.Contains(err.Error(), "AssertionError") {
			return 0, fmt.Errorf("bench: failover: the session's state was lost: %w", err)
		}
		last = err
	}
	return 0, fmt.Errorf("bench: failover: no successful call within %v: %v", d, last)
}
