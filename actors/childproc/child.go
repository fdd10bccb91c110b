package childproc

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/protocol/printable"
)

// Child is a started process that owns its pipes, the one way the bridge
// runs a sandbox's process (a container CLI, or the local backend's
// python) and a stdio MCP server. Stdin is an *os.File, so writes can have
// a deadline and closing it is the polite stop; Stdout's read end is the
// caller's to read; stderr is drained into a capped tail for error
// messages. exec.Cmd's own pipes are not used: Wait would close the
// readers and could drop the last frames the child wrote before exiting.
// The child runs in its own process group and dies with the bridge
// (Start).
type Child struct {
	Proc   *Process
	Stdin  *os.File
	Stdout *os.File // read end; nil when stdout joins stderr
	Stderr *TailBuffer
	errR   *os.File // stderr's read end, closed by Release
	drain  sync.WaitGroup
}

// StartChild starts cmd with fresh pipes; stderr lines are logged to log
// at debug. With stdoutIsLog the child's stdout joins its stderr (its
// frames travel elsewhere) and c.Stdout is nil. On error nothing is left
// open.
func StartChild(cmd *exec.Cmd, stdoutIsLog bool, log zerolog.Logger) (*Child, error) {
	var files []*os.File
	var err error
	pipe := func() (r, w *os.File) {
		if err == nil {
			if r, w, err = os.Pipe(); err == nil {
				files = append(files, r, w)
			}
		}
		return r, w
	}
	inR, inW := pipe()
	var outR, outW *os.File
	if !stdoutIsLog {
		outR, outW = pipe()
	}
	errR, errW := pipe()
	if err != nil {
		for _, f := range files {
			f.Close()
		}
		return nil, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, errW
	if stdoutIsLog {
		cmd.Stdout = errW
	}
	proc, err := Start(cmd)
	inR.Close()
	errW.Close()
	if outW != nil {
		outW.Close()
	}
	if err != nil {
		inW.Close()
		errR.Close()
		if outR != nil {
			outR.Close()
		}
		return nil, err
	}
	c := &Child{Proc: proc, Stdin: inW, Stdout: outR, errR: errR, Stderr: NewTailBuffer(50, 8<<10)}
	c.drain.Add(1)
	go func() {
		defer c.drain.Done()
		c.Stderr.Drain(errR, log)
	}()
	return c, nil
}

// Exited is closed when the process has exited.
func (c *Child) Exited() <-chan struct{} { return c.Proc.exited }

// WaitExit waits up to d for the process to exit.
func (c *Child) WaitExit(d time.Duration) bool { return c.Proc.WaitExit(d) }

// Stop ends the child politely, then by its group: stdin closes and the
// child has polite to exit; then its process group gets SIGTERM and term
// more (none when term is 0), then SIGKILL. Whatever the child left in its
// group is killed last: a wrapper (npx-style) may exit while its child
// lives on holding the pipes.
func (c *Child) Stop(polite, term time.Duration) {
	_ = c.Stdin.Close()
	exited := c.WaitExit(polite)
	if !exited && term > 0 {
		c.Proc.SignalGroup(syscall.SIGTERM)
		exited = c.WaitExit(term)
	}
	if !exited {
		c.Proc.SignalGroup(syscall.SIGKILL)
		<-c.Proc.exited
	}
	c.Proc.SignalGroup(syscall.SIGKILL)
}

// Release closes the read ends once stderr has drained (or after d: a
// grandchild may still hold the write ends) and waits for the drain.
func (c *Child) Release(d time.Duration) {
	c.Stderr.WaitDrained(d)
	if c.Stdout != nil {
		_ = c.Stdout.Close()
	}
	_ = c.errR.Close()
	c.drain.Wait()
}

// TailBuffer keeps the last lines of a stream for error messages.
type TailBuffer struct {
	maxLines, maxBytes int
	mu                 sync.Mutex
	lines              []string
	drained            chan struct{}
}

// NewTailBuffer keeps the last lines of a stream, each and all of them
// within bytes.
func NewTailBuffer(lines, bytes int) *TailBuffer {
	return &TailBuffer{maxLines: lines, maxBytes: bytes, drained: make(chan struct{})}
}

// Drain reads r to its end. Its cost is linear in what it reads: a line
// longer than maxBytes keeps only its last maxBytes, so an unterminated
// flood costs one bounded buffer, never a growing one.
func (t *TailBuffer) Drain(r io.Reader, log zerolog.Logger) {
	defer close(t.drained)
	buf := make([]byte, 32<<10)
	var partial []byte // the unterminated line so far, at most maxBytes
	keep := func(b []byte) {
		partial = append(partial, b...)
		if over := len(partial) - t.maxBytes; over > 0 {
			partial = append(partial[:0], partial[over:]...)
		}
	}
	for {
		n, err := r.Read(buf)
		data := buf[:n]
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				keep(data)
				break
			}
			keep(data[:i])
			line := string(partial)
			partial = partial[:0]
			data = data[i+1:]
			t.add(line)
			log.Debug().Str("stderr", printable.Log(line)).Msg("child stderr")
		}
		if err != nil {
			if len(partial) > 0 {
				t.add(string(partial))
			}
			return
		}
	}
}

func (t *TailBuffer) add(line string) {
	if len(line) > t.maxBytes {
		line = line[:t.maxBytes]
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.lines = append(t.lines, line)
	if len(t.lines) > t.maxLines {
		t.lines = t.lines[len(t.lines)-t.maxLines:]
	}
}

// WaitDrained waits up to d for Drain to reach the end of its stream.
func (t *TailBuffer) WaitDrained(d time.Duration) {
	select {
	case <-t.drained:
	case <-time.After(d):
	}
}

// String returns the kept lines, newest last, within maxBytes.
func (t *TailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := strings.Join(t.lines, "\n")
	if len(out) > t.maxBytes {
		out = out[len(out)-t.maxBytes:]
	}
	return out
}
