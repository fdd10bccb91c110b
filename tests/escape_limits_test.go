package tests

// Escape regressions for the resource limits and the link: memory, pids,
// tmpfs sizes, forged frames and output floods (the suite's conventions are
// in security_test.go).

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestEscapeMemoryLimit: growing past MCP_BRIDGE_MEMORY gets the session
// OOM-killed and reported with §8.3's message; only that session is
// restarted, the bridge and the other sessions keep serving.
func TestEscapeMemoryLimit(t *testing.T) {
	requirePodman(t)
	// The loss; TestDurableMemoryLimit has the restore after an OOM kill.
	b := startBridgeLogged(t, map[string]string{"MCP_BRIDGE_MEMORY": "128m", "MCP_BRIDGE_SESSION_DURABILITY": "off"})
	b.call(map[string]any{"code": "bystander = 'here'", "session": "bystander"})
	b.call(map[string]any{"code": "kept = 1", "session": "hog"})
	start := time.Now()
	r := b.call(map[string]any{"code": "blocks = []\nwhile True:\n    blocks.append(b'\\x01' * (8 << 20))", "session": "hog", "timeout": 60})
	sc := structured(t, r)
	if !cgroupLimits(t) {
		// Rootless cgroup v1: --ulimit data holds the cell (RT-4).
		if sc["status"] != "error" || !strings.Contains(text(t, r), "MemoryError") {
			t.Fatalf("structured = %v, text %q; want a MemoryError in the cell", sc, text(t, r))
		}
		if got := text(t, b.call(map[string]any{"code": "bystander", "session": "bystander"})); got != "'here'" {
			t.Errorf("another session after the MemoryError: %q", got)
		}
		return
	}
	want := "memory limit exceeded (MCP_BRIDGE_MEMORY=128m); the session was restarted"
	if sc["error"] != want || sc["exitCode"] != 137.0 || sc["stateLost"] != true || sc["status"] != "error" {
		t.Fatalf("structured = %v, want error %q, exitCode 137, stateLost", sc, want)
	}
	t.Logf("OOM reported after %v", time.Since(start).Round(time.Millisecond))
	if got := text(t, b.call(map[string]any{"code": "print('kept' in globals())", "session": "hog"})); got != "False" {
		t.Errorf("after the OOM kill: %q, want a fresh session", got)
	}
	if got := text(t, b.call(map[string]any{"code": "bystander", "session": "bystander"})); got != "'here'" {
		t.Errorf("another session after the OOM kill: %q", got)
	}
}

// bridgeContainerIDs lists the full ids of the bridge's containers.
func bridgeContainerIDs(pid int) []string {
	if testRuntime() == "kubernetes" {
		return bridgePodUIDs(pid)
	}
	out, _ := exec.Command(runtimeCLI(), "ps", "-q", "--no-trunc", "--filter", "name=^bridge-"+strconv.Itoa(pid)+"-").Output()
	return strings.Fields(string(out))
}

// processesIn counts the host processes in the PID namespace of each
// container id (cgroups would miss rootless containers on cgroup v1, which
// have none of their own), and all host processes.
func processesIn(ids []string) (map[string]int, int) {
	byNS := map[string]string{}
	for _, id := range ids {
		if ns := containerPIDNS(id); ns != "" {
			byNS[ns] = id
		}
	}
	counts := map[string]int{}
	total := 0
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		total++
		ns, err := os.Readlink("/proc/" + e.Name() + "/ns/pid")
		if err != nil {
			continue
		}
		if id, ok := byNS[ns]; ok {
			counts[id]++
		}
	}
	return counts, total
}

var pidNS sync.Map // container id → its PID namespace link, "pid:[inode]"

// containerPIDNS is the PID namespace of a running container, "" if unknown.
func containerPIDNS(id string) string {
	if ns, ok := pidNS.Load(id); ok {
		return ns.(string)
	}
	if testRuntime() == "kubernetes" {
		ns := podPIDNS(id)
		if ns != "" {
			pidNS.Store(id, ns)
		}
		return ns
	}
	out, err := exec.Command(runtimeCLI(), "inspect", "--format", "{{.State.Pid}}", id).Output()
	if err != nil {
		return ""
	}
	ns, err := os.Readlink("/proc/" + strings.TrimSpace(string(out)) + "/ns/pid")
	if err != nil {
		return ""
	}
	pidNS.Store(id, ns)
	return ns
}

// TestEscapeForkBomb: a fork bomb is held by the pids limit (production
// default 128): the call ends within its bound, no container ever holds
// more than 128 processes, the next call of the same session works, and
// another session is untouched. Two bombs: the classic loop in the worker
// itself, and a bomb in a child while the cell just sleeps (so the cell
// obeys the interrupt and the session is kept).
func TestEscapeForkBomb(t *testing.T) {
	requirePodman(t)
	b := startBridgeLogged(t, nil)
	b.call(map[string]any{"code": "bystander = 'here'", "session": "bystander"})
	pid := b.pid()
	bombs := []struct{ name, session, code string }{
		{"classic", "bomb", "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"},
		{"in a child", "bomb2", "import os, time\ndef bomb():\n    while True:\n        try:\n            os.fork()\n        except OSError:\n            pass\nif os.fork() == 0:\n    bomb()\ntime.sleep(60)"},
	}
	for _, bomb := range bombs {
		b.mustOK("print('warm')") // the default session has its container
		b.call(map[string]any{"code": "print('ready')", "session": bomb.session})
		_, baseline := processesIn(nil)
		done := make(chan struct{})
		var maxIn, maxTotal int
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ids []string
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				case <-time.After(100 * time.Millisecond):
				}
				if i%5 == 0 {
					ids = bridgeContainerIDs(pid)
				}
				counts, total := processesIn(ids)
				maxTotal = max(maxTotal, total)
				for _, n := range counts {
					maxIn = max(maxIn, n)
				}
			}
		}()
		start := time.Now()
		r := b.call(map[string]any{"code": bomb.code, "session": bomb.session, "timeout": 4})
		elapsed := time.Since(start)
		close(done)
		wg.Wait()
		sc := structured(t, r)
		t.Logf("%s fork bomb: %v, status %v, stateLost %v; at most %d processes in one container; host processes %d before, at most %d during",
			bomb.name, elapsed.Round(time.Millisecond), sc["status"], sc["stateLost"], maxIn, baseline, maxTotal)
		if sc["status"] != "timeout" && sc["status"] != "error" {
			t.Errorf("%s fork bomb result: %v, want a timeout or an error", bomb.name, sc)
		}
		if elapsed > 15*time.Second {
			t.Errorf("%s fork bomb: the call took %v; timeout 4 s + 2 s grace + removal should bound it", bomb.name, elapsed)
		}
		if maxIn < 10 {
			t.Errorf("%s fork bomb: at most %d processes in a container; the measurement did not work", bomb.name, maxIn)
		}
		if maxIn > 128 {
			t.Errorf("%s fork bomb: a container held %d processes; --pids-limit 128 should cap it", bomb.name, maxIn)
		}
		r = b.call(map[string]any{"code": "print('after the bomb')", "session": bomb.session, "timeout": 30})
		if got := text(t, r); !strings.HasPrefix(got, "after the bomb") {
			t.Errorf("%s fork bomb: the next call of the session: %q", bomb.name, got)
		}
		// Whatever still runs is held by the same limit. (When the cell
		// obeys the interrupt, the session is kept, and so are the bomb's
		// processes: reported, not asserted.)
		counts, total := processesIn(bridgeContainerIDs(pid))
		t.Logf("after the %s bomb: processes per container %v, host processes %d", bomb.name, counts, total)
		for id, n := range counts {
			if n > 128 {
				t.Errorf("container %.12s holds %d processes after the bomb", id, n)
			}
		}
	}
	if got := text(t, b.call(map[string]any{"code": "bystander", "session": "bystander", "timeout": 30})); got != "'here'" {
		t.Errorf("another session after the bombs: %q", got)
	}
}

// TestEscapeFillTmpfs: filling /tmp and /workspace ends with ENOSPC at their
// size limits (64m, 128m); the session survives with its state, and the
// space is usable again after a delete.
func TestEscapeFillTmpfs(t *testing.T) {
	requirePodman(t)
	b := startBridgeLogged(t, nil)
	b.mustOK("kept = 'yes'")
	code := `import errno, json, os
out = {}
chunk = b'\1' * (1 << 20)
for d, cap in (('/tmp', 64 << 20), ('/workspace', 128 << 20)):
    p = d + '/fill'
    n, err = 0, None
    fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        while n <= 4 * cap:
            n += os.write(fd, chunk)
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e.errno))
    finally:
        os.close(fd)
    os.unlink(p)
    with open(d + '/after', 'wb') as f:
        f.write(b'x' * 4096)
    os.unlink(d + '/after')
    out[d] = {'bytes': n, 'err': err}
print(json.dumps(out))`
	var got map[string]struct {
		Bytes int64  `json:"bytes"`
		Err   string `json:"err"`
	}
	secResult(t, b, map[string]any{"code": code, "timeout": 60}, &got)
	for d, limit := range map[string]int64{"/tmp": 64 << 20, "/workspace": 128 << 20} {
		g := got[d]
		if g.Err != "ENOSPC" || g.Bytes > limit || g.Bytes < limit-(8<<20) {
			t.Errorf("filling %s: wrote %d bytes, error %q; want ENOSPC after about %d bytes", d, g.Bytes, g.Err, limit)
		}
	}
	if got := b.mustOK("print(kept)"); got != "yes" {
		t.Errorf("the session lost its state: %q", got)
	}
}

// forgeFramesCode writes forged JSON-RPC frames to fd 1, fd 2 and every pipe
// and socket fd of the worker (the link is one of them): call_tool requests for each of servers (tool counter,
// and add_tool for forged_tool), as requests and as notifications.
const forgeFramesCode = `import json, os, stat
def frame(obj):
    return (json.dumps(obj) + '\n').encode()
def pipe_fds():
    fds = {1, 2}
    for name in os.listdir('/proc/self/fd'):
        try:
            mode = os.fstat(int(name)).st_mode
            if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
                fds.add(int(name))
        except (OSError, ValueError):
            pass
    return sorted(fds)
def forge(servers, tag):
    written = []
    for fd in pipe_fds():
        for srv in servers:
            for i, (tool, args) in enumerate((('counter', {}), ('add_tool', {'name': 'forged_tool'}))):
                for with_id in (True, False):
                    msg = {'jsonrpc': '2.0', 'method': 'call_tool', 'params': {'server': srv, 'tool': tool, 'arguments': args}}
                    if with_id:
                        msg['id'] = 'forged-%s-%d-%s-%d' % (tag, fd, srv, i)
                    try:
                        os.write(fd, frame(msg))
                        written.append(fd)
                    except OSError:
                        pass
    return sorted(set(written))
`

// TestEscapeForgedFrames: user code that writes JSON-RPC frames to fd 1, fd
// 2 and every pipe and socket it holds, or calls the link object directly, cannot
// reach a server outside the call's servers (LNK-3, PXY-7): the forged
// requests of a not-granted server never run, which the server's counter
// and tool list show later through a legitimate call. Forged replies to
// the host's own requests break nothing but, at worst, the forging session.
func TestEscapeForgedFrames(t *testing.T) {
	requirePodman(t)
	b := startBridgeLogged(t, withServers(t, map[string]any{"granted": fake(), "secret": fake()}, nil))
	// During a call that grants only "granted".
	code := forgeFramesCode + `import sys, time
written = forge(['secret', 'granted'], 'a')
time.sleep(1)  # the host handles the forged frames while this call is active
try:
    sys.modules['mcp.runtime'].LINK.call('call_tool', {'server': 'secret', 'tool': 'counter', 'arguments': {}})
    link = 'called'
except Exception as e:
    link = '%s: %s' % (type(e).__name__, e)
try:
    await runtime.call_tool('secret', 'add_tool', {'name': 'forged_tool'})
    api = 'called'
except Exception as e:
    api = '%s: %s' % (type(e).__name__, e)
# A thread keeps forging after the call ends, between calls and into the next.
import threading
def later():
    for _ in range(30):
        forge(['secret'], 'b')
        time.sleep(0.1)
threading.Thread(target=later, daemon=True).start()
print(json.dumps({'written': written, 'link': link, 'api': api}))`
	var got struct {
		Written []int  `json:"written"`
		Link    string `json:"link"`
		API     string `json:"api"`
	}
	secResult(t, b, map[string]any{"code": code, "servers": []string{"granted"}, "session": "forge", "timeout": 30}, &got)
	t.Logf("forged frames written to fds %v", got.Written)
	want := "MCPError: Server 'secret' is not available"
	if !strings.HasPrefix(got.Link, want) {
		t.Errorf("LINK.call for a server not granted: %q, want %q", got.Link, want)
	}
	if !strings.HasPrefix(got.API, want) {
		t.Errorf("runtime.call_tool for a server not granted: %q, want %q", got.API, want)
	}
	// The next call of the forging session grants nothing; the thread keeps forging.
	b.call(map[string]any{"code": "import time\ntime.sleep(3)", "session": "forge", "timeout": 30})
	// A legitimate call to "secret" from another session: none of the
	// forged requests ran, so this is the server's first counter call and
	// it never got forged_tool.
	if got := b.mustOK("print(await mcp_secret.counter())", "secret"); got != "1" {
		t.Errorf("secret's counter = %s, want 1: a forged call_tool reached a server outside the call's servers", got)
	}
	if got := b.mustOK("print('forged_tool' in [t['name'] for t in runtime.list_tools_sync('secret')])"); got != "False" {
		t.Errorf("secret has forged_tool: a forged add_tool reached a server outside the call's servers")
	}
	t.Logf("granted's counter after the forged frames: %s", b.mustOK("print(await mcp_granted.counter())", "granted"))

	// Forged replies to the host's requests for the ids a counter would
	// give (0..31), first a well-formed result, then garbage; and a forged
	// ready and output. Exec ids are random, so none of them answers this
	// call or the next one: both end with their real result.
	forgeReplies := forgeFramesCode + `
for fd in pipe_fds():
    for i in range(32):
        for msg in ({'jsonrpc': '2.0', 'id': i, 'result': {'outcome': 'ok', 'exitCode': 0, 'result': "'forged'", 'truncated': False, 'outputBytes': 0, 'reset': False}},
                    {'jsonrpc': '2.0', 'id': i, 'error': {'code': -32000, 'message': 'forged'}},
                    {'jsonrpc': '2.0', 'method': 'ready', 'params': {'python': '2.7.0', 'pid': 1}},
                    {'jsonrpc': '2.0', 'method': 'output', 'params': {'call': i, 'stream': 'stdout', 'data': 'forged output'}}):
            try:
                os.write(fd, frame(msg))
            except OSError:
                pass
print('forger done')`
	for i, garbage := range []string{"", "{'jsonrpc': '2.0', 'id': i, 'result': 5}"} {
		c := forgeReplies
		if garbage != "" {
			c = strings.Replace(c, "for msg in (", "for msg in ("+garbage+", ", 1)
		}
		start := time.Now()
		r := b.call(map[string]any{"code": c, "session": "forge", "timeout": 10})
		sc := structured(t, r)
		delete(sc, "stdout")
		delete(sc, "stderr")
		t.Logf("forged replies (variant %d) after %v: %v", i, time.Since(start).Round(time.Millisecond), sc)
		if time.Since(start) > 20*time.Second {
			t.Errorf("forged replies (variant %d): the call took %v", i, time.Since(start))
		}
		// Its own real reply ends the call: the cell's last line is in its
		// text and no forged result is taken. A forged reply that ended the
		// call would leave "forger done" outside it. The forged output frames
		// written to fds 1 and 2 are fd-level output, ordered by arrival
		// (OUT-1): on a loaded machine some arrive after the print.
		if got := text(t, r); !strings.Contains(got, "forger done") || sc["result"] != nil {
			t.Errorf("forged replies (variant %d) answered the call: result %v, text ends %q", i, sc["result"], tail(got, 200))
		}
		r = b.call(map[string]any{"code": "print('alive')", "session": "forge", "timeout": 30})
		if got := text(t, r); !strings.HasPrefix(got, "alive") {
			t.Errorf("after forged replies (variant %d), the forging session answers %q", i, got)
		}
		t.Logf("next call: %v", structured(t, r))
	}
	if got := b.mustOK("print(await mcp_secret.counter())", "secret"); got != "2" {
		t.Errorf("secret's counter = %s, want 2", got)
	}
}

// TestEscapeOutputFlood: megabytes written straight to fd 1, and junk lines
// (5 MB, and 20 MB over the frame cap) written to every pipe the worker
// holds, do not break the channel: the calls return and the next call works.
func TestEscapeOutputFlood(t *testing.T) {
	requirePodman(t)
	b := startBridgeLogged(t, nil)
	b.mustOK("kept = 'yes'")
	start := time.Now()
	r := b.call(map[string]any{"code": "import os\nn = 0\nwhile n < 5_000_000:\n    n += os.write(1, b'x' * (5_000_000 - n))\nprint('flooded')", "timeout": 30})
	sc := structured(t, r)
	if r.IsError || sc["truncated"] != true {
		t.Errorf("5 MB to fd 1 (%v): isError=%v, truncated=%v", time.Since(start).Round(time.Millisecond), r.IsError, sc["truncated"])
	}
	if n := len(text(t, r)); n > 32768+256 {
		t.Errorf("the flood's text is %d bytes, over the output cap", n)
	}
	// fd-level output is ordered by arrival (OUT-1), so 'flooded' may sit
	// anywhere; the spill file has all of it.
	got := b.mustOK("import glob\np = sorted(glob.glob('/workspace/.bridge/output-*.txt'))[-1]\nd = open(p).read()\nprint(d.count('x') >= 5_000_000, 'flooded' in d)")
	if got != "True True" {
		t.Errorf("the spill file after 5 MB to fd 1: %s", got)
	}
	code := forgeFramesCode + `
for size in (5_000_000, 20_000_000):
    junk = b'y' * size + b'\n'
    for fd in pipe_fds():
        if fd in (1, 2):
            continue
        try:
            view = memoryview(junk)
            while view:
                view = view[os.write(fd, view):]
        except OSError:
            pass
print('junk written')`
	start = time.Now()
	if got := text(t, b.call(map[string]any{"code": code, "timeout": 60})); got != "junk written" {
		t.Errorf("junk lines on the frame pipes (%v): %q", time.Since(start).Round(time.Millisecond), got)
	}
	// The junk may cut through the snapshot on its way: the next result
	// then says that call is not durable, and the session goes on.
	if got := b.mustOK("print(kept)"); got != "yes" && !strings.HasPrefix(got, "yes\nnote: call ") {
		t.Errorf("after the floods: %q", got)
	}
	// A junk line without its newline swallows the sandbox's next frame
	// (here the output of print): the session can only hurt itself, the
	// call still ends in time, and the next call works.
	code = forgeFramesCode + `
for fd in pipe_fds():
    if fd not in (1, 2):
        try:
            os.write(fd, b'z' * 1000)
        except OSError:
            pass
print('unterminated')`
	start = time.Now()
	r = b.call(map[string]any{"code": code, "timeout": 2})
	t.Logf("unterminated junk: %v, %q", time.Since(start).Round(time.Millisecond), tail(text(t, r), 200))
	if time.Since(start) > 15*time.Second {
		t.Errorf("the call after an unterminated junk line took %v", time.Since(start))
	}
	if got := text(t, b.run("print('alive')")); !strings.HasPrefix(got, "alive") {
		t.Errorf("after an unterminated junk line: %q", got)
	}
}
