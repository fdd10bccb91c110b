package tests

// Hostile code against the host process (issue 13, docs/SECURITY.md): each
// test runs an attack from inside run_python, as uid 65534, against the
// bridge itself rather than the container: jamming the link, flooding it
// with requests or stderr, forging replies, killing the supervisor. The
// bridge must stay responsive, bounded in memory and CPU, honest in what it
// reports, and leave no container behind.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// jamCode defines the attacker's tools: the worker's private link
// descriptor (found through the link object, as /proc/self/fd would), a
// stop of everything that reads or watches the container's stdin (the
// worker's link reader, blocked on a lock it takes for the first reply it
// reads, and the supervisor, the parent of the same uid, by SIGSTOP), and
// frames written straight to the link.
const jamCode = `import json, os, signal, sys, threading, time
LINK = sys.modules['mcp.runtime'].LINK
def put(obj):
    data = memoryview((json.dumps(obj) + '\n').encode())
    with LINK._wlock:
        while data:
            data = data[os.write(LINK._wfd, data):]
def stop_reader():
    LINK._plock.acquire()
    os.kill(os.getppid(), signal.SIGSTOP)
def jam(count=None, pad=0):
    # Requests for an unknown method whose name is 1 MiB (a host that echoes
    # it fills the container's stdin at once), then many small ones (their
    # error replies fill it too, only more slowly). pad lengthens the small
    # ones' ids, which every reply echoes, so the replies fill deep
    # transport buffers (a pod's) fast too.
    name = 'x' * (1 << 20)
    tag = 'p' * pad
    i = 0
    while count is None or i < count:
        i += 1
        try:
            put({'jsonrpc': '2.0', 'id': 'jam-%d' % i, 'method': name})
            for j in range(2000):
                put({'jsonrpc': '2.0', 'id': 'small-%d-%d%s' % (i, j, tag), 'method': 'nope'})
        except OSError:
            return
def jam_later():
    # Jams from a daemon thread once this call's reply has left.
    def run():
        time.sleep(1)
        stop_reader()
        jam()
    threading.Thread(target=run, daemon=True).start()
    print('armed')
`

// procStatus reads a "Vm…" field of /proc/<pid>/status in KiB.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatalf("status of %d: %v", pid, err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// cpuSeconds is the user+system CPU time of pid so far.
func cpuSeconds(t *testing.T, pid int) float64 {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatalf("stat of %d: %v", pid, err)
	}
	f := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100 // USER_HZ
}

// removeLeftovers removes containers of a bridge this test started, so a
// failure on unfixed code leaves nothing running.
func removeLeftovers(t *testing.T, pid int) {
	t.Cleanup(func() {
		prefix := "bridge-" + strconv.Itoa(pid) + "-"
		out, _ := exec.Command("podman", "ps", "-a", "--format", "{{.Names}}").Output()
		for _, n := range strings.Fields(string(out)) {
			if strings.HasPrefix(n, prefix) {
				_ = exec.Command("podman", "rm", "-f", "-t", "0", n).Run()
			}
		}
	})
}

// waitNoContainers fails unless the bridge with pid has no container left
// within d.
func waitNoContainers(t *testing.T, pid int, d time.Duration, what string) {
	t.Helper()
	start := time.Now()
	if testRuntime() == "kubernetes" {
		waitNoSandboxes(t, pid, d, what)
		return
	}
	for countContainers("bridge-"+strconv.Itoa(pid)+"-") > 0 {
		if time.Since(start) > d {
			t.Fatalf("%s: containers still there %v later", what, d)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%s: containers gone after %v", what, time.Since(start).Round(10*time.Millisecond))
}

// TestHostileLinkJamExec: with stdin's readers stopped and the link jammed,
// `bridge exec` still ends, bounded, and removes its container. The
// timeout is long enough for a container start on a loaded machine, so the
// jam is in place before it: the call ends with a timeout result or with
// the stalled-link error, whichever bound comes first.
func TestHostileLinkJamExec(t *testing.T) {
	requirePodman(t)
	if testRuntime() == "local" {
		t.Fatal("needs a container runtime")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bridgeBin, "exec", "--timeout", "30", jamCode+"stop_reader()\njam()\n")
	cmd.Env = baseEnv(t, nil)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	removeLeftovers(t, cmd.Process.Pid)
	err := cmd.Wait()
	took := time.Since(start)
	if ctx.Err() != nil {
		t.Fatalf("bridge exec --timeout 30 with a jammed link still running after %v\nstderr: %s", took, tail(errb.String(), 3000))
	}
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	}
	t.Logf("bridge exec ended after %v with exit %d", took.Round(10*time.Millisecond), code)
	timedOut := code == 124 && strings.HasPrefix(out.String(), "status: timeout\n")
	stalled := code == 1 && strings.Contains(out.String(), "stopped reading its link")
	if !timedOut && !stalled {
		t.Fatalf("exit %d, stdout %q; want a timeout result (124) or the stalled-link error (1)\nstderr: %s", code, out.String(), tail(errb.String(), 3000))
	}
	waitNoContainers(t, cmd.Process.Pid, 10*time.Second, "after bridge exec")
}

// TestHostileLinkJamRun: under `bridge run`, the jammed call answers, other
// sessions keep answering meanwhile, and the jammed session's next call
// runs in a fresh container that reports the state loss.
func TestHostileLinkJamRun(t *testing.T) {
	requirePodman(t)
	if testRuntime() == "local" {
		t.Fatal("needs a container runtime")
	}
	// The jammed session starts afresh (no snapshot to restore).
	b := startBridge(t, map[string]string{"MCP_BRIDGE_SESSION_DURABILITY": "off"})
	removeLeftovers(t, b.pid())
	b.call(map[string]any{"code": "x = 1", "session": "jam"})
	b.call(map[string]any{"code": "y = 1", "session": "other"})
	type answer struct {
		r   *mcp.CallToolResult
		err error
		at  time.Duration
	}
	jammed := make(chan answer, 1)
	start := time.Now()
	go func() {
		r, err := b.callArgsWithin(90*time.Second, map[string]any{"code": jamCode + "stop_reader()\njam()\n", "session": "jam", "timeout": 60})
		jammed <- answer{r, err, time.Since(start)}
	}()
	time.Sleep(3 * time.Second) // the link is jammed by now
	r, err := b.callArgsWithin(60*time.Second, map[string]any{"code": "print(y)", "session": "other"})
	if err != nil || r.IsError || !strings.HasPrefix(text(t, r), "1") {
		t.Fatalf("another session during the jam: %v %v", err, r)
	}
	a := <-jammed
	if a.err != nil {
		t.Fatalf("the jammed call never answered: %v\nstderr: %s", a.err, tail(b.stderr.String(), 4000))
	}
	sc := structured(t, a.r)
	t.Logf("jammed call answered after %v: %v", a.at.Round(10*time.Millisecond), sc["error"])
	if sc["status"] != "error" || !strings.Contains(fmt.Sprint(sc["error"]), "stopped reading its link") || sc["stateLost"] != true {
		t.Errorf("jammed call: %v, want an error naming the stalled link, with stateLost", sc)
	}
	r, err = b.callArgsWithin(60*time.Second, map[string]any{"code": "print('x' in globals())", "session": "jam"})
	if err != nil {
		t.Fatalf("the next call of the jammed session: %v", err)
	}
	sc = structured(t, r)
	if r.IsError || !strings.HasPrefix(text(t, r), "False") {
		t.Errorf("next call of the jammed session: %s", text(t, r))
	}
	t.Logf("next call: stateLost=%v lossReason=%v", sc["stateLost"], sc["lossReason"])
}

// TestHostileLinkJamEvict: a session whose idle container jams the link
// from a daemon thread is evicted (MCP_BRIDGE_MAX_SESSIONS=1) without
// blocking the sessions manager: the call that needs the slot answers, and
// so do the next ones.
func TestHostileLinkJamEvict(t *testing.T) {
	requirePodman(t)
	if testRuntime() == "local" {
		t.Fatal("needs a container runtime")
	}
	b := startBridge(t, map[string]string{"MCP_BRIDGE_MAX_SESSIONS": "1"})
	removeLeftovers(t, b.pid())
	b.call(map[string]any{"code": jamCode + "jam_later()", "session": "jam"})
	// The daemon thread jams the idle link within a few seconds; the
	// bridge would declare it dead 10 s after its first blocked write.
	time.Sleep(8 * time.Second)
	for i := 0; i < 2; i++ {
		start := time.Now()
		r, err := b.callArgsWithin(60*time.Second, map[string]any{"code": "print('ok')", "session": "other"})
		if err != nil {
			t.Fatalf("call %d after the jammed session had to be evicted: %v\nstderr: %s", i, err, tail(b.stderr.String(), 4000))
		}
		if r.IsError || !strings.HasPrefix(text(t, r), "ok") {
			t.Fatalf("call %d: %s", i, text(t, r))
		}
		t.Logf("call %d answered after %v", i, time.Since(start).Round(10*time.Millisecond))
	}
}

// TestHostileLinkJamShutdown: with an idle session jamming the link, the
// bridge still exits on stdin EOF, and its containers are gone within 10 s
// of that, or of a SIGKILL of the bridge.
func TestHostileLinkJamShutdown(t *testing.T) {
	requirePodman(t)
	if testRuntime() == "local" {
		t.Fatal("needs a container runtime")
	}
	for _, how := range []string{"stdin EOF", "SIGKILL"} {
		t.Run(strings.ReplaceAll(how, " ", "_"), func(t *testing.T) {
			b := startBridge(t, nil)
			pid := b.pid()
			removeLeftovers(t, pid)
			b.call(map[string]any{"code": jamCode + "jam_later()", "session": "jam"})
			time.Sleep(8 * time.Second) // the idle link is jammed, not yet declared dead
			exited := make(chan struct{})
			if how == "SIGKILL" {
				_ = b.signal(syscall.SIGKILL)
				if testRuntime() == "kubernetes" {
					// A jammed attach does not reach the pod's stdin when its
					// client dies, so the pod waits for the next bridge's sweep
					// (docs/SECURITY.md, per-backend table): within 30 s of its
					// Lease's expiry, 15 s after the kill.
					killedAt := time.Now()
					next := startBridge(t, nil)
					k := requireKube(t)
					for len(k.bridgePods(t, pid)) > 0 {
						if time.Since(killedAt) > 50*time.Second {
							t.Fatalf("pods of the killed, jammed bridge still there %v later: %v", time.Since(killedAt).Round(time.Second), k.bridgePods(t, pid))
						}
						time.Sleep(500 * time.Millisecond)
					}
					t.Logf("pods of the killed, jammed bridge swept %v after the kill", time.Since(killedAt).Round(100*time.Millisecond))
					next.mustOK("print(1)")
					return
				}
				waitNoContainers(t, pid, 10*time.Second, "after SIGKILL of the bridge")
				return
			}
			go func() {
				b.end() // stdin EOF (a pod's deletion in the cluster); waits for the bridge to exit
				close(exited)
			}()
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				_ = b.signal(syscall.SIGKILL)
				t.Fatalf("the bridge did not exit within 30 s of stdin EOF\nstderr: %s", tail(b.stderr.String(), 4000))
			}
			waitNoContainers(t, pid, 10*time.Second, "after stdin EOF")
		})
	}
}

// TestHostileRequestFlood: with the link jammed, 100 requests of 14 MiB
// written straight to the link must not be held by the host: the bridge's
// peak RSS stays bounded.
func TestHostileRequestFlood(t *testing.T) {
	requirePodman(t)
	if testRuntime() == "local" {
		t.Fatal("needs a container runtime")
	}
	b := startBridge(t, nil)
	pid := b.pid()
	removeLeftovers(t, pid)
	b.call(map[string]any{"code": "print(1)", "session": "flood"})
	before := procStatus(t, pid, "VmHWM")
	cpu := cpuSeconds(t, pid)
	code := jamCode + `stop_reader()
t = threading.Thread(target=jam, args=(16,), daemon=True)
t.start()
t.join(20)
pad = 'a' * (14 << 20)
def flood():
    for i in range(100):
        put({'jsonrpc': '2.0', 'id': 'big-%d' % i, 'method': 'call_tool',
             'params': {'server': 'nope', 'tool': 't', 'arguments': {'pad': pad}}})
f = threading.Thread(target=flood, daemon=True)
f.start()
f.join(50)
print('flooded' if not f.is_alive() else 'blocked')
`
	start := time.Now()
	r, err := b.callArgsWithin(100*time.Second, map[string]any{"code": code, "session": "flood", "timeout": 60})
	peak := procStatus(t, pid, "VmHWM")
	t.Logf("flood call after %v: err=%v; bridge VmHWM %d MiB before, %d MiB after; CPU %.1f s",
		time.Since(start).Round(10*time.Millisecond), err, before>>10, peak>>10, cpuSeconds(t, pid)-cpu)
	if err == nil {
		t.Logf("result: %v", structured(t, r)["error"])
	}
	if grew := peak - before; grew > 256<<10 {
		t.Errorf("bridge peak RSS grew by %d MiB under the request flood; want < 256 MiB", grew>>10)
	}
	if err != nil {
		t.Fatalf("the flooding call never answered: %v", err)
	}
	if r, err := b.callArgsWithin(60*time.Second, map[string]any{"code": "print('ok')", "session": "flood"}); err != nil || !strings.HasPrefix(text(t, r), "ok") {
		t.Fatalf("the session after the flood: %v", err)
	}
}

// TestHostileStderrFlood: 64 MiB written without a newline to the
// supervisor's stderr (the container's real stderr) costs the host linear
// work: far less CPU than the quadratic append it replaced (tens of seconds).
func TestHostileStderrFlood(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, map[string]string{"MCP_BRIDGE_LOG_LEVEL": "info"})
	pid := b.pid()
	removeLeftovers(t, pid)
	b.run("print(1)")
	cpu := cpuSeconds(t, pid)
	before := procStatus(t, pid, "VmHWM")
	r := b.call(map[string]any{"code": `import os
fd = os.open('/proc/%d/fd/2' % os.getppid(), os.O_WRONLY)
chunk = b'e' * (1 << 20)
for _ in range(64):
    os.write(fd, chunk)
os.close(fd)
print('done')`, "timeout": 110})
	used := cpuSeconds(t, pid) - cpu
	peak := procStatus(t, pid, "VmHWM")
	t.Logf("stderr flood: %s; bridge CPU %.1f s, VmHWM %d -> %d MiB", strings.TrimSpace(text(t, r)), used, before>>10, peak>>10)
	if os.Geteuid() == 0 && testRuntime() == "podman" {
		// Rootful podman runs each session in its own user namespace: the
		// container's stderr pipe belongs to an unmapped host uid, so the
		// reopen is refused and this vector is closed. The flood itself is
		// run by the rootless podman and Docker subsets of CI.
		if !strings.Contains(text(t, r), "PermissionError: [Errno 13] Permission denied: '/proc/") {
			t.Fatalf("rootful podman: reopening the supervisor's stderr was not refused: %s", text(t, r))
		}
		b.expectText("print('alive')", "alive", false)
		return
	}
	if r.IsError || !strings.HasPrefix(text(t, r), "done") {
		t.Fatalf("flood call: %s", text(t, r))
	}
	if used > 15 {
		t.Errorf("the bridge spent %.1f s of CPU on 64 MiB of stderr without newlines; want linear work (< 15 s)", used)
	}
	b.expectText("print('alive')", "alive", false)
}

// TestHostileForgedExecReply: a forged reply to the exec request with an
// 1 MiB result and error is capped by the host, not only by the sandbox.
func TestHostileForgedExecReply(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, nil)
	removeLeftovers(t, b.pid())
	b.call(map[string]any{"code": "print(1)", "session": "forge", "timeout": 60})
	r := b.call(map[string]any{"code": jamCode + execIDCode + `big = 'r' * (1 << 20)
put({'jsonrpc': '2.0', 'id': exec_id(), 'result': {'outcome': 'exception', 'exitCode': 1, 'result': big, 'error': big,
     'truncated': False, 'outputBytes': 0, 'reset': False}})
import time
time.sleep(5)`, "session": "forge", "timeout": 60})
	raw := text(t, r)
	sc := structured(t, r)
	t.Logf("forged exec reply: text %d bytes, truncated=%v", len(raw), sc["truncated"])
	if len(raw) > 256<<10 {
		t.Errorf("the MCP response text is %d bytes; the host must cap every field of the exec reply", len(raw))
	}
	if sc["truncated"] != true {
		t.Errorf("truncated = %v, want true", sc["truncated"])
	}
	b.expectText("print('alive')", "alive", false)
}

// TestHostileSupervisorKilled: a SIGKILL of the supervisor from inside is
// reported as the exit it is, not as a memory limit; a real memory bomb
// still says memory limit exceeded.
func TestHostileSupervisorKilled(t *testing.T) {
	requirePodman(t)
	if testRuntime() == "local" {
		t.Fatal("needs a container runtime")
	}
	b := startBridge(t, map[string]string{"MCP_BRIDGE_MEMORY": "128m"})
	removeLeftovers(t, b.pid())
	b.run("kept = 1")
	sc := structured(t, b.run("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nimport time\ntime.sleep(10)"))
	t.Logf("supervisor killed: %v", sc)
	// 137 as a rule; the runtime may report another code when it loses the
	// race for the exit status under load. Never a memory limit.
	if testRuntime() == "kubernetes" {
		// In a pod the supervisor is PID 1 of the pod's PID namespace, and
		// the kernel drops a SIGKILL sent to it from inside: the session
		// lives on with its state (docs/SECURITY.md, per-backend table).
		if sc["error"] != nil || sc["stateLost"] == true || b.mustOK("print(kept)") != "1" {
			t.Errorf("after SIGKILL of the pod's PID 1: %v, want the session alive with its state", sc)
		}
	} else if e := fmt.Sprint(sc["error"]); !strings.HasPrefix(e, "Sandbox exited with code ") || sc["stateLost"] != true {
		t.Errorf("after SIGKILL of the supervisor: error %q, want %q", e, "Sandbox exited with code 137")
	}
	sc = structured(t, b.run("blob = b'x' * (600 * 1024 * 1024)"))
	want := "memory limit exceeded (MCP_BRIDGE_MEMORY=128m); the session was restarted"
	if !cgroupLimits(t) {
		// Rootless cgroup v1: --ulimit data stops the bomb in the cell (RT-4);
		// what matters here is that nothing claims an OOM kill.
		want = "MemoryError"
		if sc["error"] != want {
			t.Errorf("memory bomb: %v, want error %q", sc, want)
		}
	} else if sc["error"] != want || sc["exitCode"] != 137.0 {
		t.Errorf("memory bomb: %v, want error %q, exitCode 137", sc, want)
	}
	sc = structured(t, b.run("import os\nos._exit(99)"))
	if sc["error"] != "Sandbox exited with code 1" {
		t.Errorf("a worker exiting with the OOM code claims an OOM: %v", sc)
	}
}

// TestHostileDeepFrame: a request nested 100,000 deep, past the host
// decoder's depth limit, written straight to the link, is answered with an
// error naming its id (-32600), whether the id comes before or after the
// nesting; the call waiting on it used to wait forever. The link keeps
// working afterwards.
func TestHostileDeepFrame(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, nil)
	b.expectText(`import concurrent.futures, json, os, sys
LINK = sys.modules['mcp.runtime'].LINK
DEEP = '[' * 100000 + ']' * 100000
FRAMES = {
    'id first': lambda i: '{"jsonrpc":"2.0","id":%d,"method":"memory_get","params":%s}' % (i, DEEP),
    'id last': lambda i: '{"jsonrpc":"2.0","method":"memory_get","params":{"key":%s},"id":%d}' % (DEEP, i),
}
out = []
for name, frame in FRAMES.items():
    fut = concurrent.futures.Future()
    id_ = LINK._register(fut)
    view = memoryview((frame(id_) + '\n').encode())
    with LINK._wlock:
        while view:
            view = view[os.write(LINK._wfd, view):]
    try:
        fut.result(timeout=15)
        out.append(name + ': a result')
    except TimeoutError:
        out.append(name + ': no reply in 15 s')
    except Exception as e:
        out.append('%s: %s' % (name, str(e)[:100]))
print('\n'.join(out))
print(list_memories())`, `id first: Invalid request: the frame could not be decoded: invalid character '[' exceeded max depth
id last: Invalid request: the frame could not be decoded: invalid character '[' exceeded max depth
[]`, false)
}
