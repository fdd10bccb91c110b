package kube

import (
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// creditPair is a link whose pod end is read by the test: reads counts
// every byte the pod end got.
func creditPair(t *testing.T) (*link, net.Conn) {
	t.Helper()
	hostIn, podIn := net.Pipe()
	outR, outW := io.Pipe()
	k := newLink(hostIn, outR)
	t.Cleanup(func() {
		k.Close()
		podIn.Close()
		outW.Close()
	})
	return k, podIn
}

// drain reads everything from c and reports the total when c ends.
func drain(c net.Conn) <-chan int64 {
	total := make(chan int64, 1)
	go func() {
		n, _ := io.Copy(io.Discard, c)
		total <- n
	}()
	return total
}

// TestLinkCreditBoundsUnacked: after the boot frame (never held), the host
// writes at most linkWindow bytes the sandbox has not acknowledged; the
// write deadline ends a wait on credit, as it ends a wait on the pipe.
func TestLinkCreditBoundsUnacked(t *testing.T) {
	k, pod := creditPair(t)
	total := drain(pod)
	if _, err := k.Write(make([]byte, 3*linkWindow)); err != nil { // the boot frame
		t.Fatalf("boot frame: %v", err)
	}
	_ = k.SetWriteDeadline(time.Now().Add(300 * time.Millisecond))
	start := time.Now()
	n, err := k.Write(make([]byte, 2*linkWindow))
	if got, want := n, linkWindow; got != want {
		t.Errorf("written without acks: %d, want %d", got, want)
	}
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("write without acks: %v, want a deadline error", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 5*time.Second {
		t.Errorf("the wait for credit took %v, want the 300 ms deadline", d)
	}
	k.Close()
	if got, want := <-total, int64(4*linkWindow); got != want {
		t.Errorf("the pod got %d bytes, want %d", got, want)
	}
}

// TestLinkCreditAcks: an ack lets the writer go on; acks are cumulative.
func TestLinkCreditAcks(t *testing.T) {
	k, pod := creditPair(t)
	total := drain(pod)
	if _, err := k.Write([]byte("boot\n")); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_ = k.SetWriteDeadline(time.Now().Add(10 * time.Second))
		_, err := k.Write(make([]byte, 3*linkWindow))
		done <- err
	}()
	for acked := int64(0); ; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("write with acks: %v", err)
			}
			k.Close()
			if got, want := <-total, int64(3*linkWindow+5); got != want {
				t.Errorf("the pod got %d bytes, want %d", got, want)
			}
			return
		case <-time.After(20 * time.Millisecond):
			k.mu.Lock()
			w := k.written
			k.mu.Unlock()
			if w-acked > linkWindow {
				t.Fatalf("%d bytes written, %d acknowledged: more than the window", w, acked)
			}
			acked = w
			k.Ack(acked)
			k.Ack(acked / 2) // an old ack changes nothing
		}
	}
}

// TestLinkCreditForgedAck: an ack for more than was written (forged) opens
// no more than the window past what was written.
func TestLinkCreditForgedAck(t *testing.T) {
	k, pod := creditPair(t)
	total := drain(pod)
	_, _ = k.Write([]byte("boot\n"))
	k.Ack(1 << 40)
	_ = k.SetWriteDeadline(time.Now().Add(200 * time.Millisecond))
	n, err := k.Write(make([]byte, 2*linkWindow))
	if got, want := n, linkWindow; got != want || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("after a forged ack: %d bytes written, %v; want %d and a deadline error", got, err, want)
	}
	k.Close()
	<-total
}

// TestLinkCreditClose: closing the link (a hang-up, a release) ends a wait
// on credit at once.
func TestLinkCreditClose(t *testing.T) {
	k, pod := creditPair(t)
	total := drain(pod)
	_, _ = k.Write([]byte("boot\n"))
	done := make(chan error, 1)
	go func() {
		_, err := k.Write(make([]byte, 2*linkWindow))
		done <- err
	}()
	time.Sleep(100 * time.Millisecond)
	_ = k.closeIn()
	select {
	case err := <-done:
		if !errors.Is(err, io.ErrClosedPipe) {
			t.Errorf("write after close: %v, want io.ErrClosedPipe", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a write waiting for credit outlived the link's close")
	}
	<-total
}
