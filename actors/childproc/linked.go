package childproc

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/protocol"
)

// LinkFD is the descriptor a linked child gets its link socket on.
const LinkFD = 3

// Linked is a child that speaks newline-delimited frames with the host: a
// sandbox's process, run by a backend that starts one local process per
// sandbox (a container CLI, or the local test backend's python).
type Linked struct {
	child  *Child
	link   *Link
	hangUp func()
}

// StartLinked starts cmd as a Linked child. With socket, its link is a
// socket pair whose other end the child gets as fd 3 (LinkFD), and its
// stdout joins its stderr; otherwise the link is its stdin and stdout.
// On error nothing is left open.
func StartLinked(cmd *exec.Cmd, socket bool, log zerolog.Logger) (*Linked, error) {
	var host *net.UnixConn
	if socket {
		var box *os.File
		var err error
		if host, box, err = socketLink(); err != nil {
			return nil, fmt.Errorf("link: %w", err)
		}
		defer box.Close() // the child has its own copy once started
		cmd.ExtraFiles = []*os.File{box}
	}
	c, err := StartChild(cmd, socket, log)
	if err != nil {
		if host != nil {
			host.Close()
		}
		return nil, err
	}
	l := &Linked{child: c}
	if host != nil {
		l.link = &Link{r: host, w: host, c: multiCloser{host, c.Stdin}}
		l.hangUp = func() {
			_ = host.CloseWrite()
			_ = c.Stdin.Close()
		}
	} else {
		l.link = &Link{r: c.Stdout, w: c.Stdin, c: multiCloser{c.Stdin, c.Stdout}}
		l.hangUp = func() { _ = c.Stdin.Close() }
	}
	return l, nil
}

// socketLink returns the two ends of a link socket: the host's, with write
// deadlines, and the box's, for the child's fd 3.
func socketLink() (*net.UnixConn, *os.File, error) {
	host, box, err := protocol.SocketPair()
	if err != nil {
		return nil, nil, err
	}
	conn, err := net.FileConn(host) // a dup of the descriptor
	host.Close()
	if err != nil {
		box.Close()
		return nil, nil, err
	}
	return conn.(*net.UnixConn), box, nil
}

// Link is the host's end of the child's link.
func (l *Linked) Link() *Link { return l.link }

// HangUp ends the host's side of the link politely (EOF to the child)
// while its replies are still read: stdin's close, or the link socket's
// write shutdown.
func (l *Linked) HangUp() { l.hangUp() }

// Exited is closed when the process has exited.
func (l *Linked) Exited() <-chan struct{} { return l.child.Exited() }

// ExitCode is the exit code, 128+signal when signalled; valid once Exited
// is closed.
func (l *Linked) ExitCode() int { return l.child.Proc.Code() }

// Logs is the tail of the child's stderr (and of its stdout with a socket
// link), after waiting up to wait for the drain to reach its end.
func (l *Linked) Logs(wait time.Duration) string {
	l.child.Stderr.WaitDrained(wait)
	return l.child.Stderr.String()
}

// Kill SIGKILLs the child's process group: the child and anything it
// started.
func (l *Linked) Kill() { l.child.Proc.SignalGroup(syscall.SIGKILL) }

// Release closes the read ends once stderr has drained (or after a second:
// a grandchild may still hold the write ends) and waits for the drain.
// Call it once the child has exited.
func (l *Linked) Release() { l.child.Release(time.Second) }

// Link is the host's end of a child's link: frames are read from and
// written to it; writes can be bounded (SetWriteDeadline). Close closes
// every host descriptor of the link at once.
type Link struct {
	r io.Reader
	w interface {
		io.Writer
		SetWriteDeadline(time.Time) error
	}
	c io.Closer
}

func (l *Link) Read(p []byte) (int, error) { return l.r.Read(p) }

func (l *Link) Write(p []byte) (int, error) { return l.w.Write(p) }

// SetWriteDeadline bounds the writes that follow (zero: none).
func (l *Link) SetWriteDeadline(t time.Time) error { return l.w.SetWriteDeadline(t) }

// Close closes the host's descriptors of the link.
func (l *Link) Close() error { return l.c.Close() }

// multiCloser closes each of its members.
type multiCloser []io.Closer

func (m multiCloser) Close() error {
	var first error
	for _, c := range m {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
