package tests

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// wrapped is an npx-style config entry: a wrapper process that starts the
// fake server as its own child and waits for it, so the server is a
// grandchild of the bridge and only the process group reaches it.
// It is sh, which the bridge's image has too (python3 it has not); "exit"
// after the call keeps sh from exec'ing its last command.
func wrapped(args ...string) map[string]any {
	return map[string]any{"command": "sh", "args": append([]string{"-c", `"$@"; exit $?`, "sh", fakeBin}, args...)}
}

// pidOf reads a fake server's pidfile; 0 when absent.
func pidOf(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return pid
}

// isFake reports whether pid is a live fake server (and not a recycled pid).
func isFake(pid int) bool {
	if pid <= 0 {
		return false
	}
	cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !strings.Contains(string(cmd), fakeBin) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(stat), ") Z ")
}

// fakesAlive lists live fake-server processes whose pidfile is under dir.
func fakesAlive(dir string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err == nil && strings.Contains(string(cmd), fakeBin) && strings.Contains(string(cmd), dir) && isFake(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// assertFakesGone fails if fake servers with pidfiles under dir outlive d.
func assertFakesGone(t *testing.T, dir string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		left := fakesAlive(dir)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("server processes left after %v: %v", d, left)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestChaosKillServers SIGKILLs random child servers (one behind an
// npx-style wrapper) at least 200 times during loops of proxied calls: the
// bridge stays up, every call is answered with a result or a clear error,
// calls after each restart succeed, and nothing leaks.
func TestChaosKillServers(t *testing.T) {
	requirePodman(t)
	piddir := t.TempDir()
	names := []string{"s0", "s1", "s2", "s3", "s4", "w5"}
	servers := map[string]any{}
	for _, n := range names {
		pidfile := filepath.Join(piddir, n+".pid")
		if strings.HasPrefix(n, "w") {
			servers[n] = wrapped("--pidfile", pidfile)
		} else {
			servers[n] = fake("--pidfile", pidfile)
		}
	}
	b := startBridge(t, withServers(t, servers, map[string]string{"MCP_BRIDGE_LOG_LEVEL": "warn"}))
	// Start every server once.
	code := "import asyncio\nawait asyncio.gather(" + strings.Join(func() []string {
		var s []string
		for _, n := range names {
			s = append(s, "mcp_"+n+".counter()")
		}
		return s
	}(), ", ") + ")"
	b.mustOK(code, names...)

	const wantKills = 200
	var (
		kills, calls, okCalls, errCalls atomic.Int64
		mu                              sync.Mutex
		killedAt                        = map[string]time.Time{}
		recoveries                      []time.Duration
		bad                             []string
	)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	// Callers: each in its own session, each call touching one random server.
	for w := 0; w < 3; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			for kills.Load() < wantKills && ctx.Err() == nil {
				n := names[rng.Intn(len(names))]
				req := mcp.CallToolRequest{}
				req.Params.Name = "run_python"
				req.Params.Arguments = map[string]any{"code": "await mcp_" + n + ".counter()", "servers": []string{n},
					"session": "chaos" + strconv.Itoa(w), "timeout": 30}
				cctx, ccancel := context.WithTimeout(ctx, 40*time.Second)
				res, err := b.c.CallTool(cctx, req)
				ccancel()
				calls.Add(1)
				mu.Lock()
				switch {
				case err != nil:
					bad = append(bad, "no answer: "+err.Error())
				case !res.IsError:
					okCalls.Add(1)
					if at, ok := killedAt[n]; ok {
						recoveries = append(recoveries, time.Since(at))
						delete(killedAt, n)
					}
				default:
					errCalls.Add(1)
					msg := text(t, res)
					if !strings.Contains(msg, "Server '"+n+"' exited during the call") && !strings.Contains(msg, "Server '"+n+"' failed to start") {
						bad = append(bad, "unclear error: "+msg)
					}
				}
				mu.Unlock()
			}
		}()
	}
	// Killer: SIGKILL a random live server (sometimes the wrapper itself).
	rng := rand.New(rand.NewSource(42))
	for kills.Load() < wantKills && ctx.Err() == nil {
		time.Sleep(time.Duration(40+rng.Intn(60)) * time.Millisecond)
		n := names[rng.Intn(len(names))]
		pid := pidOf(filepath.Join(piddir, n+".pid"))
		if !isFake(pid) {
			continue
		}
		target := pid
		if strings.HasPrefix(n, "w") && rng.Intn(2) == 0 {
			target = ppid(pid) // the wrapper: its child keeps the pipes open
		}
		if syscall.Kill(target, syscall.SIGKILL) == nil {
			kills.Add(1)
			mu.Lock()
			if _, ok := killedAt[n]; !ok {
				killedAt[n] = time.Now()
			}
			mu.Unlock()
			// Let the server come back before it is picked again.
			time.Sleep(20 * time.Millisecond)
		}
	}
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatalf("chaos did not finish in time: %d kills", kills.Load())
	}
	// After the storm every server answers.
	b.mustOK(code, names...)
	mu.Lock()
	defer mu.Unlock()
	for _, s := range bad[:min(len(bad), 10)] {
		t.Error(s)
	}
	sort.Slice(recoveries, func(i, j int) bool { return recoveries[i] < recoveries[j] })
	p50, worst := time.Duration(0), time.Duration(0)
	if len(recoveries) > 0 {
		p50, worst = recoveries[len(recoveries)/2], recoveries[len(recoveries)-1]
	}
	t.Logf("kills survived: %d; calls answered: %d (%d ok, %d clear errors); crash to first successful call: p50 %v, max %v",
		kills.Load(), calls.Load(), okCalls.Load(), errCalls.Load(), p50.Round(time.Millisecond), worst.Round(time.Millisecond))
	b.Close()
	assertFakesGone(t, piddir, 5*time.Second)
}

func ppid(pid int) int {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return pid
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	p, _ := strconv.Atoi(fields[1])
	return p
}

// TestChaosKillContainers kills the session's container 20 times during
// executions: each call reports the lost session, and the next call works.
func TestChaosKillContainers(t *testing.T) {
	requirePodman(t)
	if testRuntime() == "local" {
		t.Fatal("needs a container runtime")
	}
	b := startBridge(t, map[string]string{"MCP_BRIDGE_LOG_LEVEL": "warn"})
	b.mustOK("kept = 1")
	for i := 0; i < 20; i++ {
		done := make(chan *mcp.CallToolResult, 1)
		go func() {
			req := mcp.CallToolRequest{}
			req.Params.Name = "run_python"
			req.Params.Arguments = map[string]any{"code": "import time\nprint('running')\ntime.sleep(20)", "timeout": 60}
			res, err := b.c.CallTool(context.Background(), req)
			if err != nil {
				t.Errorf("call %d: %v", i, err)
			}
			done <- res
		}()
		time.Sleep(400 * time.Millisecond)
		name := oldestContainer(t, b.pid())
		if out, err := exec.Command(runtimeCLI(), "kill", "--signal", "KILL", name).CombinedOutput(); err != nil {
			t.Fatalf("podman kill %s: %v %s", name, err, out)
		}
		var res *mcp.CallToolResult
		select {
		case res = <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("kill %d: the call was never answered", i)
		}
		if res == nil {
			continue
		}
		sc := structured(t, res)
		if sc["status"] != "error" || sc["stateLost"] != true {
			t.Errorf("kill %d: %v", i, sc)
		}
		// The next call restores the session (TestChaosDurable checks to what).
		if got := b.mustOK("print('ok')"); !strings.HasPrefix(got, "ok") {
			t.Errorf("after kill %d: %q", i, got)
		}
	}
}

// oldestContainer is the bridge's longest-running container: the session's,
// since the spare replacing an adopted one is always younger.
func oldestContainer(t *testing.T, pid int) string {
	t.Helper()
	out, err := exec.Command(runtimeCLI(), "ps", "--format", "{{.Created}} {{.Names}}").Output()
	if err != nil {
		t.Fatal(err)
	}
	type ctr struct {
		created int64
		name    string
	}
	var list []ctr
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 || !strings.HasPrefix(f[len(f)-1], "bridge-"+strconv.Itoa(pid)+"-") {
			continue
		}
		c, _ := strconv.ParseInt(f[0], 10, 64)
		list = append(list, ctr{c, f[len(f)-1]})
	}
	if len(list) == 0 {
		t.Fatalf("no container of bridge %d:\n%s", pid, out)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].created < list[j].created })
	return list[0].name
}

// TestChaosBadServers runs a server that hangs forever, one that
// crash-loops at start, one that floods stdout with garbage and one that
// writes a 10 MB line: each gets its bounded, clear error (or works), while
// calls to a healthy server keep being answered. The start timeout is 5 s:
// reading past the 10 MB line took over 2 s under -race on a loaded
// machine.
func TestChaosBadServers(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, withServers(t, map[string]any{
		"healthy": fake(),
		"hang":    fake("--mode", "hang-init", "--ignore-eof", "--ignore-sigterm"),
		"loop":    fake("--mode", "crash-start"),
		"garbage": fake("--mode", "noise"),
		"bigline": fake("--mode", "big-line"),
		"flood":   fake("--mode", "stderr-flood"),
	}, map[string]string{"MCP_BRIDGE_START_TIMEOUT": "5", "MCP_BRIDGE_LOG_LEVEL": "warn"}))
	b.mustOK("await mcp_healthy.counter()", "healthy")
	stop := make(chan struct{})
	var healthyCalls, slow atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			req := mcp.CallToolRequest{}
			req.Params.Name = "run_python"
			req.Params.Arguments = map[string]any{"code": "await mcp_healthy.add(1, 1)", "servers": []string{"healthy"}, "session": "healthy"}
			res, err := b.c.CallTool(context.Background(), req)
			if err != nil || res.IsError {
				t.Errorf("healthy call failed: %v", err)
				return
			}
			healthyCalls.Add(1)
			// Not a timing assertion: a call blocked behind a broken server
			// would wait for its start timeout (5 s) or forever.
			if time.Since(start) > 1500*time.Millisecond {
				slow.Add(1)
			}
		}
	}()
	for i := 0; i < 3; i++ {
		r := b.call(map[string]any{"code": "1", "servers": []string{"hang"}, "session": "bad"})
		if got := text(t, r); !strings.Contains(got, "note: server 'hang' did not answer initialize within 5s (MCP_BRIDGE_START_TIMEOUT); its tools raise MCPError") {
			t.Errorf("hang: %q", got)
		}
		r = b.call(map[string]any{"code": "1", "servers": []string{"loop"}, "session": "bad"})
		if got := text(t, r); !strings.Contains(got, "note: server 'loop' failed to start: exit status 1; last stderr: ") {
			t.Errorf("crash loop: %q", got)
		}
	}
	for _, s := range []string{"garbage", "bigline", "flood"} {
		r := b.call(map[string]any{"code": "await mcp_" + s + ".add(2, 3)", "servers": []string{s}, "session": "bad", "timeout": 30})
		if got := text(t, r); got != "{'sum': 5}" {
			t.Errorf("%s: %s", s, got)
		}
	}
	close(stop)
	wg.Wait()
	if healthyCalls.Load() < 10 || slow.Load() > 0 {
		t.Errorf("healthy server: %d calls, %d blocked", healthyCalls.Load(), slow.Load())
	}
	t.Logf("healthy calls answered meanwhile: %d", healthyCalls.Load())
}

// TestWatchReload checks bridge run --watch: an atomic save is seen without
// a call, unchanged servers keep their process, changed ones restart,
// removed ones fail their in-flight calls clearly, and a broken file never
// takes down the servers of the other files.
// TestPerCallReload checks RLD-1 without --watch: every call sees the
// config files as they are when it starts, even right after a change in the
// same second (a file added, one rewritten in place with the same size, one
// removed), with no file event or delay involved.
func TestPerCallReload(t *testing.T) {
	requirePodman(t)
	dir := t.TempDir()
	write := func(name string, servers map[string]any) {
		writeJSON(t, filepath.Join(dir, name), map[string]any{"mcpServers": servers})
	}
	write("a.json", map[string]any{"one": fake()})
	b := startBridge(t, map[string]string{"MCP_BRIDGE_CONFIG_DIR": dir})
	const list = "import json, os\nprint(sorted(json.loads(os.environ['MCP_DISCOVERED_SERVERS'])))"
	steps := []struct {
		name   string
		change func()
		want   string
	}{
		{"start", func() {}, "['one']"},
		{"file added", func() { write("b.json", map[string]any{"two": fake()}) }, "['one', 'two']"},
		{"rewritten in place, same size", func() { write("b.json", map[string]any{"owt": fake()}) }, "['one', 'owt']"},
		{"file removed", func() {
			if err := os.Remove(filepath.Join(dir, "a.json")); err != nil {
				t.Fatal(err)
			}
		}, "['owt']"},
	}
	for _, st := range steps {
		st.change()
		if got := b.mustOK(list); got != st.want {
			t.Errorf("%s: servers %s, want %s", st.name, got, st.want)
		}
	}
}

func TestWatchReload(t *testing.T) {
	requirePodman(t)
	dir, piddir := t.TempDir(), t.TempDir()
	pidfile := func(n string) string { return filepath.Join(piddir, n+".pid") }
	save := func(name string, servers map[string]any) {
		tmp := filepath.Join(dir, "."+name+".tmp")
		writeJSON(t, tmp, map[string]any{"mcpServers": servers})
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	save("a.json", map[string]any{"keep": fake("--pidfile", pidfile("keep")), "edit": fake("--pidfile", pidfile("edit"))})
	save("b.json", map[string]any{"gone": fake("--pidfile", pidfile("gone"))})
	b := startBridgeArgs(t, map[string]string{"MCP_BRIDGE_CONFIG_DIR": dir}, "run", "--watch")
	b.mustOK("await mcp_keep.counter()\nawait mcp_edit.counter()\nawait mcp_gone.counter()", "keep", "edit", "gone")
	keepPid, editPid := pidOf(pidfile("keep")), pidOf(pidfile("edit"))

	// A call in flight to a server that is then removed fails clearly. Its
	// session is started first, so the call is in flight (not waiting for a
	// container) when the configuration changes.
	if r := b.call(map[string]any{"code": "1", "servers": []string{"gone"}, "session": "inflight", "timeout": 60}); r.IsError {
		t.Fatalf("warming the in-flight session: %s", text(t, r))
	}
	inflight := make(chan string, 1)
	go func() {
		r := b.call(map[string]any{"code": "await mcp_gone.sleep(20)", "servers": []string{"gone"}, "session": "inflight", "timeout": 60})
		inflight <- text(t, r)
	}()
	time.Sleep(500 * time.Millisecond)
	// Edit one server, remove another, add a third: one atomic save each.
	save("a.json", map[string]any{"keep": fake("--pidfile", pidfile("keep")), "edit": fake("--pidfile", pidfile("edit"), "--name", "edited"),
		"added": fake("--pidfile", pidfile("added"))})
	save("b.json", map[string]any{})
	waitFor(t, 5*time.Second, "the reload log line", func() bool { return strings.Contains(b.stderr.String(), `"removed":["gone"]`) })
	select {
	case got := <-inflight:
		if !strings.Contains(got, "Server 'gone' was removed from the configuration") {
			t.Errorf("in-flight call to a removed server: %s", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the in-flight call was not answered")
	}
	// writeJSON marshals a Go map: entries are in key order.
	if got := b.mustOK("runtime.discovered_servers()"); got != "('added', 'edit', 'keep')" {
		t.Errorf("after reload: %s", got)
	}
	b.mustOK("await mcp_edit.counter()\nawait mcp_added.counter()", "edit", "added")
	if got := pidOf(pidfile("keep")); got != keepPid || !isFake(got) {
		t.Errorf("unchanged server restarted: pid %d -> %d", keepPid, got)
	}
	if got := pidOf(pidfile("edit")); got == editPid {
		t.Errorf("changed server kept its process %d", got)
	}
	// A broken file while editing: the other file's servers stay up.
	if err := os.WriteFile(filepath.Join(dir, "b.json"), []byte(`{"mcpServers": {"half": `), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the broken-file warning", func() bool { return strings.Contains(b.stderr.String(), "b.json") })
	if got := b.mustOK("await mcp_keep.counter()", "keep"); got == "" {
		t.Error("keep stopped answering")
	}
	if got := pidOf(pidfile("keep")); got != keepPid {
		t.Errorf("a broken file restarted another file's server: %d -> %d", keepPid, got)
	}
	// Deleting a file stops its servers.
	if err := os.Remove(filepath.Join(dir, "a.json")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "keep to stop", func() bool { return !isFake(keepPid) })
	if got := b.mustOK("runtime.discovered_servers()"); got != "()" {
		t.Errorf("after deleting a.json: %s", got)
	}
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestIdleReaper checks that idle sessions end and say so, idle servers stop
// and start again on use, and a busy session or server is never reaped
// mid-call.
func TestIdleReaper(t *testing.T) {
	requirePodman(t)
	piddir := t.TempDir()
	pidfile := filepath.Join(piddir, "srv.pid")
	b := startBridge(t, withServers(t, map[string]any{"srv": fake("--pidfile", pidfile)}, map[string]string{
		"MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT": "2", "MCP_BRIDGE_SERVER_IDLE_TIMEOUT": "2",
		"MCP_BRIDGE_SESSION_DURABILITY": "off"})) // the loss notice; TestDurableRestores has the restore
	b.mustOK("kept = 1\nawait mcp_srv.counter()", "srv")
	first := pidOf(pidfile)
	// Busy for longer than both idle timeouts: nothing is reaped mid-call.
	if got := b.mustOK("import time\nawait mcp_srv.sleep(4)\nprint(kept)", "srv"); got != "1" {
		t.Errorf("busy call: %s", got)
	}
	if got := pidOf(pidfile); got != first {
		t.Errorf("a busy server was restarted: %d -> %d", first, got)
	}
	waitFor(t, 8*time.Second, "the idle server to stop", func() bool { return !isFake(first) })
	time.Sleep(2 * time.Second) // the session's idle end is at most 5 s late; make sure it passed
	waitFor(t, 6*time.Second, "the idle session to end", func() bool { return strings.Contains(b.stderr.String(), "idle for more than 2s") })
	r := b.call(map[string]any{"code": "print('kept' in globals())\nawait mcp_srv.counter()", "servers": []string{"srv"}})
	if got := text(t, r); got != "False\n'1'\nnote: session state was lost (idle for more than 2s)" {
		t.Errorf("after idling: %q", got)
	}
}

// TestLifecycle checks that on stdin EOF and on SIGTERM every child and
// container is gone within 5 s, and that after a SIGKILL of the bridge its
// containers end by themselves and the next start sweeps a server a
// wrapper left behind. A bridge in the cluster ends by its pod's deletion
// (SIGTERM) instead of stdin EOF, and the processes of a SIGKILLed one end
// with its pod.
func TestLifecycle(t *testing.T) {
	requirePodman(t)
	for _, how := range []string{"eof", "sigterm"} {
		t.Run(how, func(t *testing.T) {
			piddir := t.TempDir()
			b := startBridge(t, withServers(t, map[string]any{
				"direct":  fake("--pidfile", filepath.Join(piddir, "d.pid")),
				"wrapped": wrapped("--pidfile", filepath.Join(piddir, "w.pid")),
			}, nil))
			b.mustOK("await mcp_direct.counter()\nawait mcp_wrapped.counter()", "direct", "wrapped")
			start := time.Now()
			if how == "sigterm" {
				_ = b.signal(syscall.SIGTERM)
			}
			b.Close()
			assertFakesGone(t, piddir, 5*time.Second)
			t.Logf("%s: everything gone %v after", how, time.Since(start).Round(time.Millisecond))
		})
	}
	t.Run("sigkill", func(t *testing.T) {
		// The server leaves a stubborn process in its group (as an npx-style
		// wrapper's child can): it ignores EOF, SIGTERM and SIGHUP, so only
		// the next start's sweep of the group removes it.
		piddir, state := t.TempDir(), t.TempDir()
		stubborn := filepath.Join(piddir, "stubborn.pid")
		// sh, as the bridge's image has it: the loop and its sleeps inherit
		// the ignored signals.
		script := `sh -c 'trap "" TERM HUP; echo $$ > "$1"; while :; do sleep 1; done' stubborn "$1" </dev/null >/dev/null 2>&1 &
exec "$2"`
		env := withServers(t, map[string]any{"srv": map[string]any{"command": "sh", "args": []string{"-c", script, "sh", stubborn, fakeBin}}},
			map[string]string{"MCP_BRIDGE_STATE_DIR": state})
		b := startBridge(t, env)
		b.mustOK("await mcp_srv.counter()", "srv")
		waitFor(t, 5*time.Second, "the stubborn process", func() bool { return pidOf(stubborn) > 0 })
		pid := pidOf(stubborn)
		_ = b.signal(syscall.SIGKILL)
		inPod := b.cluster != nil
		b.Close()
		if inPod {
			// A pod's processes end with it, left-over groups included.
			waitFor(t, 10*time.Second, "the stubborn process to end with the killed bridge's pod", func() bool { return !alive(pid) })
			return
		}
		time.Sleep(time.Second)
		if !alive(pid) {
			t.Fatalf("the stubborn process was expected to outlive the SIGKILLed bridge")
		}
		b2 := startBridge(t, env)
		waitFor(t, 8*time.Second, "the next start to sweep the left-over process group", func() bool { return !alive(pid) })
		b2.Close()
	})
}

// alive reports whether pid is a running (not zombie) process.
func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(stat), ") Z ")
}

// startBridgeArgs is startBridge with explicit bridge arguments.
func startBridgeArgs(t *testing.T, extra map[string]string, args ...string) *bridge {
	t.Helper()
	return startBridgeWith(t, extra, args)
}
