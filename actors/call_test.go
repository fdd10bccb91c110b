package actors

import (
	"slices"
	"testing"
)

// TestTimeoutError: a timeout's error is one line that says whether the
// session kept its state, names the tool calls in flight, how high timeout
// may go, and runtime.start for longer work (issue 35).
func TestTimeoutError(t *testing.T) {
	const (
		kept       = "; the session kept its state."
		lost       = "; the cell ignored the interrupt, so the session was restarted and its state is lost."
		raise      = " For longer work, pass a larger timeout (at most 120, MCP_BRIDGE_MAX_TIMEOUT) or start it in the background: job = runtime.start(code), then runtime.result(job) in later calls."
		background = " For longer work, start it in the background: job = runtime.start(code), then runtime.result(job) in later calls."
	)
	tests := []struct {
		name          string
		t, max        int
		lost, earlier bool
		during        []string
		want          string
	}{
		{"kept", 2, 120, false, false, nil, "Execution timed out after 2s" + kept + raise},
		{"lost", 2, 120, true, false, nil, "Execution timed out after 2s" + lost + raise},
		{"kept after an earlier loss", 2, 120, false, true, nil,
			"Execution timed out after 2s; the session kept the state this call built." + raise},
		{"one tool call in flight", 2, 120, false, false, []string{"slow.sleep"},
			"Execution timed out after 2s during the tool call slow.sleep" + kept + raise},
		{"two", 2, 120, true, false, []string{"a.x", "b.y"},
			"Execution timed out after 2s during the tool calls a.x and b.y" + lost + raise},
		{"more than three", 2, 120, false, false, []string{"a.x", "a.x", "b.y", "c.z", "d.w"},
			"Execution timed out after 2s during the tool calls a.x, a.x, b.y and 2 more" + kept + raise},
		{"at the ceiling", 120, 120, false, false, nil,
			"Execution timed out after 120s (the most MCP_BRIDGE_MAX_TIMEOUT allows)" + kept + background},
		{"at the ceiling, in flight", 60, 60, false, false, []string{"slow.sleep"},
			"Execution timed out after 60s (the most MCP_BRIDGE_MAX_TIMEOUT allows) during the tool call slow.sleep" + kept + background},
		{"ceiling not known", 2, 0, false, false, nil,
			"Execution timed out after 2s" + kept + " For longer work, pass a larger timeout or start it in the background: job = runtime.start(code), then runtime.result(job) in later calls."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			during := slices.Clone(tt.during)
			if got := timeoutError(tt.t, tt.max, tt.lost, false, tt.earlier, during); got != tt.want {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
			if !slices.Equal(during, tt.during) {
				t.Errorf("timeoutError changed its argument: %q", during)
			}
		})
	}
}

// TestTimeoutErrorDurable: with snapshots per cell, a replaced session
// says what it loses and that the next call restores the last snapshot.
func TestTimeoutErrorDurable(t *testing.T) {
	got := timeoutError(2, 120, true, true, false, nil)
	want := "Execution timed out after 2s; the cell ignored the interrupt, so the session was restarted: what it built since its last snapshot is lost, and the next call restores that snapshot. For longer work, pass a larger timeout (at most 120, MCP_BRIDGE_MAX_TIMEOUT) or start it in the background: job = runtime.start(code), then runtime.result(job) in later calls."
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// TestInFlightCalls: the call keeps its tool calls in flight in the order
// they began; one that returned is dropped unless it ran out at the call's
// deadline, which it was still waiting on.
func TestInFlightCalls(t *testing.T) {
	a := &activeCall{limit: 1 << 20}
	if got := a.inFlight(); len(got) != 0 {
		t.Fatalf("in flight before any call: %q", got)
	}
	a.began(7, "b.second")
	a.began(3, "a.first")
	a.began(9, "c.third")
	a.ended(7, false)
	a.ended(9, true)
	if got, want := a.inFlight(), []string{"a.first", "c.third"}; !slices.Equal(got, want) {
		t.Errorf("in flight: got %q, want %q", got, want)
	}
}
