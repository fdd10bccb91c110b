package kube

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/bridge-mcp/bridge/actors"
)

// maxLogs caps what the host keeps of a sandbox's stderr: the tail.
const maxLogs = 64 << 10

// exitOOMKilled is the exit code the actors report as the memory limit
// (actors.exitOOMKilled, the supervisor's OOM_EXIT): a container the
// kubelet reports OOMKilled gets it too.
const exitOOMKilled = 99

// statusBound is how long the host waits for the kubelet to report why a
// pod's attach ended (its exit code), after the stream itself ended.
const statusBound = 3 * time.Second

// box is one sandbox pod and its attach: the link is the attach's stdin
// (a net.Pipe, so host writes honour write deadlines) and stdout.
type box struct {
	l    *Launcher
	name string
	log  zerolog.Logger

	link   *link
	stderr *tail

	cancel   context.CancelFunc // ends the attach
	hungUp   chan struct{}      // closed by HangUp
	hangOnce sync.Once
	killed   chan struct{}
	killOnce sync.Once

	exited   chan struct{}
	exitCode int
	reason   string // why the pod ended, when the host knows more than the code
	wg       sync.WaitGroup
}

// attach starts the attach to the running pod name; the box has exited
// when the stream ends, its exit code taken from the pod's status.
func (l *Launcher) attach(c *clients, name string, log zerolog.Logger) (*box, error) {
	ex, err := attachExecutor(c, name)
	if err != nil {
		return nil, err
	}
	hostIn, podIn := net.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	b := &box{
		l: l, name: name, log: log,
		link:   newLink(hostIn, outR),
		stderr: &tail{max: maxLogs},
		cancel: cancel, hungUp: make(chan struct{}), killed: make(chan struct{}), exited: make(chan struct{}),
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: podIn, Stdout: outW, Stderr: b.stderr})
		// The stream's stdin copier reads podIn until it fails: closing it
		// ends that goroutine, which the stream does not wait for.
		podIn.Close()
		// Whether the host hung up before the sandbox ended: a hang-up
		// after that (a session closing while the code is looked up) does
		// not make the sandbox's own exit a clean one.
		hungUp := isClosed(b.hungUp)
		// The host sees the link's EOF only once the exit code is known:
		// it asks for the code a moment after EOF (a second at most), and
		// the kubelet reports it a second or so after the container ended.
		b.settle(c, err, hungUp)
		outW.Close()
		close(b.exited)
	}()
	return b, nil
}

// attachExecutor is the attach to pod name's container, with stdin,
// stdout and stderr.
func attachExecutor(c *clients, name string) (remotecommand.Executor, error) {
	req := c.core.Post().Namespace(c.namespace).Resource("pods").Name(name).SubResource("attach").
		Param("container", containerName).Param("stdin", "true").Param("stdout", "true").Param("stderr", "true")
	u := req.URL()
	ws, err := remotecommand.NewWebSocketExecutor(c.cfg, "GET", u.String())
	if err != nil {
		return nil, fmt.Errorf("kubernetes: attach: %w", err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(c.cfg, "POST", u)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: attach: %w", err)
	}
	// WebSocket first (kubectl's order); SPDY for API servers or proxies
	// that refuse the WebSocket upgrade.
	ex, err := remotecommand.NewFallbackExecutor(ws, spdy, func(err error) bool {
		return err != nil && (strings.Contains(err.Error(), "upgrade") || strings.Contains(err.Error(), "websocket"))
	})
	if err != nil {
		return nil, fmt.Errorf("kubernetes: attach: %w", err)
	}
	return ex, nil
}

// settle sets the exit code once the attach has ended: 0 after a hang-up
// (the supervisor's shutdown), else the container's own code from the
// pod's status; a pod that was deleted or evicted, or whose attach dropped
// while it still ran (then it is deleted: its state is lost either way),
// counts as killed (137) with the reason in Logs.
func (b *box) settle(c *clients, streamErr error, hungUp bool) {
	if hungUp {
		b.exitCode = 0
		return
	}
	b.exitCode = 137
	select {
	case <-b.killed:
		return
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), statusBound)
	defer cancel()
	go func() { // a Kill ends the wait early
		select {
		case <-b.killed:
			cancel()
		case <-ctx.Done():
		}
	}()
	for {
		var pod corev1.Pod
		err := c.core.Get().Namespace(c.namespace).Resource("pods").Name(b.name).Do(ctx).Into(&pod)
		switch {
		case err != nil && isNotFound(err):
			b.reason = fmt.Sprintf("the sandbox pod %s was deleted", b.name)
			return
		case err == nil && pod.DeletionTimestamp != nil:
			b.reason = fmt.Sprintf("the sandbox pod %s was deleted", b.name)
			return
		case err == nil && pod.Status.Reason == "Evicted":
			b.reason = fmt.Sprintf("the sandbox pod %s was evicted: %s", b.name, oneLine(pod.Status.Message))
			return
		case err == nil:
			if t := terminated(&pod); t != nil {
				b.exitCode = int(t.ExitCode)
				if t.Reason == "OOMKilled" {
					b.exitCode = exitOOMKilled
					b.reason = "the sandbox pod was OOMKilled (memory limit)"
				}
				return
			}
		}
		select {
		case <-ctx.Done():
			// Still running with no attach: nothing can reach it again.
			b.reason = fmt.Sprintf("the attach to sandbox pod %s dropped (%v)", b.name, streamErr)
			b.l.deletePod(c, b.name)
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// terminated is the sandbox container's terminated state, nil while it runs.
func terminated(pod *corev1.Pod) *corev1.ContainerStateTerminated {
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == containerName && s.State.Terminated != nil {
			return s.State.Terminated
		}
	}
	return nil
}

// Name implements actors.Sandbox.
func (b *box) Name() string { return b.name }

// Link implements actors.Sandbox.
func (b *box) Link() actors.Link { return b.link }

// HangUp implements actors.Sandbox: EOF on the pod's stdin.
func (b *box) HangUp() {
	b.hangOnce.Do(func() { close(b.hungUp) })
	b.link.closeIn()
}

// Exited implements actors.Sandbox.
func (b *box) Exited() <-chan struct{} { return b.exited }

// ExitCode implements actors.Sandbox.
func (b *box) ExitCode() int { return b.exitCode }

// Logs implements actors.Sandbox.
func (b *box) Logs(wait time.Duration) string {
	select {
	case <-b.exited:
	case <-time.After(wait):
	}
	s := b.stderr.String()
	select {
	case <-b.exited:
		if b.reason != "" {
			s = strings.TrimRight(s, "\n") + "\n" + b.reason
		}
	default:
	}
	return s
}

// Kill implements actors.Sandbox: the pod is deleted at once and the
// attach ends.
func (b *box) Kill() {
	b.killOnce.Do(func() { close(b.killed) })
	if c := b.l.clients(); c != nil {
		b.l.deletePod(c, b.name)
	}
	b.cancel()
}

// Remove implements actors.Sandbox: the pod is deleted (grace 0).
func (b *box) Remove(ctx context.Context) {
	if c := b.l.clients(); c != nil {
		b.l.deletePodCtx(ctx, c, b.name)
	}
}

// Release implements actors.Sandbox.
func (b *box) Release() {
	b.cancel()
	b.link.Close()
	b.wg.Wait()
}

// ExitReason is why the pod ended when the host knows more than its exit
// code (deleted, evicted, OOMKilled, a dropped attach); "" otherwise.
func (b *box) ExitReason() string {
	select {
	case <-b.exited:
		return b.reason
	default:
		return ""
	}
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
