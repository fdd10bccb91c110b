package entrypoint

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/bridge-mcp/bridge/protocol"
)

// box is the entrypoint run by the host's python3 as a plain process (no
// container), with the test as its host: frames in on stdin and out on
// stdout, or both ways over a socket on fd 3 (the socket link).
type box struct {
	t      *testing.T
	cmd    *exec.Cmd
	in     io.WriteCloser // Close is the host's hangup
	out    *bufio.Reader
	outR   io.Closer // Close stops the host reading
	stderr *lockedBuffer
	exited chan struct{}
	err    error // the process's exit; valid once exited is closed
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// bootFrame is the boot frame line the host sends first.
func bootFrame(t *testing.T, limits ...map[string]any) []byte {
	t.Helper()
	l := map[string]any{"maxFrameBytes": 1 << 20, "maxOutputBytes": 1 << 16, "maxInFlight": 32}
	for _, more := range limits {
		for k, v := range more {
			l[k] = v
		}
	}
	params := map[string]any{"files": Files(), "main": Main, "version": "test", "limits": l}
	// rwMounts is a boot param beside the limits, given with them here.
	for _, k := range []string{"rwMounts", "durability"} {
		if m, ok := l[k]; ok {
			delete(l, k)
			params[k] = m
		}
	}
	data, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "method": "boot", "params": params})
	if err != nil {
		t.Fatal(err)
	}
	return append(data, '\n')
}

// links are the two ways the host reaches a sandbox; every box test runs
// over both.
var links = []string{"stdio", "socket"}

// forEachLink runs test once per link.
func forEachLink(t *testing.T, test func(t *testing.T, link string)) {
	for _, link := range links {
		t.Run(link, func(t *testing.T) { test(t, link) })
	}
}

// startBox starts the entrypoint with its link over link ("stdio" or
// "socket") and writes the boot frame followed by extra (frames sent
// before the ready frame); it does not wait for ready.
func startBox(t *testing.T, link string, extra ...map[string]any) *box {
	t.Helper()
	return startBoxLimits(t, link, nil, extra...)
}

// startBoxLimits is startBox with limits added to the boot frame's.
func startBoxLimits(t *testing.T, link string, limits map[string]any, extra ...map[string]any) *box {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed to run the entrypoint: %v", err)
	}
	b := &box{t: t, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	b.cmd = exec.Command(py, "-u", "-c", Bootstrap)
	b.cmd.Dir = t.TempDir()
	// Snapshots take and restore this folder instead of the host's /workspace.
	b.cmd.Env = append(os.Environ(), "BRIDGE_TEST_WORKSPACE="+b.cmd.Dir)
	b.cmd.Stderr = b.stderr
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the cleanup kills the worker too
	var closeHost func()
	if link == "socket" {
		hostEnd, boxEnd, err := protocol.SocketPair()
		if err != nil {
			t.Fatal(err)
		}
		conn, err := net.FileConn(hostEnd)
		hostEnd.Close()
		if err != nil {
			t.Fatal(err)
		}
		uc := conn.(*net.UnixConn)
		b.cmd.ExtraFiles = []*os.File{boxEnd}
		b.cmd.Args = append(b.cmd.Args, "3")
		b.cmd.Stdout = b.stderr // stray output; frames use the socket
		if err := b.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		boxEnd.Close()
		b.in, b.out, b.outR = halfCloser{uc.CloseWrite, uc}, bufio.NewReader(uc), closerFunc(uc.CloseRead)
		closeHost = func() { uc.Close() }
	} else {
		if b.in, err = b.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		outR, outW, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		b.cmd.Stdout = outW
		if err := b.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		outW.Close()
		b.out, b.outR = bufio.NewReader(outR), outR
		closeHost = func() { outR.Close() }
	}
	go func() {
		b.err = b.cmd.Wait()
		close(b.exited)
	}()
	t.Cleanup(func() {
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.exited
		closeHost()
	})
	msg := bootFrame(t, limits)
	for _, f := range extra {
		line, _ := json.Marshal(f)
		msg = append(append(msg, line...), '\n')
	}
	if _, err := b.in.Write(msg); err != nil {
		t.Fatal(err)
	}
	return b
}

// halfCloser writes to w; Close shuts down the write side only.
type halfCloser struct {
	closeWrite func() error
	w          io.Writer
}

func (h halfCloser) Write(p []byte) (int, error) { return h.w.Write(p) }
func (h halfCloser) Close() error                { return h.closeWrite() }

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// next reads the next frame from the box within d.
func (b *box) next(d time.Duration) map[string]any {
	b.t.Helper()
	type got struct {
		line, data []byte
		err        error
	}
	ch := make(chan got, 1)
	go func() {
		line, err := b.out.ReadBytes('\n')
		var data []byte
		if err == nil && line[0] == '#' { // a data frame (snapshots): its bytes follow
			f := bytes.Fields(line)
			n, cerr := strconv.Atoi(string(f[len(f)-1]))
			if err = cerr; err == nil {
				data = make([]byte, n)
				_, err = io.ReadFull(b.out, data)
			}
		}
		ch <- got{line, data, err}
	}()
	select {
	case g := <-ch:
		if g.err != nil {
			b.t.Fatalf("reading a frame: %v\nstderr: %s", g.err, b.stderr.String())
		}
		if g.line[0] == '#' {
			return map[string]any{"dataLine": string(bytes.TrimSpace(g.line)), "data": g.data}
		}
		var m map[string]any
		if err := json.Unmarshal(g.line, &m); err != nil {
			b.t.Fatalf("frame %q: %v", g.line, err)
		}
		return m
	case <-time.After(d):
		b.t.Fatalf("no frame within %v\nstderr: %s", d, b.stderr.String())
		return nil
	}
}

func (b *box) send(frame map[string]any) {
	b.t.Helper()
	line, _ := json.Marshal(frame)
	if _, err := b.in.Write(append(line, '\n')); err != nil {
		b.t.Fatalf("send: %v", err)
	}
}

func execFrame(call int, code string) map[string]any {
	return map[string]any{"jsonrpc": "2.0", "id": call, "method": "exec", "params": map[string]any{"call": call, "code": code}}
}

// serve answers the box's requests until the reply to exec id arrives and
// returns it with the output it streamed; requests for method "hang" are
// never answered.
func (b *box) serve(id int, d time.Duration) (reply map[string]any, output string) {
	b.t.Helper()
	deadline := time.Now().Add(d)
	for {
		m := b.next(time.Until(deadline))
		switch {
		case m["method"] == "output":
			output += fmt.Sprint(m["params"].(map[string]any)["data"])
		case m["method"] == "hang":
		case m["method"] != nil && m["id"] != nil:
			b.send(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": map[string]any{"tools": []any{}, "ok": true}})
		case m["method"] == nil && m["id"] == float64(id):
			return m, output + replyOutput(m)
		}
	}
}

// replyOutput is the output an exec reply m carries (result.output), the
// part of the call's output it did not stream.
func replyOutput(m map[string]any) string {
	res, _ := m["result"].(map[string]any)
	chunks, _ := res["output"].([]any)
	out := ""
	for _, c := range chunks {
		out += fmt.Sprint(c.(map[string]any)["data"])
	}
	return out
}

func (b *box) waitExit(d time.Duration) bool {
	select {
	case <-b.exited:
		return true
	case <-time.After(d):
		return false
	}
}

func outcome(reply map[string]any) string {
	res, _ := reply["result"].(map[string]any)
	return fmt.Sprint(res["outcome"])
}

// TestBoxFramesBeforeReady: frames the host sent right behind the boot
// frame (read ahead with it by the bootstrap) reach the worker.
func TestBoxFramesBeforeReady(t *testing.T) { forEachLink(t, testBoxFramesBeforeReady) }

func testBoxFramesBeforeReady(t *testing.T, link string) {
	b := startBox(t, link, execFrame(1, "print('early')"))
	if m := b.next(30 * time.Second); m["method"] != "ready" {
		t.Fatalf("first frame %v, want ready", m)
	}
	reply, out := b.serve(1, 30*time.Second)
	if outcome(reply) != "ok" || out != "early\n" {
		t.Errorf("exec sent with the boot frame: %v, output %q", reply, out)
	}
}

// TestBoxInterrupt: the worker acts on an interrupt frame for the active
// call only, while user code runs (there is no relay process any more).
func TestBoxInterrupt(t *testing.T) { forEachLink(t, testBoxInterrupt) }

func testBoxInterrupt(t *testing.T, link string) {
	b := startBox(t, link)
	b.next(30 * time.Second) // ready
	b.send(execFrame(1, "import time\nprint('started')\ntime.sleep(60)"))
	// The first call loads the saved tools: answer it, then wait for the
	// cell's own output.
	for {
		m := b.next(30 * time.Second)
		if m["method"] == "saved_tools" {
			b.send(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": map[string]any{"tools": []any{}}})
		}
		if m["method"] == "output" {
			break
		}
	}
	b.send(map[string]any{"jsonrpc": "2.0", "method": "interrupt", "params": map[string]any{"call": 7}})
	b.send(map[string]any{"jsonrpc": "2.0", "method": "interrupt", "params": map[string]any{"call": 1}})
	reply, _ := b.serve(1, 10*time.Second)
	if outcome(reply) != "interrupted" {
		t.Fatalf("interrupted call: %v", reply)
	}
	b.send(execFrame(2, "print('after')"))
	if reply, out := b.serve(2, 10*time.Second); outcome(reply) != "ok" || out != "after\n" {
		t.Errorf("call after the interrupt: %v, output %q", reply, out)
	}
}

// TestBoxInterruptBeforeCellStarts: an interrupt that arrives right behind
// its exec frame, before the main thread has started the cell, still ends
// the call (the SIGINT used to be dropped while no cell ran, and the cell
// then ran to its end: a loaded machine turned short timeouts into
// container replacements).
func TestBoxInterruptBeforeCellStarts(t *testing.T) { forEachLink(t, testBoxInterruptBeforeCellStarts) }

func testBoxInterruptBeforeCellStarts(t *testing.T, link string) {
	b := startBox(t, link)
	b.next(30 * time.Second) // ready
	b.send(execFrame(1, "print(1)"))
	b.serve(1, 30*time.Second)
	b.send(execFrame(2, "import time\ntime.sleep(60)"))
	b.send(map[string]any{"jsonrpc": "2.0", "method": "interrupt", "params": map[string]any{"call": 2}})
	if reply, _ := b.serve(2, 20*time.Second); outcome(reply) != "interrupted" {
		t.Fatalf("call interrupted before its cell started: %v", reply)
	}
	b.send(execFrame(3, "print('after')"))
	if reply, out := b.serve(3, 10*time.Second); outcome(reply) != "ok" || out != "after\n" {
		t.Errorf("call after the interrupt: %v, output %q", reply, out)
	}
}

// TestBoxStuckWorkerKilled: a worker whose link reader cannot run and that
// ignores SIGINT still ends within a bound once the host closes stdin: the
// supervisor sees the hangup and kills it.
func TestBoxStuckWorkerKilled(t *testing.T) { forEachLink(t, testBoxStuckWorkerKilled) }

func testBoxStuckWorkerKilled(t *testing.T, link string) {
	b := startBox(t, link)
	b.next(30 * time.Second) // ready
	b.send(execFrame(1, "print(1)"))
	b.serve(1, 30*time.Second)
	b.send(execFrame(2, "import signal, sys\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"+
		"sys.modules['mcp.runtime'].LINK._plock.acquire()\nprint('stuck')\nwhile True: pass"))
	for m := b.next(10 * time.Second); m["method"] != "output"; m = b.next(10 * time.Second) {
	}
	start := time.Now()
	b.in.Close()
	if !b.waitExit(10 * time.Second) {
		t.Fatalf("the sandbox still runs 10 s after stdin EOF\nstderr: %s", b.stderr.String())
	}
	t.Logf("ended %v after stdin EOF: %v", time.Since(start).Round(10*time.Millisecond), b.err)
}

// TestBoxFrameWriteError: when the host stops reading the link, the
// worker's failed frame write is reported on the container's stderr and
// the sandbox exits 1 (it used to exit 0 silently).
func TestBoxFrameWriteError(t *testing.T) { forEachLink(t, testBoxFrameWriteError) }

func testBoxFrameWriteError(t *testing.T, link string) {
	b := startBox(t, link)
	b.next(30 * time.Second) // ready
	b.outR.Close()
	b.send(execFrame(1, "print(1)"))
	if !b.waitExit(30 * time.Second) {
		t.Fatalf("the sandbox still runs with its stdout closed\nstderr: %s", b.stderr.String())
	}
	code := -1
	if ee, ok := b.err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if b.err == nil {
		code = 0
	}
	if got := b.stderr.String(); code != 1 || !strings.Contains(got, "bridge worker: frame write failed") {
		t.Errorf("exit %d, stderr %q; want exit 1 and the frame write error", code, got)
	}
}

// TestBoxAsyncCallsReleaseSlots: awaited requests complete through the
// event loop, 40 at once (over the 32 in-flight slots), and cancelled ones
// give their slot back even when the host never answers them.
func TestBoxAsyncCallsReleaseSlots(t *testing.T) { forEachLink(t, testBoxAsyncCallsReleaseSlots) }

func testBoxAsyncCallsReleaseSlots(t *testing.T, link string) {
	b := startBox(t, link)
	b.next(30 * time.Second) // ready
	code := `import asyncio
rt = runtime
got = await asyncio.gather(*[rt._acall("ok", {}) for _ in range(40)])
print(len(got), got[0]["ok"])
for _ in range(40):
    t = asyncio.ensure_future(rt._acall("hang", {}))
    await asyncio.sleep(0.001)
    t.cancel()
print((await asyncio.wait_for(rt._acall("ok", {}), 10))["ok"])`
	b.send(execFrame(1, code))
	reply, out := b.serve(1, 30*time.Second)
	if outcome(reply) != "ok" || out != "40 True\nTrue\n" {
		t.Errorf("async calls: %v, output %q", reply, out)
	}
}

// TestBoxSavedToolsInExecFrame: saved tools sent with the first exec frame
// load without a saved_tools request; without them the worker asks.
func TestBoxSavedToolsInExecFrame(t *testing.T) { forEachLink(t, testBoxSavedToolsInExecFrame) }

func testBoxSavedToolsInExecFrame(t *testing.T, link string) {
	for _, sent := range []bool{true, false} {
		b := startBox(t, link)
		b.next(30 * time.Second) // ready
		frame := execFrame(1, "print(hi())")
		if sent {
			frame["params"].(map[string]any)["savedTools"] = map[string]any{
				"tools": []any{map[string]any{"name": "hi", "source": "def hi():\n    return 'from the frame'\n"}}, "problems": []any{}}
		}
		b.send(frame)
		asked := false
		var reply map[string]any
		out := ""
		for deadline := time.Now().Add(30 * time.Second); reply == nil; {
			m := b.next(time.Until(deadline))
			switch {
			case m["method"] == "saved_tools":
				asked = true
				b.send(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": map[string]any{
					"tools": []any{map[string]any{"name": "hi", "source": "def hi():\n    return 'asked'\n"}}, "problems": []any{}}})
			case m["method"] == "output":
				out += fmt.Sprint(m["params"].(map[string]any)["data"])
			case m["method"] != nil && m["id"] != nil:
				b.send(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": map[string]any{}})
			case m["method"] == nil && m["id"] == float64(1):
				reply = m
				out += replyOutput(m)
			}
		}
		want := "asked\n"
		if sent {
			want = "from the frame\n"
		}
		if outcome(reply) != "ok" || out != want || asked == sent {
			t.Errorf("sent %v: %v, output %q, asked %v; want output %q, asked %v", sent, reply, out, asked, want, !sent)
		}
	}
}

// TestBoxFdOutputCaptured: OS-level writes to fds 1 and 2 reach the call's
// output before its reply, including bytes the pump holds back (a partial
// sync marker, a partial UTF-8 sequence), so the skipped sync of an idle
// pump never loses them.
func TestBoxFdOutputCaptured(t *testing.T) { forEachLink(t, testBoxFdOutputCaptured) }

// ordered is fd0 py0 fd1 py1 … for n rounds, each word followed by a space.
func ordered(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "fd%d py%d ", i, i)
	}
	return b.String()
}

func testBoxFdOutputCaptured(t *testing.T, link string) {
	b := startBox(t, link)
	b.next(30 * time.Second) // ready
	cases := []struct{ code, want string }{
		{"print('x' in globals(), 'sink' in globals())", "False False\n"}, // the warm-up left nothing
		{"print('quiet')", "quiet\n"},
		{"import os\nos.write(1, b'fd one\\n')\nos.system('echo from shell')", "fd one\nfrom shell\n"},
		{"import os\nos.write(2, b'ends with a nul\\x00')", "ends with a nul\x00"},
		{"import os\nos.write(1, b'half \\xc3')", "half \ufffd"},
		// A print after a raw write comes after it: the pump is synced first.
		{"import os\nfor i in range(50):\n    os.write(2, b'fd%d ' % i)\n    print('py%d' % i, end=' ')", ordered(50)},
		{"pass", ""},
	}
	for i, c := range cases {
		b.send(execFrame(i+1, c.code))
		reply, out := b.serve(i+1, 30*time.Second)
		if outcome(reply) != "ok" || out != c.want {
			t.Errorf("%q: %v, output %q, want %q", c.code, reply, out, c.want)
		}
	}
}

// TestBoxOutputInReply: the output a cell leaves unstreamed rides in its
// exec reply (result.output), so a call that prints little is one frame;
// when that reply would be over the frame cap, the output goes ahead of it
// as output notifications instead, and nothing is lost either way.
func TestBoxOutputInReply(t *testing.T) { forEachLink(t, testBoxOutputInReply) }

func testBoxOutputInReply(t *testing.T, link string) {
	b := startBoxLimits(t, link, map[string]any{"maxFrameBytes": 1 << 20, "maxOutputBytes": 1 << 20})
	b.next(30 * time.Second) // ready
	b.send(execFrame(1, "print(1)"))
	reply, out := b.serve(1, 30*time.Second)
	if got := replyOutput(reply); got != "1\n" || out != "1\n" {
		t.Errorf("print(1): output %q in the reply, %q in all; want both %q", got, out, "1\n")
	}
	// The head (the first 512 KiB) is streamed at once; the tail (100,000
	// control characters, 600 KB as JSON) and the 500 KB result do not fit
	// one 1 MiB frame together.
	b.send(execFrame(2, "print('a' * 524288 + '\\x01' * 100000, end='')\n'b' * 500000"))
	reply, out = b.serve(2, 30*time.Second)
	if _, ok := reply["result"].(map[string]any)["output"]; ok {
		t.Errorf("a reply over the frame cap carries the output: %.200v", reply)
	}
	if want := strings.Repeat("a", 524288) + strings.Repeat("\x01", 100000); out != want {
		t.Errorf("output over the frame cap: %d bytes, want %d", len(out), len(want))
	}
	if res, _ := reply["result"].(map[string]any)["result"].(string); len(res) != 500002 {
		t.Errorf("result: %d bytes, want 500002", len(res))
	}
}

// TestBoxLastExpression: a cell's last expression is its value, and an
// error in it is reported at its own line, also when it spans lines (the
// rewrite that keeps the value places its new nodes at the expression's).
func TestBoxLastExpression(t *testing.T) {
	b := startBox(t, "socket")
	b.next(30 * time.Second) // ready
	b.send(execFrame(1, "x = 2\n[x,\n x * 3]"))
	reply, _ := b.serve(1, 30*time.Second)
	if got, _ := reply["result"].(map[string]any)["result"].(string); got != "[2, 6]" {
		t.Errorf("last expression's value: %q, want %q (reply %v)", got, "[2, 6]", reply)
	}
	b.send(execFrame(2, "y = 1\n(y +\n 1/0)"))
	reply, out := b.serve(2, 30*time.Second)
	if got, _ := reply["result"].(map[string]any)["error"].(string); !strings.HasPrefix(got, "ZeroDivisionError") {
		t.Errorf("error: %q, want a ZeroDivisionError (reply %v)", got, reply)
	}
	if want := `File "<cell-2>", line 3, in <module>`; !strings.Contains(out, want) {
		t.Errorf("traceback lacks %q:\n%s", want, out)
	}
}

// TestBoxDeepReply: a reply nested past Python's recursion limit fails the
// one call it answers; the link's reader lives on (it used to die, leaving
// every later call waiting for its timeout).
func TestBoxDeepReply(t *testing.T) { forEachLink(t, testBoxDeepReply) }

func testBoxDeepReply(t *testing.T, link string) {
	b := startBox(t, link)
	b.next(30 * time.Second) // ready
	code := `try:
    await runtime._acall("deep", {})
except Exception as e:
    print("refused:", e)
print((await runtime._acall("ok", {}))["ok"])`
	b.send(execFrame(1, code))
	deadline := time.Now().Add(30 * time.Second)
	for {
		m := b.next(time.Until(deadline))
		if m["method"] != "deep" && m["method"] != nil && m["id"] != nil {
			b.send(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": map[string]any{"tools": []any{}}}) // saved_tools
			continue
		}
		if m["method"] == "deep" {
			deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000) // past any Python's limit (3.13 accepts 2000)
			line := fmt.Sprintf(`{"id":%v,"result":%s,"jsonrpc":"2.0"}`+"\n", m["id"], deep)
			if _, err := io.WriteString(b.in, line); err != nil {
				t.Fatal(err)
			}
			break
		}
	}
	reply, out := b.serve(1, 30*time.Second)
	if want := "refused: the reply is nested too deep for Python's json module\nTrue\n"; outcome(reply) != "ok" || out != want {
		t.Errorf("reply %v, output %q; want %q", reply, out, want)
	}
}
