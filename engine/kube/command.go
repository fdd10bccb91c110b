package kube

import (
	"context"
	"fmt"
	"io"
	"sync"

	"k8s.io/client-go/tools/remotecommand"
)

// Attached is a pod with the sandbox's spec (image, limits, security
// context, user) that runs another command, and the attach to it: what
// bridge bench times a pod's attach by, for the kubernetes link's floor and
// a fresh pod per call. It is not a sandbox: nothing reads its stderr, and
// its stdin has no credit window.
type Attached struct {
	// In is the container's stdin; closing it ends the container's stdin
	// (the pod's stdinOnce).
	In io.WriteCloser
	// Out is the container's stdout; it ends when the attach does.
	Out io.Reader

	l      *Launcher
	c      *clients
	name   string
	cancel context.CancelFunc
	done   chan struct{}
	once   sync.Once
}

// StartCommand starts a pod like a sandbox's but running command, waits
// until it runs (within the start timeout) and attaches to it; the attach
// ends with ctx. Close ends the attach and deletes the pod; on error
// nothing of it is left. The pod carries the launcher's owner label, so a
// caller that does not run Serve (which holds the owner's Lease) must be
// done within the sweep's grace for pods without one (orphanAge).
func (l *Launcher) StartCommand(ctx context.Context, command []string) (*Attached, error) {
	c, err := l.connect()
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, l.startTimeout)
	name, err := l.startPod(sctx, c, command)
	cancel()
	if err != nil {
		return nil, err
	}
	ex, err := attachExecutor(c, name)
	if err != nil {
		l.deletePod(c, name)
		return nil, err
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	actx, acancel := context.WithCancel(ctx)
	a := &Attached{In: inW, Out: outR, l: l, c: c, name: name, cancel: acancel, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		err := ex.StreamWithContext(actx, remotecommand.StreamOptions{Stdin: inR, Stdout: outW, Stderr: io.Discard})
		// The stream's stdin copier reads inR until EOF, and the stream
		// does not wait for it: closing the writer ends it (closing inR
		// would fail its read, which client-go reports as an error).
		inW.Close()
		if err != nil {
			err = fmt.Errorf("kubernetes: attach to pod %s: %w", name, err)
		}
		outW.CloseWithError(err) // nil: a plain EOF
	}()
	return a, nil
}

// Close ends the attach, waits for its goroutine and deletes the pod.
func (a *Attached) Close() {
	a.once.Do(func() {
		a.In.Close()
		a.cancel()
		<-a.done
		a.l.deletePod(a.c, a.name)
	})
}
