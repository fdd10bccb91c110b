package actors

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

// child is a started process that owns its pipes, the one way the bridge
// runs a sandbox's container CLI and a stdio MCP server. stdin is an
// *os.File, so writes can have a deadline and closing it is the polite
// stop; stdout's read end is the caller's to read; stderr is drained into a
// capped tail for error messages. exec.Cmd's own pipes are not used: Wait
// would close the readers and could drop the last frames the child wrote
// before exiting. The child runs in its own process group and dies with
// the bridge (startProcess).
type child struct {
	proc   *process
	stdin  *os.File
	stdout *os.File // read end; nil when stdout joins stderr
	stderr *tailBuffer
	errR   *os.File // stderr's read end, closed by release
	drain  sync.WaitGroup
}

// startChild starts cmd with fresh pipes; stderr lines are logged to log
// at debug. With stdoutIsLog the child's stdout joins its stderr (its
// frames travel elsewhere) and c.stdout is nil. On error nothing is left
// open.
func startChild(cmd *exec.Cmd, stdoutIsLog bool, log zerolog.Logger) (*child, error) {
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
	proc, err := startProcess(cmd)
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
	c := &child{proc: proc, stdin: inW, stdout: outR, errR: errR, stderr: newTailBuffer(50, 8<<10)}
	c.drain.Add(1)
	go func() {
		defer c.drain.Done()
		c.stderr.drain(errR, log)
	}()
	return c, nil
}

// exited is closed when the process has exited.
func (c *child) exited() <-chan struct{} { return c.proc.exited }

// waitExit waits up to d for the process to exit.
func (c *child) waitExit(d time.Duration) bool { return waitClosed(c.proc.exited, d) }

// stop ends the child politely, then by its group: stdin closes and the
// child has polite to exit; then its process group gets SIGTERM and term
// more (none when term is 0), then SIGKILL. Whatever the child left in its
// group is killed last: a wrapper (npx-style) may exit while its child
// lives on holding the pipes.
func (c *child) stop(polite, term time.Duration) {
	_ = c.stdin.Close()
	exited := c.waitExit(polite)
	if !exited && term > 0 {
		c.proc.signalGroup(syscall.SIGTERM)
		exited = c.waitExit(term)
	}
	if !exited {
		c.proc.signalGroup(syscall.SIGKILL)
		<-c.proc.exited
	}
	c.proc.signalGroup(syscall.SIGKILL)
}

// release closes the read ends once stderr has drained (or after d: a
// grandchild may still hold the write ends) and waits for the drain.
func (c *child) release(d time.Duration) {
	c.stderr.waitDrained(d)
	if c.stdout != nil {
		_ = c.stdout.Close()
	}
	_ = c.errR.Close()
	c.drain.Wait()
}

// waitClosed waits up to d for ch to close.
func waitClosed(ch <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}

// tailBuffer keeps the last lines of a stream for error messages.
type tailBuffer struct {
	maxLines, maxBytes int
	mu                 sync.Mutex
	lines              []string
	drained            chan struct{}
}

func newTailBuffer(lines, bytes int) *tailBuffer {
	return &tailBuffer{maxLines: lines, maxBytes: bytes, drained: make(chan struct{})}
}

// drain reads r to its end. Its cost is linear in what it reads: a line
// longer than maxBytes keeps only its last maxBytes, so an unterminated
// flood costs one bounded buffer, never a growing one.
func (t *tailBuffer) drain(r io.Reader, log zerolog.Logger) {
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

func (t *tailBuffer) add(line string) {
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

func (t *tailBuffer) waitDrained(d time.Duration) {
	select {
	case <-t.drained:
	case <-time.After(d):
	}
}

// String returns the kept lines, newest last, within maxBytes.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := strings.Join(t.lines, "\n")
	if len(out) > t.maxBytes {
		out = out[len(out)-t.maxBytes:]
	}
	return out
}
