package actors

import (
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func newQ() *question {
	return &question{key: "q1", answer: make(chan inputAnswer, 1), gone: make(chan struct{})}
}

// TestInputStatesBinding: a requestState is redeemed once, only with the
// principal, MCP session and arguments it was issued for; a mismatch
// leaves it to its owner, a made-up or another principal's gets the same
// "unknown" as a random string.
func TestInputStatesBinding(t *testing.T) {
	tb := newInputStates()
	defer tb.close()
	args := json.RawMessage(`{"code":"print(1)","servers":["memory"]}`)
	own := bindingOf("alice", "s1", args)
	call := &heldCall{}
	state, err := tb.issue(own, call, newQ(), time.Minute, func() { t.Error("expired") })
	if err != nil {
		t.Fatal(err)
	}
	if raw := len(state); raw < 43 { // 32 bytes, base64url without padding
		t.Errorf("requestState %q: %d characters, want >= 43 (256 bits)", state, raw)
	}
	state2, _ := tb.issue(own, call, newQ(), time.Minute, func() {})
	if state2 == state {
		t.Fatal("two issues gave the same requestState")
	}

	for _, tc := range []struct {
		name string
		bind inputBinding
		want string
	}{
		{"other principal", bindingOf("bob", "s1", args), "requestState is unknown"},
		{"other MCP session", bindingOf("alice", "s2", args), "another MCP session"},
		{"other arguments", bindingOf("alice", "s1", json.RawMessage(`{"code":"print(2)","servers":["memory"]}`)), "another run_python call"},
	} {
		if _, err := tb.take(state, tc.bind, time.Minute); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
	if _, err := tb.take("forged-"+state, own, time.Minute); !errors.Is(err, errInputStateUnknown) {
		t.Errorf("a forged requestState: %v", err)
	}
	// The same arguments with their keys in another order still match.
	reordered := bindingOf("alice", "s1", json.RawMessage(`{"servers": ["memory"], "code": "print(1)"}`))
	h, err := tb.take(state, reordered, time.Minute)
	if err != nil || h.call != call {
		t.Fatalf("the owner's retry: %v", err)
	}
	if _, err := tb.take(state, own, time.Minute); err == nil || !strings.Contains(err.Error(), "already used") {
		t.Errorf("a reused requestState: %v", err)
	}
	if _, err := tb.take(state, bindingOf("bob", "s1", args), time.Minute); !errors.Is(err, errInputStateUnknown) {
		t.Errorf("another principal's used requestState: %v", err)
	}
	if got := tb.outstanding(); got != 1 {
		t.Errorf("outstanding %d, want 1", got)
	}
}

// TestInputStatesExpiry: an unanswered requestState expires at its ttl,
// runs its expiry once, and a late retry is told it expired.
func TestInputStatesExpiry(t *testing.T) {
	tb := newInputStates()
	defer tb.close()
	bind := bindingOf("", "", json.RawMessage(`{"code":"x"}`))
	var expired atomic.Int32
	state, err := tb.issue(bind, &heldCall{}, newQ(), 50*time.Millisecond, func() { expired.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for expired.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := expired.Load(); n != 1 {
		t.Fatalf("expiry ran %d times, want 1", n)
	}
	if _, err := tb.take(state, bind, 2*time.Second); err == nil || !strings.Contains(err.Error(), "requestState expired") ||
		!strings.Contains(err.Error(), "2s (MCP_BRIDGE_APPROVAL_TIMEOUT)") {
		t.Errorf("a late retry: %v", err)
	}
	// A retry in time stops the expiry.
	state, _ = tb.issue(bind, &heldCall{}, newQ(), 100*time.Millisecond, func() { expired.Add(1) })
	if _, err := tb.take(state, bind, time.Second); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if n := expired.Load(); n != 1 {
		t.Errorf("a redeemed requestState expired too (%d expiries)", n)
	}
}

// TestInputStatesCaps: the table holds at most max handles, and maxPer of
// one principal; a freed slot can be used again; close refuses new ones.
func TestInputStatesCaps(t *testing.T) {
	tb := newInputStates()
	tb.max, tb.maxPer = 3, 2
	defer tb.close()
	issue := func(p string) (string, error) {
		return tb.issue(bindingOf(p, "", nil), &heldCall{}, newQ(), time.Minute, func() {})
	}
	a1, _ := issue("a")
	if _, err := issue("a"); err != nil {
		t.Fatal(err)
	}
	if _, err := issue("a"); err == nil || !strings.Contains(err.Error(), "cap per principal") {
		t.Errorf("a third of one principal: %v", err)
	}
	if _, err := issue("b"); err != nil {
		t.Fatal(err)
	}
	if _, err := issue("c"); err == nil || !strings.Contains(err.Error(), "the bridge's cap") {
		t.Errorf("a fourth in all: %v", err)
	}
	if _, err := tb.take(a1, bindingOf("a", "", nil), time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := issue("c"); err != nil {
		t.Errorf("after a retry freed a slot: %v", err)
	}
	tb.close()
	if _, err := issue("d"); err == nil {
		t.Error("issued after close")
	}
	if n := tb.outstanding(); n != 0 {
		t.Errorf("%d outstanding after close", n)
	}
}
