package entrypoint

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// spillScript loads capture.py from stdin and drives a SpillFile at argv[1]:
// stream switches are marked, a flushing file is readable while open, and
// the write that passes the cap stores up to the cap and reports why.
const spillScript = `
import sys, types
m = types.ModuleType("mcp._capture")
exec(compile(sys.stdin.read(), "capture.py", "exec"), m.__dict__)
path = sys.argv[1]
f = m.SpillFile(path, 1 << 20, flush=True)
assert f.write("stdout", "a\nb") is None
assert f.write("stderr", "c\n") is None
assert f.write("stderr", "d\n") is None
got = open(path).read()
assert got == "a\nb\nstderr:\nc\nd\n", repr(got)
err = f.write("stdout", "x" * (1 << 20))
assert err == "the saved output is capped at 1 MiB", err
data = open(path).read()
assert len(data) == 1 << 20 and data.startswith(got + "stdout:\nxx"), len(data)
print("ok")
`

// TestSpillFile checks the saved-output file that calls and background jobs
// share (capture.py's SpillFile).
func TestSpillFile(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed to run the entrypoint: %v", err)
	}
	cmd := exec.Command(py, "-c", spillScript, filepath.Join(t.TempDir(), "out.txt"))
	cmd.Stdin = strings.NewReader(Files()["capture.py"])
	out, err := cmd.CombinedOutput()
	if got := strings.TrimSpace(string(out)); err != nil || got != "ok" {
		t.Fatalf("SpillFile: %v\n%s", err, out)
	}
}
