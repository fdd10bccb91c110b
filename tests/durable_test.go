package tests

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// durableSetup builds a session with each kind of state a restore must
// bring back, and two that cannot be kept.
const durableSetup = `import pandas as pd, numpy as np
df = pd.DataFrame({"a": np.arange(5), "b": list("vwxyz")})
bias = 1
def twice(x):
    return 2 * x + bias
class Pt:
    def __init__(self, x):
        self.x = x
    def norm(self):
        return abs(self.x)
p = Pt(-3)
def make(k):
    return lambda v: v * k
triple = make(3)
alias = shared = [1, 2]
with open('/workspace/notes.txt', 'w') as f:
    f.write('kept')
fh = open('/workspace/notes.txt')
gen = (i for i in range(3))
del f`

// durableCheck prints what durableSetup built.
const durableCheck = `print(df.b.tolist(), twice(4), p.norm(), type(p).__name__, triple(5), alias is shared,
      open('/workspace/notes.txt').read(), 'fh' in globals(), 'gen' in globals())`

const durableWant = "['v', 'w', 'x', 'y', 'z'] 9 3 Pt 15 True kept False False"

// durableEnv points bridges at one home, so a second bridge finds the
// first one's snapshots.
func durableEnv(t *testing.T, extra map[string]string) map[string]string {
	home := t.TempDir()
	env := map[string]string{"HOME": home, "MCP_BRIDGE_CONFIG_DIR": home + "/MCPs", "MCP_BRIDGE_STATE_DIR": home + "/state"}
	for k, v := range extra {
		env[k] = v
	}
	return env
}

// waitDurable waits until session's stored snapshot holds call n or later.
func waitDurable(t *testing.T, env map[string]string, session string, n int) {
	t.Helper()
	waitFor(t, 10*time.Second, fmt.Sprintf("the snapshot of session %s's call %d", session, n), func() bool {
		return storedCall(env, session) >= n
	})
}

// storedCall is the call of session's stored snapshot (its sidecar), or 0.
func storedCall(env map[string]string, session string) int {
	files, _ := filepath.Glob(filepath.Join(env["MCP_BRIDGE_STATE_DIR"], ".bridge", "sessions", "*.json"))
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var m struct {
			Session string `json:"session"`
			Call    int    `json:"call"`
		}
		if json.Unmarshal(data, &m) == nil && m.Session == session {
			return m.Call
		}
	}
	return 0
}

// restoredRe is the restore note's shape.
var restoredRe = regexp.MustCompile(`note: session '([^']+)' restored to call (\d+) of (\d+) \(\d\d:\d\d:\d\d UTC; (\d+) names, (\d+) files\)`)

// checkRestored checks a restored session's values and its note.
func checkRestored(t *testing.T, got, session string, call, of int) {
	t.Helper()
	first, notes, _ := strings.Cut(got, "\n")
	if first != durableWant {
		t.Errorf("restored values: %q, want %q\n(all: %q)", first, durableWant, got)
	}
	m := restoredRe.FindStringSubmatch(notes)
	if m == nil {
		t.Fatalf("no restore note in %q", got)
	}
	if m[1] != session || m[2] != fmt.Sprint(call) || m[3] != fmt.Sprint(of) || m[5] != "1" {
		t.Errorf("restore note %q: want session %s, call %d of %d, 1 file", m[0], session, call, of)
	}
	if !strings.Contains(notes, "not restored: fh (open file), gen (generator)") {
		t.Errorf("the note does not name what was left out: %q", notes)
	}
}

// TestDurableSessions checks, on every backend, that a session's globals
// and /workspace files come back when its sandbox is gone: after the
// worker is killed, after the bridge itself is SIGKILLed and started again,
// and in a fork; and that sessions do not see each other's snapshots.
func TestDurableSessions(t *testing.T) {
	requirePodman(t)
	t.Run("worker killed", func(t *testing.T) {
		env := durableEnv(t, nil)
		b := startBridge(t, env)
		b.mustOK(durableSetup)
		waitDurable(t, env, "default", 1)
		r := b.run("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)")
		if sc := structured(t, r); sc["stateLost"] != true {
			t.Errorf("the killing call: %v", sc)
		}
		checkRestored(t, b.mustOK(durableCheck), "default", 1, 2)
		// Call numbers go on, and the restored session snapshots again.
		b.mustOK("bias = 10")
		waitDurable(t, env, "default", 4)
	})
	t.Run("bridge killed", func(t *testing.T) {
		env := durableEnv(t, nil)
		b := startBridge(t, env)
		b.mustOK(durableSetup)
		b.mustOKIn("b", "other = 'in b'")
		waitDurable(t, env, "default", 1)
		waitDurable(t, env, "b", 1)
		_ = b.cmd.Process.Signal(syscall.SIGKILL)
		b.Close()
		b2 := startBridge(t, env)
		checkRestored(t, b2.mustOK(durableCheck), "default", 1, 1)
		// Sessions are apart: b has its own state and not default's.
		if got := b2.mustOKIn("b", "print(other, 'df' in globals())"); !strings.HasPrefix(got, "in b False\nnote: session 'b' restored to call 1 of 1") {
			t.Errorf("session b: %q", got)
		}
	})
	t.Run("fork", func(t *testing.T) {
		env := durableEnv(t, nil)
		b := startBridge(t, env)
		b.mustOK("trial = [1, 2, 3]")
		got := b.mustOK("runtime.fork_session('try')")
		if !strings.Contains(got, "'names': 1") || !strings.Contains(got, "'left_out': []") {
			t.Errorf("fork_session: %q", got)
		}
		if got := b.mustOKIn("try", "trial.append(4)\nprint(trial)"); !strings.HasPrefix(got, "[1, 2, 3, 4]\nnote: session 'try' restored to call") {
			t.Errorf("the fork: %q", got)
		}
		if got := b.mustOK("print(trial)"); got != "[1, 2, 3]" {
			t.Errorf("the original after the fork changed: %q", got)
		}
		r := b.run("runtime.fork_session('try')")
		if got := text(t, r); !strings.Contains(got, "session 'try' is live") {
			t.Errorf("a fork into a live session: %q", got)
		}
	})
	t.Run("reset forgets", func(t *testing.T) {
		env := durableEnv(t, nil)
		b := startBridge(t, env)
		b.mustOK("gone = 1")
		waitDurable(t, env, "default", 1)
		b.mustOK("runtime.reset()")
		if n := storedCall(env, "default"); n != 0 {
			t.Errorf("the snapshot of call %d survived the reset", n)
		}
		if got := b.mustOK("print('gone' in globals())"); got != "False" {
			t.Errorf("after reset: %q, want an empty session and no note", got)
		}
	})
}

// TestDurableAfterReplacement checks that a session comes back after each
// way its container is replaced while the bridge runs: the idle end, the
// eviction for another session, a timeout whose cell ignored the
// interrupt, the memory limit, and a container killed from outside. The
// note says why the container was replaced.
func TestDurableAfterReplacement(t *testing.T) {
	requirePodman(t)
	cases := []struct {
		name  string
		env   map[string]string
		end   func(t *testing.T, b *bridge, env map[string]string)
		after string // in the note, when the bridge knew why
	}{
		{"idle", map[string]string{"MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT": "1"}, func(t *testing.T, b *bridge, _ map[string]string) {
			waitFor(t, 15*time.Second, "the idle end", func() bool { return strings.Contains(b.stderr.String(), "idle for more than 1s") })
		}, "after: idle for more than 1s"},
		{"evicted", map[string]string{"MCP_BRIDGE_MAX_SESSIONS": "1"}, func(t *testing.T, b *bridge, _ map[string]string) {
			b.mustOKIn("other", "x = 1")
		}, "after: evicted"},
		{"timeout", nil, func(t *testing.T, b *bridge, _ map[string]string) {
			r := b.call(map[string]any{"code": "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)", "timeout": 1})
			if sc := structured(t, r); sc["stateLost"] != true {
				t.Errorf("the stuck cell: %v", sc)
			}
		}, ""},
		{"killed", nil, func(t *testing.T, b *bridge, _ map[string]string) {
			if testRuntime() == "local" {
				t.Fatal("needs a container runtime")
			}
			name := oldestContainer(t, b.cmd.Process.Pid)
			if out, err := exec.Command(runtimeCLI(), "kill", "--signal", "KILL", name).CombinedOutput(); err != nil {
				t.Fatalf("kill %s: %v %s", name, err, out)
			}
			// Noted at the reaper's tick or at the next call: the note is the same.
			time.Sleep(time.Second)
		}, "after: sandbox exited with code 137"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			env := durableEnv(t, c.env)
			b := startBridge(t, env)
			b.mustOK(durableSetup)
			waitDurable(t, env, "default", 1)
			c.end(t, b, env)
			got := b.mustOK(durableCheck)
			last := 1
			if c.name == "timeout" {
				last = 2
			}
			checkRestored(t, got, "default", 1, last)
			if c.after != "" && !strings.Contains(got, c.after) {
				t.Errorf("the note does not say %q: %q", c.after, got)
			}
		})
	}
}

// TestDurableMemoryLimit: a cell that hits the memory limit ends its
// container; the next call restores the last snapshot. A snapshot child
// the OOM killer takes first never ends the session: the next result says
// that cell's state is not durable.
func TestDurableMemoryLimit(t *testing.T) {
	requirePodman(t)
	if !cgroupLimits(t) {
		t.Fatal("the runtime cannot enforce a memory limit here")
	}
	env := durableEnv(t, map[string]string{"MCP_BRIDGE_MEMORY": "256m"})
	b := startBridge(t, env)
	b.mustOK(durableSetup)
	waitDurable(t, env, "default", 1)
	r := b.run("hog = bytearray(1 << 30)")
	if sc := structured(t, r); sc["stateLost"] != true {
		t.Errorf("the hog: %v", sc)
	}
	checkRestored(t, b.mustOK(durableCheck), "default", 1, 2)

	// The snapshot child of a session near the limit: a cell that fills
	// most of it leaves no room for the child's copy as the next cell
	// rewrites it.
	got := b.mustOK("import numpy as np\nbig = np.ones(150 << 17)\nbig += 1\nprint('ok')")
	if !strings.HasPrefix(got, "ok") {
		t.Fatalf("near the limit: %q", got)
	}
	got = b.mustOK("big += 1\nprint(int(big[0]))")
	t.Logf("after the child's run near the limit: %q", got)
	if got := b.mustOK("print(int(big[0]))"); !strings.HasPrefix(got, "3") {
		t.Errorf("the session did not survive its snapshot near the limit: %q", got)
	}
}

// TestSnapshotCaps: a session whose snapshot is over MCP_BRIDGE_SNAPSHOT_MAX
// keeps running, and its next result says it is no longer durable and
// why; a flood of snapshots (runtime.snapshot in a loop) leaves at most one
// upload on the host at a time and the bridge healthy; the total cap drops
// the least recently used session's snapshot.
func TestSnapshotCaps(t *testing.T) {
	requirePodman(t)
	env := durableEnv(t, map[string]string{"MCP_BRIDGE_SNAPSHOT_MAX": "2m", "MCP_BRIDGE_SNAPSHOT_TOTAL": "3m"})
	b := startBridge(t, env)
	b.mustOK("small = 1")
	waitDurable(t, env, "default", 1)
	b.mustOK("import os\nbig = os.urandom(6 << 20)")
	// The upload fails beside the next call: the first result after the
	// failure says so.
	var got string
	for i := 0; i < 10 && !strings.Contains(got, "not durable"); i++ {
		got = b.mustOK("print(len(big))")
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(got, "call 2's state is not durable: session 'default' is no longer durable") || !strings.Contains(got, "MCP_BRIDGE_SNAPSHOT_MAX") {
		t.Errorf("over the cap: %q", got)
	}
	r := b.run("runtime.snapshot()")
	if got := text(t, r); !r.IsError || !strings.Contains(got, "MCP_BRIDGE_SNAPSHOT_MAX") {
		t.Errorf("runtime.snapshot over the cap: %q", got)
	}
	got = b.mustOK("del big\nn = 0\nfor i in range(30):\n    n += runtime.snapshot()['bytes'] > 0\nprint(n)")
	if !strings.HasPrefix(got, "30") {
		t.Errorf("a flood of snapshots: %q", got)
	}
	files, _ := filepath.Glob(filepath.Join(env["MCP_BRIDGE_STATE_DIR"], ".bridge", "sessions", "*"))
	var tmp int
	for _, f := range files {
		if strings.Contains(filepath.Base(f), "tmp") {
			tmp++
		}
	}
	if tmp > 1 {
		t.Errorf("%d temporary uploads left: %v", tmp, files)
	}
	// Two more sessions of 1.2 MB each: the total cap (3m) keeps two.
	b.mustOKIn("s1", "import os\nblob = os.urandom(1200 << 10)")
	waitDurable(t, env, "s1", 1)
	b.mustOKIn("s2", "import os\nblob = os.urandom(1200 << 10)")
	waitDurable(t, env, "s2", 1)
	b.mustOKIn("s3", "import os\nblob = os.urandom(1200 << 10)")
	waitDurable(t, env, "s3", 1)
	if storedCall(env, "s1") != 0 || storedCall(env, "s3") == 0 {
		t.Errorf("the total cap: s1 %d, s2 %d, s3 %d; want s1 dropped", storedCall(env, "s1"), storedCall(env, "s2"), storedCall(env, "s3"))
	}
	if got := b.mustOK("print('alive')"); !strings.HasPrefix(got, "alive") {
		t.Errorf("after the caps: %q", got)
	}
}

// TestSnapshotTampered: a stored snapshot edited on disk is refused with a
// note and never loaded; the session starts empty.
func TestSnapshotTampered(t *testing.T) {
	requirePodman(t)
	env := durableEnv(t, nil)
	b := startBridge(t, env)
	b.mustOK("secret = 'original'")
	waitDurable(t, env, "default", 1)
	b.Close()
	files, _ := filepath.Glob(filepath.Join(env["MCP_BRIDGE_STATE_DIR"], ".bridge", "sessions", "*.snap"))
	if len(files) != 1 {
		t.Fatalf("snapshot files: %v", files)
	}
	data, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	data = []byte(strings.Replace(string(data), "original", "forged!!", 1))
	if err := os.WriteFile(files[0], data, 0o600); err != nil {
		t.Fatal(err)
	}
	b2 := startBridge(t, env)
	got := b2.mustOK("print('secret' in globals())")
	if !strings.HasPrefix(got, "False\nnote: session 'default' was not restored: its snapshot failed verification") {
		t.Errorf("a forged snapshot: %q", got)
	}
}
