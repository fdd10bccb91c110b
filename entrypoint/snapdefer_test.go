package entrypoint

import (
	"os/exec"
	"strings"
	"testing"
)

// deferDriver loads snapshot.py (argv[1]) as a module and drives its
// Snapshotter with a recording _start: call 5 ends while an upload is busy
// (deferred), call 6 ends once it is not (started at once).
const deferDriver = `
import sys, types
mod = types.ModuleType("snapshot")
exec(compile(sys.argv[1], "snapshot.py", "exec"), mod.__dict__)
s = mod.Snapshotter(lambda: None)
started = []
s._start = lambda call, target, waiter: started.append(call)
s._busy = {"call": 3}
s.after_cell(5, "x = 1", False)
s._busy = None
s.after_cell(6, "y = 2", False)
s.idle()
print(started)
`

// TestSnapshotDeferredIsCovered: a snapshot started after a cell covers a
// call whose snapshot waited for a busy upload; the waiting one is not
// taken afterwards under its older call number, where it would replace
// the newer snapshot in the store.
func TestSnapshotDeferredIsCovered(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed to check the entrypoint: %v", err)
	}
	out, err := exec.Command(py, "-c", deferDriver, Files()["snapshot.py"]).CombinedOutput()
	if err != nil {
		t.Fatalf("driver: %v\n%s", err, out)
	}
	if got, want := strings.TrimSpace(string(out)), "[6]"; got != want {
		t.Errorf("snapshots started = %s, want %s", got, want)
	}
}
