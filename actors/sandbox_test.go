package actors

import (
	"testing"
	"testing/synctest"

	"github.com/bridge-mcp/bridge/protocol/result"
)

// TestBackendWithoutProcess: the sandbox actor runs a call on a backend
// that has no local process and no argv, and at shutdown removes and
// releases every sandbox it started (the spare too), each released once.
func TestBackendWithoutProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &pipeLauncher{}
		t.Cleanup(func() { // runs after the sessions stopped
			n := l.started.Load()
			if n < 1 || l.released.Load() != n || l.removed.Load() < n {
				t.Errorf("started %d sandboxes, removed %d times, released %d; want each removed and released once", n, l.removed.Load(), l.released.Load())
			}
		})
		m := startSessions(t, testConfig(l), 2)
		if got := callIn(t, m, "a"); got.Status != result.StatusSuccess {
			t.Errorf("got %s %q, want success", got.Status, got.Error)
		}
	})
}
