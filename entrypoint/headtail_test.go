package entrypoint

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runModules writes the named entrypoint modules into a temporary directory
// and runs script with the host's python3 as `script dir`; the script loads
// them itself (load(name, file)) and prints "ok" when every check passed.
func runModules(t *testing.T, script string, files ...string) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed to run the entrypoint: %v", err)
	}
	dir := t.TempDir()
	for _, name := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(Files()[name]), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const load = `
import os, sys, types
def load(name, file):
    m = types.ModuleType(name)
    path = os.path.join(sys.argv[1], file)
    exec(compile(open(path).read(), path, "exec"), m.__dict__)
    return m
`
	out, err := exec.Command(py, "-c", load+script, dir).CombinedOutput()
	if got := strings.TrimSpace(string(out)); err != nil || got != "ok" {
		t.Fatalf("%v\n%s", err, out)
	}
}

// headTailScript drives capture.py's HeadTail, the one output cap of calls
// and background jobs: the head, the rolling tail, the marker, the spill
// file, the cut on a UTF-8 boundary and a spill that cannot be saved.
const headTailScript = `
cap = load("mcp._capture", "capture.py")
d = sys.argv[1]
pruned = []
ht = cap.HeadTail(20, os.path.join(d, "sub", "out.txt"), prepare=lambda: pruned.append(1))
assert ht.write("stdout", "0123456789") is False
assert ht.write("stderr", "abcde") is True
assert ht.take_head() == [("stdout", "0123456789")] and ht.head_bytes == 0
assert not os.path.exists(ht.path) and not pruned, "spilled within the cap"
ht.write("stderr", "fghijklmnopqrstuvwxyz\n")
assert ht.total == 37 and ht.dropped == 17, (ht.total, ht.dropped)
assert pruned == [1], pruned
got = ht.drain()
want = [("stderr", "[... 17 bytes omitted; full output in %s ...]\n" % ht.path), ("stderr", "rstuvwxyz\n")]
assert got == want, got
ht.write("stdout", "again")
assert ht.drain() == [("stdout", "again")], "a drain starts a new head"
ht.close()
saved = open(ht.path).read()
assert saved == "0123456789\nstderr:\nabcdefghijklmnopqrstuvwxyz\nstdout:\nagain", repr(saved)

# The head is cut on a UTF-8 boundary, and once cut it takes nothing more.
u = cap.HeadTail(6, os.path.join(d, "u.txt"))
u.write("stdout", "\u00e9\u00e9\u00e9")
u.write("stdout", "a")
got = u.drain()
assert got == [("stdout", "\u00e9"), ("stdout", "\n[... 2 bytes omitted; full output in %s ...]\n" % u.path),
               ("stdout", "\u00e9"), ("stdout", "a")], got

# A file that cannot be written: the marker says why.
blocker = os.path.join(d, "file")
open(blocker, "w").close()
bad = cap.HeadTail(4, os.path.join(blocker, "sub", "out.txt"))
bad.write("stdout", "0123456789\n")
got = bad.drain()
assert got[1][1] == "\n[... 7 bytes omitted; full output in %s; full output not saved: Not a directory ...]\n" % bad.path, got

# The cuts move to a line boundary when one is near (12 bytes here): the
# head ends after a newline and the tail starts after one, though print
# writes a line's words one by one; the marker stands alone, once.
ln = cap.HeadTail(200, os.path.join(d, "ln.txt"))
for i in range(40):
    for w in ("row", " ", "%02d" % i, "\n"):
        ln.write("stdout", w)
lines = "".join(t for _, t in ln.drain()).split("\n")
assert lines[0] == "row 00" and lines[-2:] == ["row 39", ""], lines
assert [l for l in lines[:-1] if not (l.startswith("row ") and len(l) == 6)] == [
    "[... %d bytes omitted; full output in %s ...]" % (ln.total - 7 * (len(lines) - 2), ln.path)], lines
print("ok")
`

// TestHeadTail checks the output cap that calls and background jobs share.
func TestHeadTail(t *testing.T) {
	runModules(t, headTailScript, "capture.py")
}

// jobsScript loads jobs.py on its own, with no worker module: install()
// hands it everything it uses (the cap class, the error formatter, the
// traceback filter, the progress sink, the grant token, the globals and the
// call cap), and a job's output goes through capture.py's route hook.
const jobsScript = `
import contextvars, threading
cap = load("mcp._capture", "capture.py")
jobs = load("mcp.jobs", "jobs.py")
jobs.SPILL_DIR = sys.argv[1]
class MCPError(RuntimeError):
    pass
rt = types.SimpleNamespace(__all__=[], MCPError=MCPError, _CALL={"job_token": "tok", "proxies": {}, "servers": []})
progress, seen, ns = [], [], {}
token = contextvars.ContextVar("job", default=None)
jobs.install(rt, cap.HeadTail, format_error=lambda e: "formatted " + type(e).__name__, filter_tb=lambda e: seen.append(e),
             progress=progress.append, job_token=token, namespace=ns, call_limit=40)
assert rt.__all__ == ["start", "result", "jobs"] and rt.Job is jobs.Job
class Sink:
    got = []
    def write(self, stream, text):
        self.got.append((stream, text))
sink = Sink()
cap.route = jobs.route
sys.stdout = cap.CaptureStream(sink, "stdout", 1)

def work():
    seen.append(token.get())
    print("x" * 50)
    return 7
assert rt.result(rt.start(work), wait=None) == 7
assert seen == ["tok"], seen
path = os.path.join(sys.argv[1], "job-1.txt")
want = "x" * 10 + "\n[... 31 bytes omitted; full output in %s ...]\n" % path + "x" * 9 + "\n"
assert "".join(t for _, t in sink.got) == want, sink.got
assert open(path).read() == "x" * 50 + "\n"

failed = rt.start(lambda: 1 / 0)
failed._finished.wait(10)
assert repr(failed).endswith("failed after %.1fs: formatted ZeroDivisionError>" % (failed._ended - failed._started)), repr(failed)
assert isinstance(seen[-1], ZeroDivisionError), seen

assert rt.result(rt.start("y = 5\ny * 2"), wait=None) == 10 and ns["y"] == 5

go = threading.Event()
def slow():
    print("step")
    go.wait(10)
    return "done"
job = rt.start(slow)
assert rt.result(job, wait=0.6) is job
assert progress == ["step\n"], progress
go.set()
assert rt.result(job, wait=None) == "done"
assert "worker" not in sys.modules
sys.__stdout__.write("ok\n")
`

// TestJobsTakeWhatTheyUse checks that jobs.py runs on what install() passes
// in, with no worker module to reach into.
func TestJobsTakeWhatTheyUse(t *testing.T) {
	runModules(t, jobsScript, "capture.py", "jobs.py")
}
