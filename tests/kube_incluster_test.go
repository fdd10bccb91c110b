package tests

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	bkube "github.com/bridge-mcp/bridge/engine/kube"
)

// On the kubernetes backend the bridge under test runs in the cluster, as a
// team runs it: each startBridge of `bridge run` becomes a pod serving
// `bridge serve` over HTTP, reached through a client-go port-forward by a
// real MCP client with a bearer token, and its sandboxes are pods in the
// restricted namespace the kubeconfig names, created through the pod's own
// ServiceAccount and the shipped Role. TestKubeDeployment runs the printed
// manifests as shipped; this harness runs the core, security and lifecycle
// subsets against the same image with each test's own environment:
//   - the pod runs the race-built binary under test (bridgeBin) on the
//     bridge image's userland (node, npm, CA certificates);
//   - the host's temp directory is mounted at the same path, so the config
//     and state directories a test writes, the fake servers and the
//     binaries are where the test put them;
//   - it shares the host's PID namespace and runs as the test's uid, so the
//     tests' process checks (pid files, /proc, signals) read what they read
//     of a host bridge; the pod's hostname is still its own, so its
//     sandboxes' owner annotation starts with the pod's name;
//   - the pod's log is the bridge's stderr.
//
// These pods live in the namespace bridge-e2e, which the PodSecurity
// admission leaves privileged: hostPath, hostPID and a root test user are
// test fixtures, not the shipped deployment.
const e2eNamespace = "bridge-e2e"

// e2ePrincipal is the one principal of a bridge under test in the cluster.
const e2ePrincipal = "e2e"

// clusterBridge is the pod of a bridge under test in the cluster.
type clusterBridge struct {
	pod    string
	pid    int // the bridge's host pid
	killed bool
	logs   sync.WaitGroup
	stop   context.CancelFunc // stops the log follower
}

// inClusterPods maps a bridge's host pid to its pod, for ownerPrefix.
var inClusterPods sync.Map // int → string

// ownerPrefix is how the owner annotation of the sandboxes of the bridge
// with pid starts: host/pid/, the host being the pod's name for a bridge
// in the cluster.
func ownerPrefix(pid int) string {
	if pod, ok := inClusterPods.Load(pid); ok {
		return fmt.Sprintf("%s/%d/", pod, pid)
	}
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d/", host, pid)
}

// onHostTests are the tests whose bridge stays a host process on the
// kubernetes backend: what they check is the stdio process itself.
var onHostTests sync.Map // test name → true

// bridgeOnHost keeps t's bridges host processes on the kubernetes backend.
func bridgeOnHost(t *testing.T) {
	onHostTests.Store(t.Name(), true)
	t.Cleanup(func() { onHostTests.Delete(t.Name()) })
}

// inCluster reports whether startBridge runs command args in the cluster.
func inCluster(t *testing.T, command string, args []string, dir string) bool {
	if testRuntime() != "kubernetes" || command != bridgeBin || len(args) == 0 || args[0] != "run" || dir != "" {
		return false
	}
	for name := t.Name(); ; name = filepath.Dir(name) {
		if _, ok := onHostTests.Load(name); ok {
			return false
		}
		if !strings.Contains(name, "/") {
			return true
		}
	}
}

var e2eSetup struct {
	once sync.Once
	err  error
}

// setupInCluster creates, once per run, the namespace of the bridges under
// test, their ServiceAccount, and the shipped Role in the sandboxes'
// namespace bound to it.
func setupInCluster(t *testing.T, k *kube) {
	t.Helper()
	e2eSetup.once.Do(func() {
		client := manifestClient(t, k, nil)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		docs := []string{
			fmt.Sprintf("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: %s\n  labels:\n    pod-security.kubernetes.io/enforce: privileged\n", e2eNamespace),
			fmt.Sprintf("apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: bridge\n  namespace: %s\n", e2eNamespace),
		}
		var role string
		for _, doc := range strings.Split(bkube.Manifests(bkube.Deployment{Namespace: k.ns}), "\n---\n") {
			if strings.Contains(doc, "\nkind: Role\n") {
				role = doc
			}
		}
		if role == "" {
			e2eSetup.err = errors.New("the manifests have no Role")
			return
		}
		docs = append(docs, strings.Replace(role, "name: bridge\n", "name: bridge-e2e\n", 1),
			fmt.Sprintf("apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: bridge-e2e\n  namespace: %s\n"+
				"roleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: bridge-e2e\n"+
				"subjects:\n  - kind: ServiceAccount\n    name: bridge\n    namespace: %s\n", k.ns, e2eNamespace))
		for _, doc := range docs {
			ns := e2eNamespace
			if strings.Contains(doc, "kind: Role") {
				ns = k.ns
			}
			if err := applyYAML(ctx, client, doc, ns); err != nil {
				e2eSetup.err = fmt.Errorf("apply %s: %w", strings.SplitN(doc, "\n", 3)[1], err)
				return
			}
		}
	})
	if e2eSetup.err != nil {
		t.Fatalf("set up the namespace of the bridges under test: %v", e2eSetup.err)
	}
}

// podEnv is env (baseEnv's) for a bridge in a pod: the cluster is reached
// through the pod's ServiceAccount, not the host's kubeconfig (a test's own
// kubeconfig is kept), and the host's PATH and engine settings do not apply.
func podEnv(k *kube, env []string, tokens string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		switch {
		case name == "PATH" || name == "MCP_BRIDGE_K8S_NAMESPACE", name == "KUBECONFIG" && value == os.Getenv("KUBECONFIG"),
			strings.HasPrefix(name, "XDG_"), strings.HasPrefix(name, "CONTAINERS_"), strings.HasPrefix(name, "DOCKER_"):
			continue
		}
		out = append(out, corev1.EnvVar{Name: name, Value: value})
	}
	return append(out, corev1.EnvVar{Name: "MCP_BRIDGE_K8S_NAMESPACE", Value: k.ns},
		corev1.EnvVar{Name: "MCP_BRIDGE_TOKENS_FILE", Value: tokens})
}

// startInCluster starts b as a pod serving args (run's flags), waits until
// it is Ready, follows its log into b.stderr and initializes b.c over HTTP
// through a port-forward.
func startInCluster(t *testing.T, b *bridge, env []string, args []string, clientName, version string, opts ...client.ClientOption) {
	t.Helper()
	k := requireKube(t)
	setupInCluster(t, k)
	token := randToken(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(e2ePrincipal+" "+token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, tr := false, true
	grace := int64(60)
	mounts := []corev1.VolumeMount{{Name: "tmp", MountPath: os.TempDir()}}
	vols := []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: os.TempDir()}}}}
	if npm := os.Getenv("BRIDGE_TEST_NPM_DIR"); npm != "" {
		mounts = append(mounts, corev1.VolumeMount{Name: "npm", MountPath: npm, ReadOnly: true})
		vols = append(vols, corev1.Volume{Name: "npm", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: npm}}})
	}
	uid, gid := int64(os.Getuid()), int64(os.Getgid())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "bridge-e2e-", Labels: map[string]string{"app.kubernetes.io/name": "bridge-e2e"},
			Annotations: map[string]string{"bridge-e2e/test": t.Name()}},
		Spec: corev1.PodSpec{
			ServiceAccountName:            "bridge",
			NodeName:                      os.Getenv("MCP_BRIDGE_K8S_NODE_NAME"),
			RestartPolicy:                 corev1.RestartPolicyNever,
			HostPID:                       true,
			TerminationGracePeriodSeconds: &grace,
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: &uid, RunAsGroup: &gid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "bridge", Image: bridgeImage(), ImagePullPolicy: corev1.PullNever,
				Command: append([]string{bridgeBin, "serve", "--listen", "0.0.0.0:8080"}, args[1:]...),
				Env:     podEnv(k, env, tokens),
				Ports:   []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: &f, ReadOnlyRootFilesystem: &tr,
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("http")}},
					PeriodSeconds: 1, FailureThreshold: 1},
				VolumeMounts: mounts,
			}},
			Volumes: vols,
		},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var created corev1.Pod
	if err := k.core.Post().Namespace(e2eNamespace).Resource("pods").Body(pod).Do(ctx).Into(&created); err != nil {
		t.Fatalf("create the bridge's pod: %v", err)
	}
	cb := &clusterBridge{pod: created.Name}
	b.cluster = cb
	t.Cleanup(b.Close) // deletes the pod, whatever happens next
	logCtx, stop := context.WithCancel(context.Background())
	cb.stop = stop
	p := waitPodReady(ctx, t, k, cb.pod, b)
	cb.logs.Add(1)
	go func() {
		defer cb.logs.Done()
		followLog(logCtx, k, cb.pod, b.stderr)
	}()
	cb.pid = bridgePID(t, string(p.UID))
	inClusterPods.Store(cb.pid, cb.pod)

	ht, err := transport.NewStreamableHTTP(portForward(ctx, t, k, e2eNamespace, cb.pod)+"/mcp",
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	if err != nil {
		t.Fatal(err)
	}
	b.c = client.NewClient(ht, opts...)
	t.Cleanup(b.Close) // again: before the port-forward's cleanup, so that the client's close reaches the bridge
	if err := b.c.Start(ctx); err != nil {
		t.Fatalf("start client: %v", err)
	}
	if err := b.initialize(ctx, clientName, version); err != nil {
		t.Fatalf("initialize: %v\nbridge log:\n%s", err, tail(b.stderr.String(), 4000))
	}
}

// bridgeImage is the bridge's own image, which `go tool task k8s:up`
// imports (BRIDGE_IMAGE there).
func bridgeImage() string {
	if img := os.Getenv("BRIDGE_TEST_BRIDGE_IMAGE"); img != "" {
		return img
	}
	return "localhost/bridge:latest"
}

// waitPodReady waits until the bridge's pod is Ready (its /readyz answers)
// and returns it; it fails with the pod's state and log when the pod ends
// or the wait does.
func waitPodReady(ctx context.Context, t *testing.T, k *kube, name string, b *bridge) *corev1.Pod {
	t.Helper()
	for {
		var p corev1.Pod
		err := k.core.Get().Namespace(e2eNamespace).Resource("pods").Name(name).Do(ctx).Into(&p)
		if err == nil && podReady(&p) {
			return &p
		}
		if err == nil && (p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded) || ctx.Err() != nil {
			t.Fatalf("the bridge's pod %s is not Ready (%v, phase %s): %+v\n%s", name, err, p.Status.Phase, p.Status.ContainerStatuses,
				podLog(t, manifestClient(t, k, nil), e2eNamespace, name))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// followLog copies the pod's log to w until ctx ends or the container does.
func followLog(ctx context.Context, k *kube, pod string, w io.Writer) {
	rc, err := k.core.Get().Namespace(e2eNamespace).Resource("pods").Name(pod).SubResource("log").
		Param("container", "bridge").Param("follow", "true").Stream(ctx)
	if err != nil {
		fmt.Fprintf(w, "(log of %s: %v)\n", pod, err)
		return
	}
	defer rc.Close()
	_, _ = io.Copy(w, rc)
}

// bridgePID is the host pid of the bridge in the pod with uid: the process
// in the pod's cgroup that runs bridgeBin.
func bridgePID(t *testing.T, uid string) int {
	t.Helper()
	return podProcess(t, uid, 10*time.Second, func(args []string) bool {
		return len(args) > 1 && args[0] == bridgeBin && args[1] == "serve"
	})
}

// podProcess is the host pid of the process in the cgroup of the pod with
// uid whose arguments match, waiting up to d for one.
func podProcess(t *testing.T, uid string, d time.Duration, match func(args []string) bool) int {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			cg, err := os.ReadFile("/proc/" + e.Name() + "/cgroup")
			if err != nil || !strings.Contains(string(cg), "pod"+uid) && !strings.Contains(string(cg), "pod"+strings.ReplaceAll(uid, "-", "_")) {
				continue
			}
			if cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline"); match(strings.Split(string(cmd), "\x00")) {
				return pid
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no such process in the pod %s's cgroup", uid)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// close deletes the bridge's pod, which the kubelet stops with SIGTERM as a
// rollout does, and waits until the bridge's process has exited (the pod
// object goes on terminating meanwhile); a bridge the test SIGKILLed is
// recorded in killed, as Close does for a host process.
func (cb *clusterBridge) close(t *testing.T) {
	k := requireKube(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if cb.killed {
		killed.Store(cb.pid, true)
	}
	if err := k.core.Delete().Namespace(e2eNamespace).Resource("pods").Name(cb.pod).Do(ctx).Error(); err != nil {
		t.Errorf("delete the bridge's pod %s: %v", cb.pod, err)
	}
	for cb.pid != 0 && syscall.Kill(cb.pid, 0) == nil {
		if ctx.Err() != nil {
			t.Errorf("the bridge in pod %s still runs 2 minutes after the pod's deletion", cb.pod)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	cb.stop()
	cb.logs.Wait()
}

// pid is the bridge's pid on the host (in the host's PID namespace, which
// a bridge in the cluster shares).
func (b *bridge) pid() int {
	if b.cluster != nil {
		return b.cluster.pid
	}
	return b.cmd.Process.Pid
}

// signal sends sig to the bridge's process.
func (b *bridge) signal(sig syscall.Signal) error {
	if b.cluster != nil {
		if sig == syscall.SIGKILL {
			b.cluster.killed = true
		}
		return syscall.Kill(b.cluster.pid, sig)
	}
	return b.cmd.Process.Signal(sig)
}

// storeDir is where the bridge keeps the memory and saved tools of its
// client in state dir state: under serve, its principal's own state dir.
func (b *bridge) storeDir(state string) string {
	if b.cluster != nil {
		return filepath.Join(state, ".bridge", "principals", e2ePrincipal, ".bridge")
	}
	return filepath.Join(state, ".bridge")
}

// end ends the bridge as its client ends it and waits for the exit: stdin
// EOF for a host process; for a bridge in the cluster, which outlives its
// clients, the deletion of its pod (SIGTERM), as a rollout ends it.
func (b *bridge) end() {
	if b.cluster != nil {
		b.Close()
		return
	}
	_ = b.c.Close()
}
