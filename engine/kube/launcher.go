package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/bridge-mcp/bridge/actors"
)

var _ actors.Launcher = (*Launcher)(nil)

// deleteBound bounds one pod delete request.
const deleteBound = 5 * time.Second

// Launcher starts sandbox pods. It connects to the API server on first use,
// so the MCP handshake never waits for it.
type Launcher struct {
	cfg          Config
	startTimeout time.Duration
	log          zerolog.Logger
	owner        string // OwnerID(cfg.Owner)

	connOnce sync.Once
	conn     *clients
	connErr  error

	mu      sync.Mutex
	seccomp string // the Localhost profile still tried; "" once it failed
	stopped bool   // Serve ended: a pod started now would outlive the bridge

	// pool holds the names of started, unattached pods; Serve fills it.
	pool chan string
	// taken wakes the pool's filler after Start took a pod.
	taken chan struct{}
}

// New returns a launcher for cfg; startTimeout bounds a pod's start
// (MCP_BRIDGE_START_TIMEOUT).
func New(cfg Config, startTimeout time.Duration, log zerolog.Logger) *Launcher {
	routeKlog(log)
	return &Launcher{
		cfg: cfg, startTimeout: startTimeout, log: log, owner: OwnerID(cfg.Owner),
		seccomp: cfg.SeccompProfile,
		pool:    make(chan string, max(cfg.WarmPool, 0)),
		taken:   make(chan struct{}, 1),
	}
}

// connect returns the API clients, connecting once.
func (l *Launcher) connect() (*clients, error) {
	l.connOnce.Do(func() {
		l.conn, l.connErr = connect(l.cfg.Namespace)
		if l.connErr == nil && l.seccomp == "" {
			l.log.Warn().Msg("kubernetes: sandbox pods use the runtime's default seccomp profile (RuntimeDefault); install the bridge's profile on the nodes and set it as a Localhost profile for the stricter one (docs/SECURITY.md)")
		}
	})
	return l.conn, l.connErr
}

// clients is the API clients, nil when the launcher cannot connect.
func (l *Launcher) clients() *clients {
	c, _ := l.connect()
	return c
}

// Namespace is the namespace sandbox pods run in ("" before connecting).
func (l *Launcher) Namespace() string {
	if c := l.clients(); c != nil {
		return c.namespace
	}
	return ""
}

// Start implements actors.Launcher: a pod from the warm pool when one is
// there, else a new one, attached.
func (l *Launcher) Start(ctx context.Context, session string) (actors.Sandbox, error) {
	c, err := l.connect()
	if err != nil {
		return nil, err
	}
	log := l.log.With().Str("session", session).Logger()
	select {
	case name := <-l.pool:
		select {
		case l.taken <- struct{}{}:
		default:
		}
		// A pool pod may have ended while it waited (evicted, deleted, its
		// node gone): only a running one is attached.
		err := l.stillRunning(ctx, c, name)
		var b *box
		if err == nil {
			b, err = l.attach(c, name, log.With().Str("pod", name).Logger())
		}
		if err == nil {
			return b, nil
		}
		log.Debug().Err(err).Str("pod", name).Msg("warm pod unusable; starting a new one")
		l.deletePod(c, name)
	default:
	}
	ctx, cancel := context.WithTimeout(ctx, l.startTimeout)
	defer cancel()
	name, err := l.startPod(ctx, c, nil)
	if err != nil {
		return nil, err
	}
	b, err := l.attach(c, name, log.With().Str("pod", name).Logger())
	if err != nil {
		l.deletePod(c, name)
		return nil, err
	}
	return b, nil
}

// stillRunning checks that the pool pod name still runs its container.
func (l *Launcher) stillRunning(ctx context.Context, c *clients, name string) error {
	ctx, cancel := context.WithTimeout(ctx, deleteBound)
	defer cancel()
	var pod corev1.Pod
	if err := c.core.Get().Namespace(c.namespace).Resource("pods").Name(name).Do(ctx).Into(&pod); err != nil {
		return err
	}
	if running, err := podStarted(&pod, l.cfg.Image); !running || pod.DeletionTimestamp != nil {
		return fmt.Errorf("pod %s no longer runs (%v)", name, err)
	}
	return nil
}

// StartError implements actors.Launcher.
func (l *Launcher) StartError(logs string, exitCode int) (err error, retry bool) {
	return fmt.Errorf("Sandbox pod exited with code %d before it was ready: %s", exitCode, lastLine(logs)), false
}

// startPod creates a sandbox pod and waits until its container runs; on
// error nothing of it is left. A Localhost seccomp profile that the node
// lacks is dropped for RuntimeDefault (with a WARN) and the pod started
// again. A non-nil command replaces the sandbox's (StartCommand).
func (l *Launcher) startPod(ctx context.Context, c *clients, command []string) (string, error) {
	for {
		l.mu.Lock()
		profile := l.seccomp
		l.mu.Unlock()
		name := "bridge-" + l.owner[:8] + "-" + randHex(4)
		pod, err := PodSpec(l.cfg, name, profile)
		if err != nil {
			return "", err
		}
		if command != nil {
			pod.Spec.Containers[0].Command = command
		}
		if err := c.core.Post().Namespace(c.namespace).Resource("pods").Body(pod).Do(ctx).Error(); err != nil {
			return "", l.apiError(c, "create pod", err)
		}
		err = l.waitRunning(ctx, c, name)
		l.mu.Lock()
		stopped := l.stopped
		l.mu.Unlock()
		if err == nil && stopped {
			err = errors.New("kubernetes: the bridge is stopping")
		}
		if err == nil {
			return name, nil
		}
		l.deletePod(c, name)
		if profile != "" && strings.Contains(strings.ToLower(err.Error()), "seccomp") {
			l.mu.Lock()
			l.seccomp = ""
			l.mu.Unlock()
			l.log.Warn().Str("profile", profile).Err(err).Msg("kubernetes: the bridge's seccomp profile is not installed on the node; sandbox pods use RuntimeDefault (`bridge doctor` checks it)")
			continue
		}
		return "", err
	}
}

// waitRunning polls the pod until its container runs, or fails with the
// one-line reason it cannot (image pull, container creation, the pod
// failing, no node within the start timeout).
func (l *Launcher) waitRunning(ctx context.Context, c *clients, name string) error {
	var last corev1.Pod
	for {
		var pod corev1.Pod
		err := c.core.Get().Namespace(c.namespace).Resource("pods").Name(name).Do(ctx).Into(&pod)
		if err != nil && ctx.Err() == nil {
			return l.apiError(c, "get pod", err)
		}
		if err == nil {
			last = pod
			if done, err := podStarted(&pod, l.cfg.Image); done || err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return notStarted(&last, l.startTimeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// podStarted reports whether the sandbox container runs, or why it never
// will.
func podStarted(pod *corev1.Pod, image string) (bool, error) {
	if pod.Status.Phase == corev1.PodFailed || pod.Status.Phase == corev1.PodSucceeded {
		if t := terminated(pod); t != nil {
			return false, fmt.Errorf("Sandbox pod %s ended before it was attached: %s (exit code %d) %s", pod.Name, t.Reason, t.ExitCode, oneLine(t.Message))
		}
		return false, fmt.Errorf("Sandbox pod %s failed: %s %s", pod.Name, pod.Status.Reason, oneLine(pod.Status.Message))
	}
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name != containerName {
			continue
		}
		if s.State.Running != nil {
			return true, nil
		}
		if w := s.State.Waiting; w != nil {
			switch w.Reason {
			case "ErrImagePull", "ImagePullBackOff", "ErrImageNeverPull", "InvalidImageName":
				return false, fmt.Errorf("Sandbox image '%s' is not available on node %s (%s: %s). Push it to a registry the nodes can pull from, or load it into their container runtime; check MCP_BRIDGE_IMAGE and MCP_BRIDGE_K8S_PULL_POLICY.", image, pod.Spec.NodeName, w.Reason, oneLine(w.Message))
			case "CreateContainerError", "CreateContainerConfigError", "RunContainerError":
				return false, fmt.Errorf("Sandbox pod %s cannot start its container (%s: %s)", pod.Name, w.Reason, oneLine(w.Message))
			}
		}
		if t := s.State.Terminated; t != nil {
			return false, fmt.Errorf("Sandbox pod %s ended before it was attached: %s (exit code %d)", pod.Name, t.Reason, t.ExitCode)
		}
	}
	return false, nil
}

// notStarted explains a pod that did not run within the start timeout.
func notStarted(pod *corev1.Pod, bound time.Duration) error {
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodScheduled && cond.Status != corev1.ConditionTrue {
			return fmt.Errorf("Sandbox pod %s was not scheduled within %ds: %s (a cluster without a scheduler needs MCP_BRIDGE_K8S_NODE_NAME)", pod.Name, int(bound/time.Second), oneLine(cond.Message))
		}
	}
	if pod.Spec.NodeName == "" && pod.Name != "" {
		return fmt.Errorf("Sandbox pod %s was not scheduled within %ds (a cluster without a scheduler needs MCP_BRIDGE_K8S_NODE_NAME)", pod.Name, int(bound/time.Second))
	}
	return fmt.Errorf("Sandbox pod %s did not start within %ds (MCP_BRIDGE_START_TIMEOUT)", pod.Name, int(bound/time.Second))
}

// apiError is err as one actionable line: a request the bridge's account
// may not make names the permissions it needs, one an admission plugin
// refused the server's reason, an unreachable API server its address.
func (l *Launcher) apiError(c *clients, what string, err error) error {
	switch {
	case apierrors.IsForbidden(err) && rbacDenial.MatchString(err.Error()):
		return fmt.Errorf("kubernetes: %s forbidden in namespace %s: %s (the bridge's account needs pods create/get/list/delete and pods/attach create there; `bridge kubernetes manifests` has the Role)", what, c.namespace, oneLine(err.Error()))
	case apierrors.IsForbidden(err):
		// An admission plugin's refusal (Pod Security, a quota, a missing
		// ServiceAccount): its message is the fix, not the Role.
		return fmt.Errorf("kubernetes: %s refused in namespace %s: %s", what, c.namespace, oneLine(err.Error()))
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("kubernetes: %s: the API server at %s refused the credentials (check KUBECONFIG)", what, c.cfg.Host)
	case isUnreachable(err):
		return fmt.Errorf("kubernetes: the API server at %s is unreachable: %s", c.cfg.Host, oneLine(err.Error()))
	}
	return fmt.Errorf("kubernetes: %s: %s", what, oneLine(err.Error()))
}

// rbacDenial matches the API server's authorization refusal (`User "u"
// cannot create resource "pods" ...`), as opposed to an admission plugin's.
var rbacDenial = regexp.MustCompile(`\bcannot [a-z]+ resource\b`)

// isUnreachable reports a network error talking to the API server.
func isUnreachable(err error) bool {
	var ne net.Error
	var oe *net.OpError
	return errors.As(err, &oe) || errors.As(err, &ne) || strings.Contains(err.Error(), "connection refused") ||
		strings.Contains(err.Error(), "no such host")
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// deletePod deletes a pod at once (grace 0), bounded by deleteBound.
func (l *Launcher) deletePod(c *clients, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), deleteBound)
	defer cancel()
	l.deletePodCtx(ctx, c, name)
}

func (l *Launcher) deletePodCtx(ctx context.Context, c *clients, name string) {
	err := c.core.Delete().Namespace(c.namespace).Resource("pods").Name(name).
		Body(&metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(0))}).Do(ctx).Error()
	if err != nil && !isNotFound(err) {
		l.log.Warn().Str("pod", name).Err(err).Msg("kubernetes: delete sandbox pod")
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// lastLine is the last non-empty line of s, "(no output)" when none.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if l := strings.TrimSpace(lines[len(lines)-1]); l != "" {
		return oneLine(l)
	}
	return "(no output)"
}
