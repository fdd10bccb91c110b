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
def inc(v):
    return v + 1
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
		// A restored function's source came back: a traceback shows its
		// line, and save_tool keeps it.
		r = b.run("twice(None)")
		if got := text(t, r); !strings.Contains(got, "return 2 * x + bias") {
			t.Errorf("a restored function's traceback: %q", got)
		}
		if got := b.mustOK("save_tool(inc)\nfrom user_tools import inc as again\nprint(again(1))"); !strings.HasSuffix(got, "2") {
			t.Errorf("save_tool of a restored function: %q", got)
		}
		// Call numbers go on, and the restored session snapshots again.
		b.mustOK("bias = 10")
		waitDurable(t, env, "default", 6)
	})
	t.Run("bridge killed", func(t *testing.T) {
		env := durableEnv(t, nil)
		b := startBridge(t, env)
		b.mustOK(durableSetup)
		b.mustOKIn("b", "other = 'in b'")
		waitDurable(t, env, "default", 1)
		waitDurable(t, env, "b", 1)
		_ = b.signal(syscall.SIGKILL)
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
			name := oldestContainer(t, b.pid())
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

// TestHostileSnapshotCaps: a session whose snapshot is over MCP_BRIDGE_SNAPSHOT_MAX
// keeps running, and its next result says it is no longer durable and
// why; a flood of snapshots (runtime.snapshot in a loop) leaves at most one
// upload on the host at a time and the bridge healthy; the total cap drops
// the least recently used session's snapshot.
func TestHostileSnapshotCaps(t *testing.T) {
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
	// A 10 GB snapshot from one 100 MB buffer (each reference pickles it
	// again, out of band): the cap ends its upload, and the session goes on.
	b.mustOK(`import pickle
buf = bytearray(100 << 20)
class Flood:
    def __reduce_ex__(self, proto):
        return (bytearray, (pickle.PickleBuffer(buf),))
flood = [Flood() for _ in range(100)]`)
	got = ""
	for i := 0; i < 20 && !strings.Contains(got, "not durable"); i++ {
		got = b.mustOK("print(len(flood))")
		time.Sleep(500 * time.Millisecond)
	}
	if !strings.Contains(got, "is no longer durable") {
		t.Errorf("a 10 GB snapshot: %q", got)
	}
	b.mustOK("del flood, buf, Flood")
	files, _ := filepath.Glob(filepath.Join(env["MCP_BRIDGE_STATE_DIR"], ".bridge", "sessions", "*"))
	var tmp int
	for _, f := range files {
		if strings.Contains(filepath.Base(f), ".snap.tmp-") {
			tmp++
		}
	}
	if tmp > 1 { // the snapshot after the flood's cell may be on its way
		t.Errorf("%d uploads at once: %v", tmp, files)
	}
	// Two more sessions of 1.2 MB each: the total cap (3m) keeps two.
	b.mustOKIn("s1", "import os\nblob = os.urandom(1200 << 10)")
	waitDurable(t, env, "s1", 1)
	b.mustOKIn("s2", "import os\nblob = os.urandom(1200 << 10)")
	waitDurable(t, env, "s2", 1)
	b.mustOKIn("s3", "import os\nblob = os.urandom(1200 << 10)")
	waitDurable(t, env, "s3", 1)
	// The commit evicts after its sidecar is in place: wait for it.
	deadline := time.Now().Add(5 * time.Second)
	for storedCall(env, "s1") != 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
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

// TestServeDurablePrincipals: under bridge serve, two principals' sessions
// of the same name keep apart across a restart of the server: each comes
// back to its own state, and neither can fork into the other's.
func TestServeDurablePrincipals(t *testing.T) {
	env := durableEnv(t, map[string]string{"MCP_BRIDGE_TOKENS_FILE": writeTokens(t, "alice "+aliceToken, "bob "+bobToken)})
	s := startServe(t, env)
	alice, bob := s.mustClient(aliceToken), s.mustClient(bobToken)
	callHTTP(t, alice, map[string]any{"code": "who = 'alice'"})
	callHTTP(t, bob, map[string]any{"code": "who = 'bob'"})
	waitFor(t, 10*time.Second, "both snapshots", func() bool {
		files, _ := filepath.Glob(filepath.Join(env["MCP_BRIDGE_STATE_DIR"], ".bridge", "sessions", "*.snap"))
		return len(files) == 2
	})
	s.stop()
	s2 := startServe(t, env)
	for _, c := range []struct{ token, want string }{{aliceToken, "alice"}, {bobToken, "bob"}} {
		got := text(t, callHTTP(t, s2.mustClient(c.token), map[string]any{"code": "print(who)"}))
		if !strings.HasPrefix(got, c.want+"\nnote: session 'default' restored to call 1 of 1") {
			t.Errorf("%s after the restart: %q", c.want, got)
		}
	}
	// bob cannot reach alice's session by any name: a fork makes bob's own.
	got := text(t, callHTTP(t, s2.mustClient(bobToken), map[string]any{"code": "runtime.fork_session('mine')\nprint('forked')"}))
	if !strings.HasPrefix(got, "forked") {
		t.Errorf("bob's fork: %q", got)
	}
	got = text(t, callHTTP(t, s2.mustClient(aliceToken), map[string]any{"code": "print('who' in globals())", "session": "mine"}))
	if got != "False" {
		t.Errorf("alice's session 'mine' after bob's fork: %q", got)
	}
}

// TestChaosDurable: 20 SIGKILLs of the bridge and 20 kills of the session's
// container, each at a random point after a cell that changed the session
// (while its snapshot may be on its way). Every time, the next call
// restores the session to the call its note names, never older than the
// snapshot stored before the kill, and its n (each cell sets it to its own
// call number) is that of the last cell at or before that call: the call
// may be one of the checks, which read n and change nothing yet take a
// snapshot of the session they restored.
func TestChaosDurable(t *testing.T) {
	requirePodman(t)
	if testRuntime() == "local" {
		t.Fatal("needs a container runtime")
	}
	env := durableEnv(t, map[string]string{"MCP_BRIDGE_LOG_LEVEL": "warn"})
	b := startBridge(t, env)
	const cell = "import mcp.runtime as _rt\nn = _rt._CALL['call']\nhist = globals().get('hist', []) + [n]\nprint(n)"
	const read = "print(n, len(hist))"
	var cells []int // the call numbers of the cells
	runCell := func() {
		t.Helper()
		var c int
		fmt.Sscanf(b.mustOK(cell), "%d", &c)
		cells = append(cells, c)
	}
	check := func(what string, before int) {
		t.Helper()
		r := b.call(map[string]any{"code": read, "timeout": 60})
		if r.IsError && strings.Contains(text(t, r), "exited with code 137") {
			// The call reached the container as it died: the next one restores.
			r = b.call(map[string]any{"code": read, "timeout": 60})
		}
		got := text(t, r)
		if r.IsError {
			t.Fatalf("%s: %q", what, got)
		}
		m := restoredRe.FindStringSubmatch(got)
		if m == nil {
			t.Fatalf("%s: no restore note in %q", what, got)
		}
		var n, k, noted int
		fmt.Sscanf(got, "%d %d", &n, &k)
		fmt.Sscanf(m[2], "%d", &noted)
		want := 0 // the last cell at or before the noted call set n
		for _, c := range cells {
			if c <= noted {
				want = max(want, c)
			}
		}
		if n != want {
			t.Errorf("%s: restored n=%d, but the note names call %d, whose n is %d: %q", what, n, noted, want, got)
		}
		if noted < before {
			t.Errorf("%s: restored to call %d, older than the snapshot of call %d stored before the kill", what, noted, before)
		}
	}
	runCell()
	waitDurable(t, env, "default", 1) // from here on there is always one to restore
	for i := 0; i < 20; i++ {
		runCell()
		time.Sleep(time.Duration(i%5) * 80 * time.Millisecond)
		before := storedCall(env, "default")
		_ = b.signal(syscall.SIGKILL)
		b.Close()
		b = startBridge(t, env)
		check(fmt.Sprintf("bridge kill %d", i), before)
	}
	for i := 0; i < 20; i++ {
		runCell()
		time.Sleep(time.Duration(i%5) * 80 * time.Millisecond)
		before := storedCall(env, "default")
		name := oldestContainer(t, b.pid())
		if out, err := exec.Command(runtimeCLI(), "kill", "--signal", "KILL", name).CombinedOutput(); err != nil {
			t.Fatalf("kill %s: %v %s", name, err, out)
		}
		check(fmt.Sprintf("container kill %d", i), before)
	}
}

// TestDurableOnExit: with MCP_BRIDGE_SESSION_DURABILITY=exit no cell takes
// a snapshot; the idle end takes one before it closes the container, and
// the next call restores it.
func TestDurableOnExit(t *testing.T) {
	requirePodman(t)
	env := durableEnv(t, map[string]string{"MCP_BRIDGE_SESSION_DURABILITY": "exit", "MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT": "2"})
	b := startBridge(t, env)
	b.mustOK(durableSetup)
	time.Sleep(500 * time.Millisecond)
	if n := storedCall(env, "default"); n != 0 {
		t.Errorf("a cell took a snapshot (call %d) with durability on exit", n)
	}
	waitFor(t, 20*time.Second, "the idle end", func() bool { return strings.Contains(b.stderr.String(), "idle for more than 2s") })
	waitDurable(t, env, "default", 1)
	checkRestored(t, b.mustOK(durableCheck), "default", 1, 1)
}
