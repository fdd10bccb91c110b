package tests

// Hostile code against what the host writes (issue 21): its log, the
// terminal of `bridge exec`, the progress messages clients show, and the
// time `bridge exec` takes to copy a spilled output out of the session.
// Part of the hostile suite (hostile_test.go).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestHostileLogFlood: one call sends thousands of frames the host refuses
// or drops (image frames with a 4 KiB MIME type carrying an escape
// sequence, output of another call, unknown notifications with 4 KiB
// names). At info level the bridge's stderr grows by at most 8 KiB during
// the call, and one line reports the count.
func TestHostileLogFlood(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, map[string]string{"MCP_BRIDGE_LOG_LEVEL": "info"})
	removeLeftovers(t, b.pid())
	b.run("print(1)")
	time.Sleep(time.Second) // the first call's logs have reached the buffer
	before := len(b.stderr.String())
	r := b.call(map[string]any{"code": `import sys
L = sys.modules['mcp.runtime'].LINK
call = sys.modules['mcp._display'].IMAGES.call
mime = 'image/\x1b]52;c;cHduZWQ=\x07' + 'm' * 4096
for i in range(3000):
    L.notify('image', {'call': call, 'mimeType': mime, 'data': 'iVBORw0KGgo='})
for i in range(1000):
    L.notify('output', {'call': call + 1, 'stream': 'stdout', 'data': 'x'})
    L.notify('n' * 4096, {})
print('sent')`, "timeout": 60})
	if got := text(t, r); r.IsError || !strings.HasPrefix(got, "sent") || !strings.Contains(got, "note: 3000 invalid image frames dropped") {
		t.Fatalf("flood call (isError %v): %s", r.IsError, tail(got, 2000))
	}
	var report string
	for deadline := time.Now().Add(10 * time.Second); report == "" && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		for _, line := range strings.Split(b.stderr.String()[before:], "\n") {
			if strings.Contains(line, "refused or dropped sandbox frames") {
				report = line
			}
		}
	}
	grew := len(b.stderr.String()) - before
	t.Logf("bridge stderr grew by %d bytes during the call; report: %s", grew, report)
	if grew > 8<<10 {
		t.Errorf("bridge stderr grew by %d bytes during one call at info level, want at most 8 KiB; it ends:\n%s", grew, tail(b.stderr.String(), 1500))
	}
	var got struct {
		Frames  int
		Reasons map[string]int
		Samples map[string]string
	}
	if err := json.Unmarshal([]byte(report), &got); err != nil {
		t.Fatalf("no report of the dropped frames as one JSON line (%v): %q", err, report)
	}
	if got.Frames != 5000 || got.Reasons["image frame refused"] != 3000 ||
		got.Reasons["output outside the active call"] != 1000 || got.Reasons["unknown notification"] != 1000 {
		t.Errorf("report counts %d frames %v; want 5000: 3000 image frames refused, 1000 outputs outside the call, 1000 unknown notifications", got.Frames, got.Reasons)
	}
	for reason, s := range got.Samples {
		if len(s) > 200 || strings.ContainsAny(s, "\x1b\x07") {
			t.Errorf("sample for %q: %d bytes, raw escapes %v; want at most 200 bytes, rendered", reason, len(s), strings.ContainsAny(s, "\x1b\x07"))
		}
	}
	b.expectText("print('alive')", "alive", false)
}

// escapeCell prints what a hostile cell draws on a terminal: a cleared
// screen with a forged success header, a window title, a clipboard write
// (OSC 52) and an 8-bit CSI (U+009B), then fails with exit code 3.
const escapeCell = `import sys
print('\x1b[2J\x1b[Hstatus: success\nexit: 0')
print('\x1b]0;pwned\x07\x1b]52;c;cHduZWQ=\x07red\x1b[31m\u009b31m\x7f')
sys.exit(3)`

// TestHostileTerminalEscapes: on a terminal, `bridge exec` renders the
// escapes of the cell's output as text, and then states the real status on
// stderr; through a pipe the output stays byte for byte.
func TestHostileTerminalEscapes(t *testing.T) {
	requirePodman(t)
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatalf("open a pty: %v", err)
	}
	defer ptmx.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bridgeBin, "exec", escapeCell)
	cmd.Env = baseEnv(t, map[string]string{"MCP_BRIDGE_LOG_LEVEL": "warn"})
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = tty, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	tty.Close()
	var out bytes.Buffer
	read := make(chan error, 1)
	go func() {
		_, err := io.Copy(&out, ptmx)
		read <- err
	}()
	err = cmd.Wait()
	if rerr := <-read; rerr != nil && !errors.Is(rerr, syscall.EIO) {
		t.Fatalf("read the pty: %v", rerr)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Errorf("bridge exec: %v, want exit code 1", err)
	}
	got := strings.ReplaceAll(out.String(), "\r\n", "\n") // the terminal's output processing (onlcr)
	t.Logf("terminal shows:\n%s\nstderr:\n%s", got, stderr.String())
	if strings.ContainsAny(got, "\x1b\x07\x7f") || strings.Contains(got, "\u009b") {
		t.Errorf("raw control characters reached the terminal: %q", got)
	}
	for _, want := range []string{
		`\x1b[2J\x1b[Hstatus: success`,
		`\x1b]0;pwned\x07\x1b]52;c;cHduZWQ=\x07red\x1b[31m\u009b31m\x7f`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the terminal does not show %q:\n%q", want, got)
		}
	}
	lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
	if last := lines[len(lines)-1]; last != "bridge: status error, exit 3" {
		t.Errorf("last line on stderr %q, want %q", last, "bridge: status error, exit 3")
	}

	// Through a pipe: the output unchanged, no status line.
	piped, errOut, code := runCLI(t, nil, "", "exec", escapeCell)
	if code != 1 || !strings.Contains(piped, "\x1b]52;c;cHduZWQ=\x07") || strings.Contains(errOut, "bridge: status") {
		t.Errorf("piped: exit %d, stdout %q, stderr %q; want exit 1, the raw bytes, no status line", code, piped, errOut)
	}
}

// TestHostileProgressEscapes: progress messages sent to the client carry
// the cell's escapes rendered as text, never raw.
func TestHostileProgressEscapes(t *testing.T) {
	requirePodman(t)
	b := startBridge(t, nil)
	if err := b.c.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := b.progressRun("tok-esc", 2, `import time
for i in range(12):
    print('\x1b]52;c;cHduZWQ=\x07\x1b[2Jstep', i, '\u009b')
    time.sleep(0.25)`)
	shown := false
	for _, p := range got {
		if strings.ContainsAny(p.Message, "\x1b\x07") || strings.Contains(p.Message, "\u009b") {
			t.Errorf("progress message with raw control characters: %q", p.Message)
		}
		shown = shown || strings.Contains(p.Message, `\x1b]52;c;cHduZWQ=\x07\x1b[2Jstep`)
	}
	if !shown {
		t.Errorf("no progress message shows the rendered escapes: %v", got)
	}
}

// TestHostileSpillCopyDeadline: a cell whose output is truncated patches
// open() so that reading the spill file never runs dry. `bridge exec
// --timeout 4` copies the spill file out through the session, and must
// give up after min(10 s, 2×4 s), with the "lost when exec exits" note,
// instead of reading for hours. (4 s, not less: a new pod on a loaded
// node took 2.2 s to be ready, and the call's timeout counts from its
// start.)
func TestHostileSpillCopyDeadline(t *testing.T) {
	requirePodman(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bridgeBin, "exec", "--timeout", "4", `import builtins, time
real_open = builtins.open
class Endless:
    def __enter__(self): return self
    def __exit__(self, *a): return False
    def seek(self, n): pass
    def read(self, n=-1):
        time.sleep(0.3)
        return b'A' * max(n, 1)
def open(file, mode='r', *a, **k):
    if isinstance(file, str) and file.startswith('/workspace/.bridge/output-') and 'r' in mode:
        return Endless()
    return real_open(file, mode, *a, **k)
builtins.open = open
print('x' * 20000)`)
	cmd.Env = baseEnv(t, map[string]string{"MCP_BRIDGE_MAX_OUTPUT_BYTES": "4096"})
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	took := time.Since(start)
	t.Logf("bridge exec took %v (%v); stdout ends: %q", took.Round(10*time.Millisecond), err, tail(stdout.String(), 400))
	if ctx.Err() != nil {
		t.Fatalf("bridge exec --timeout 4 still ran after %v: the spill copy has no overall deadline\nstderr: %s", took, tail(stderr.String(), 2000))
	}
	// Container start and removal, the cell, the 8 s copy bound and the
	// interrupt's grace, with room for a loaded machine.
	if took > 45*time.Second {
		t.Errorf("bridge exec --timeout 4 took %v; want the spill copy bounded by 8 s", took)
	}
	if !regexp.MustCompile(`\(lost when exec exits: copying /workspace/\.bridge/output-[0-9]+\.txt took over 8s; `).MatchString(stdout.String()) {
		t.Errorf("no lost-when-exec-exits note naming the 8 s bound in the output: %q\nstderr: %s", tail(stdout.String(), 600), tail(stderr.String(), 2000))
	}
}
