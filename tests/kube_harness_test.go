package tests

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"

	bkube "github.com/bridge-mcp/bridge/engine/kube"
)

// kubeEnv is what a bridge under test needs for the kubernetes backend: the
// cluster's kubeconfig (a bridge in the cluster uses its ServiceAccount
// instead), the node to name, and the sandboxes' seccomp profile (go tool
// task test:k8s sets them).
func kubeEnv() map[string]string {
	env := map[string]string{"MCP_BRIDGE_RUNTIME": "kubernetes", "KUBECONFIG": os.Getenv("KUBECONFIG")}
	for _, k := range []string{"MCP_BRIDGE_K8S_NODE_NAME", "MCP_BRIDGE_K8S_NAMESPACE", "MCP_BRIDGE_K8S_SECCOMP_PROFILE"} {
		if v := os.Getenv(k); v != "" {
			env[k] = v
		}
	}
	return env
}

// kube is a core/v1 REST client of the test cluster and its namespace.
type kube struct {
	cfg    *rest.Config
	core   *rest.RESTClient
	params runtime.ParameterCodec
	codecs runtime.NegotiatedSerializer
	http   *http.Client // its idle connections are closed before goleak looks (closeKube)
	ns     string
}

// closeKube closes the test client's idle connections, if there is one.
func closeKube() {
	if kubeCheck.client != nil {
		kubeCheck.client.http.CloseIdleConnections()
	}
}

var kubeCheck struct {
	once   sync.Once
	client *kube
	err    error
}

// requireKube fails (never skips) when the cluster KUBECONFIG names does
// not answer, and returns its client.
func requireKube(t *testing.T) *kube {
	t.Helper()
	kubeCheck.once.Do(func() {
		kubeCheck.client, kubeCheck.err = newKube()
	})
	if kubeCheck.err != nil {
		t.Fatalf("a Kubernetes cluster is required (BRIDGE_TEST_RUNTIME=kubernetes; go tool task test:k8s starts one): %v", kubeCheck.err)
	}
	return kubeCheck.client
}

func newKube() (*kube, error) {
	if os.Getenv("KUBECONFIG") == "" {
		return nil, fmt.Errorf("KUBECONFIG is not set")
	}
	// The backend's own reading of the kubeconfig (certificates in memory,
	// so client-go starts no goroutine that outlives the test).
	cfg, ns, err := bkube.RESTConfig()
	if err != nil {
		return nil, err
	}
	if v := os.Getenv("MCP_BRIDGE_K8S_NAMESPACE"); v != "" {
		ns = v
	}
	sch := runtime.NewScheme()
	if err := corev1.AddToScheme(sch); err != nil {
		return nil, err
	}
	metav1.AddToGroupVersion(sch, schema.GroupVersion{Version: "v1"})
	rc := *cfg
	rc.APIPath = "/api"
	rc.GroupVersion = &corev1.SchemeGroupVersion
	codecs := serializer.NewCodecFactory(sch).WithoutConversion()
	rc.NegotiatedSerializer = codecs
	hc, err := rest.HTTPClientFor(&rc)
	if err != nil {
		return nil, err
	}
	core, err := rest.RESTClientForConfigAndClient(&rc, hc)
	if err != nil {
		return nil, err
	}
	k := &kube{cfg: cfg, core: core, params: runtime.NewParameterCodec(sch), codecs: codecs, http: hc, ns: ns}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := core.Get().AbsPath("/readyz").Do(ctx).Error(); err != nil {
		return nil, fmt.Errorf("API server %s: %w", cfg.Host, err)
	}
	return k, nil
}

// pods lists the sandbox pods with the label selector sel.
func (k *kube) pods(t *testing.T, sel string) []corev1.Pod {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return k.podsIn(ctx, t, k.ns, sel)
}

// podsIn lists the pods of namespace ns with label selector sel.
func (k *kube) podsIn(ctx context.Context, t *testing.T, ns, sel string) []corev1.Pod {
	t.Helper()
	var list corev1.PodList
	err := k.core.Get().Namespace(ns).Resource("pods").
		VersionedParams(&metav1.ListOptions{LabelSelector: sel}, k.params).Do(ctx).Into(&list)
	if err != nil {
		t.Fatalf("list pods %q in %s: %v", sel, ns, err)
	}
	return list.Items
}

// killed are the bridges the harness saw end by SIGKILL (set by Close).
var killed sync.Map // pid → true

// bridgePods are the names of the sandbox pods of the bridge with pid, by
// their owner annotation (host/pid/start...).
func (k *kube) bridgePods(t *testing.T, pid int) []string {
	t.Helper()
	prefix := ownerPrefix(pid)
	var names []string
	for _, p := range k.pods(t, "app.kubernetes.io/managed-by=bridge") {
		if strings.HasPrefix(p.Annotations["bridge-mcp.dev/owner"], prefix) {
			names = append(names, p.Name)
		}
	}
	return names
}

// assertNoPods checks that no pod of the bridge with pid is left 10 s after
// it exited.
func assertNoPods(t *testing.T, pid int) {
	t.Helper()
	k := requireKube(t)
	if _, ok := killed.Load(pid); ok {
		// A SIGKILLed bridge's pods wait for the next bridge's sweep
		// (TestKubeChaosKillBridge); their sandboxes ended with the attach.
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := k.bridgePods(t, pid)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("pods left after the bridge exited: %v", left)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// bridgePodUIDs are the UIDs of the running sandbox pods of the bridge with
// pid (the fork bomb test's "container ids" on Kubernetes).
func bridgePodUIDs(pid int) []string {
	k := kubeCheck.client
	if k == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list corev1.PodList
	if err := k.core.Get().Namespace(k.ns).Resource("pods").VersionedParams(&metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=bridge"}, k.params).Do(ctx).Into(&list); err != nil {
		return nil
	}
	var uids []string
	for _, p := range list.Items {
		if strings.HasPrefix(p.Annotations["bridge-mcp.dev/owner"], ownerPrefix(pid)) && p.Status.Phase == corev1.PodRunning {
			uids = append(uids, string(p.UID))
		}
	}
	return uids
}

// podPIDNS is the PID namespace of the sandbox of the pod with uid, found
// through the pod's cgroup on this (the only) node: the process in it that
// is not the pause process. "" if unknown.
func podPIDNS(uid string) string {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cg, err := os.ReadFile("/proc/" + e.Name() + "/cgroup")
		if err != nil || !strings.Contains(string(cg), "pod"+uid) {
			continue
		}
		if comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm"); strings.TrimSpace(string(comm)) == "pause" {
			continue
		}
		if ns, err := os.Readlink("/proc/" + e.Name() + "/ns/pid"); err == nil {
			return ns
		}
	}
	return ""
}

// waitNoSandboxes fails unless no booted sandbox of the bridge with pid
// still runs within d: no pod of it has more than one process (a pod's
// python waits alone for its boot frame until a session attaches it; a
// booted one runs the supervisor and its worker). The pod objects of a
// killed bridge wait for the next bridge's sweep (TestKubeChaosKillBridge).
func waitNoSandboxes(t *testing.T, pid int, d time.Duration, what string) {
	t.Helper()
	requireKube(t)
	start := time.Now()
	for {
		counts, _ := processesIn(bridgePodUIDs(pid))
		var running []string
		for uid, n := range counts {
			if n > 1 {
				running = append(running, uid)
			}
		}
		if len(running) == 0 {
			break
		}
		if time.Since(start) > d {
			t.Fatalf("%s: sandboxes still running in pods %v %v later", what, running, d)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("%s: sandboxes gone after %v", what, time.Since(start).Round(10*time.Millisecond))
}
