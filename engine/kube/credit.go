package kube

import (
	"io"
	"net"
	"os"
	"sync"
	"time"
)

// linkWindow is the most the host keeps written to a pod's stdin and not
// yet acknowledged by the sandbox (protocol/credit.go). The attach carries
// host writes through the API server, the kubelet and the container
// runtime, whose buffers together hold megabytes: without the window a
// sandbox that stops reading would not block the host's writes, and the
// write deadline (the link-stall bound) would not see it. With it, the
// host's writes block within one window of the sandbox's last read.
const linkWindow = 1 << 20

// link is the host's end of the attach: writes go to the pod's stdin
// through a net.Pipe (so they honour write deadlines) and wait for credit
// once linkWindow bytes are unacknowledged; the deadline bounds that wait
// too. The first write, the boot frame, is read by the sandbox's bootstrap
// before anything counts, so it is neither counted nor held for credit.
// The link keeps no buffer of its own: credit only holds the writer back.
type link struct {
	in  net.Conn       // the pod's stdin
	out *io.PipeReader // the pod's stdout

	mu       sync.Mutex
	booted   bool      // the boot frame has been written
	written  int64     // bytes written since the boot frame
	acked    int64     // the most the sandbox acknowledged, at most written
	deadline time.Time // the write deadline, for the wait on credit
	credit   chan struct{}
	done     chan struct{} // closed by closeIn: no write waits any more
	doneOnce sync.Once
}

func newLink(in net.Conn, out *io.PipeReader) *link {
	return &link{in: in, out: out, credit: make(chan struct{}, 1), done: make(chan struct{})}
}

func (k *link) Read(p []byte) (int, error) { return k.out.Read(p) }

// Write writes p, in pieces that fit the window, each after the sandbox has
// acknowledged enough. It fails with os.ErrDeadlineExceeded when the write
// deadline passes while it waits for credit or for the pipe.
func (k *link) Write(p []byte) (int, error) {
	k.mu.Lock()
	boot := !k.booted
	k.booted = true
	k.mu.Unlock()
	if boot {
		return k.in.Write(p)
	}
	n := 0
	for n < len(p) {
		room, err := k.waitCredit()
		if err != nil {
			return n, err
		}
		// Counted before the write: the sandbox may read and acknowledge
		// the piece before this Write returns. A failed write breaks the
		// link for good (LineStream), so the count is never corrected.
		piece := min(room, len(p)-n)
		k.mu.Lock()
		k.written += int64(piece)
		k.mu.Unlock()
		m, err := k.in.Write(p[n : n+piece])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// waitCredit waits until the window has room and returns it (> 0).
func (k *link) waitCredit() (int, error) {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		k.mu.Lock()
		room := linkWindow - int(k.written-k.acked)
		deadline := k.deadline
		k.mu.Unlock()
		if room > 0 {
			return room, nil
		}
		var expired <-chan time.Time
		if !deadline.IsZero() {
			wait := time.Until(deadline)
			if wait <= 0 {
				return 0, os.ErrDeadlineExceeded
			}
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			expired = timer.C
		}
		select {
		case <-k.credit:
		case <-expired:
			return 0, os.ErrDeadlineExceeded
		case <-k.done:
			return 0, io.ErrClosedPipe
		}
	}
}

// Window implements actors.CreditLink.
func (k *link) Window() int { return linkWindow }

// Ack implements actors.CreditLink: acks are cumulative; one below an
// earlier ack changes nothing, and one above what was written counts as
// what was written, so a forged ack can never open more than the window
// past what the host has actually sent.
func (k *link) Ack(n int64) {
	k.mu.Lock()
	n = min(n, k.written)
	more := n > k.acked
	if more {
		k.acked = n
	}
	k.mu.Unlock()
	if more {
		select {
		case k.credit <- struct{}{}:
		default:
		}
	}
}

func (k *link) SetWriteDeadline(t time.Time) error {
	k.mu.Lock()
	k.deadline = t
	k.mu.Unlock()
	return k.in.SetWriteDeadline(t)
}

// closeIn closes the pod's stdin (EOF to the sandbox) and ends any wait on
// credit.
func (k *link) closeIn() error {
	k.doneOnce.Do(func() { close(k.done) })
	return k.in.Close()
}

func (k *link) Close() error {
	err := k.closeIn()
	_ = k.out.Close()
	return err
}
