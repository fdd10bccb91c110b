package image

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

// killDelay is how long a cancelled command has between SIGTERM and SIGKILL.
const killDelay = 20 * time.Second

// stderrTailLines is how many trailing stderr lines an error message carries.
const stderrTailLines = 8

// run runs name with args under ctx and returns its stdout. On failure the error is a *commandError, whose message
// carries the last lines of stderr.
func run(ctx context.Context, name string, args ...string) ([]byte, error) {
	var stdout bytes.Buffer
	stderr := &tailBuffer{max: 64 << 10}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout = &stdout
	cmd.Stderr = stderr
	// The command gets its own process group. On cancellation the whole group gets SIGTERM first, so that mmdebstrap
	// stops its apt/dpkg children and unmounts what it mounted in the rootfs; what is left after killDelay is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = killDelay
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return stdout.Bytes(), &commandError{name: filepath.Base(name), err: err, stderr: stderr.String()}
	}
	return stdout.Bytes(), nil
}

// commandError is a failed command: its base name, the error, and the last 64 KiB of its stderr.
type commandError struct {
	name   string
	err    error
	stderr string
}

// Error formats the command name, the error, and the indented tail of stderr, preceded by the first earlier line that
// mentions an error (tools such as mmdebstrap print the cause long before they exit).
func (e *commandError) Error() string {
	tail := lastLines(e.stderr, stderrTailLines)
	if first := firstErrorLine(e.stderr); first != "" && !slices.Contains(tail, first) {
		tail = append([]string{first, "..."}, tail...)
	}
	if len(tail) == 0 {
		return fmt.Sprintf("%s: %v", e.name, e.err)
	}
	return fmt.Sprintf("%s: %v\n    %s", e.name, e.err, strings.Join(tail, "\n    "))
}

// Unwrap returns the underlying error.
func (e *commandError) Unwrap() error { return e.err }

// stderrOf returns the captured stderr of a failed command, or "".
func stderrOf(err error) string {
	var ce *commandError
	if errors.As(err, &ce) {
		return ce.stderr
	}
	return ""
}

// errorLine matches lines that report an error (and not, say, a package named libgpg-error0).
var errorLine = regexp.MustCompile(`(?i)^(E: |error\b)|error:|error processing|\[errno `)

// firstErrorLine returns the first line of s that reports an error, or "".
func firstErrorLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if errorLine.MatchString(l) {
			return clip(strings.TrimRight(l, " \t\r"))
		}
	}
	return ""
}

// maxLineBytes caps each stderr line quoted in an error (mmdebstrap echoes whole dpkg command lines).
const maxLineBytes = 300

// clip shortens l to maxLineBytes.
func clip(l string) string {
	if len(l) <= maxLineBytes {
		return l
	}
	return l[:maxLineBytes] + "..."
}

// lastLines returns up to n last non-blank lines of s.
func lastLines(s string, n int) []string {
	var out []string
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0 && len(out) < n; i-- {
		if l := strings.TrimRight(lines[i], " \t\r"); strings.TrimSpace(l) != "" {
			out = append(out, clip(l))
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// tailBuffer is an io.Writer that keeps only the last max bytes written to it.
type tailBuffer struct {
	max int
	buf []byte
}

// Write appends p, dropping the oldest bytes beyond max.
func (t *tailBuffer) Write(p []byte) (int, error) {
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// String returns the kept bytes.
func (t *tailBuffer) String() string { return string(t.buf) }

// firstLine returns s up to its first newline.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
