package image

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// stderrTailLines is how many trailing stderr lines an error message carries.
const stderrTailLines = 8

// run runs name with args under ctx and returns its stdout. On failure the error carries the last lines of stderr.
func run(ctx context.Context, name string, args ...string) ([]byte, error) {
	var stdout bytes.Buffer
	stderr := &tailBuffer{max: 64 << 10}
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout = &stdout
	cmd.Stderr = stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return stdout.Bytes(), commandError(name, err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// commandError formats a failed command: its base name, the error, and the indented tail of its stderr, preceded by
// the first earlier line that mentions an error (tools such as mmdebstrap print the cause long before they exit).
func commandError(name string, err error, stderr string) error {
	tail := lastLines(stderr, stderrTailLines)
	if first := firstErrorLine(stderr); first != "" && !slices.Contains(tail, first) {
		tail = append([]string{first, "..."}, tail...)
	}
	if len(tail) == 0 {
		return fmt.Errorf("%s: %w", filepath.Base(name), err)
	}
	return fmt.Errorf("%s: %w\n    %s", filepath.Base(name), err, strings.Join(tail, "\n    "))
}

// firstErrorLine returns the first line of s that mentions "error", or "".
func firstErrorLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(strings.ToLower(l), "error") {
			return strings.TrimRight(l, " \t\r")
		}
	}
	return ""
}

// lastLines returns up to n last non-blank lines of s.
func lastLines(s string, n int) []string {
	var out []string
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0 && len(out) < n; i-- {
		if l := strings.TrimRight(lines[i], " \t\r"); strings.TrimSpace(l) != "" {
			out = append(out, l)
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
