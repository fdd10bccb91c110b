package tests

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// requireKubeRuntime fails a Kubernetes-only test run on another runtime:
// test:k8s runs these with BRIDGE_TEST_RUNTIME=kubernetes.
func requireKubeRuntime(t *testing.T) *kube {
	t.Helper()
	if testRuntime() != "kubernetes" {
		t.Fatal("needs BRIDGE_TEST_RUNTIME=kubernetes (go tool task test:k8s)")
	}
	return requireKube(t)
}

// podName is the pod the session's sandbox runs in: a pod's hostname is its
// name.
func podName(b *bridge, session string) string {
	b.t.Helper()
	r := b.call(map[string]any{"code": "import socket; print(socket.gethostname())", "session": session, "timeout": 60})
	if r.IsError {
		b.t.Fatalf("hostname: %s", text(b.t, r))
	}
	return strings.TrimSpace(text(b.t, r))
}

// TestKubeChaosDeletePod deletes the sandbox pod in the middle of a call: the
// call answers with the state-lost note naming the deleted pod, the pod is
// gone well within the 30 s grace period it was deleted with (its PID 1
// handles SIGTERM), and the next call runs in a new pod, restored to the
// snapshot of the call before the deleted one (sessions that survive).
func TestKubeChaosDeletePod(t *testing.T) {
	k := requireKubeRuntime(t)
	b := startBridge(t, map[string]string{"MCP_BRIDGE_LOG_LEVEL": "warn"})
	b.mustOK("kept = 1")
	before := podName(b, "default")
	done := make(chan *mcp.CallToolResult, 1)
	go func() {
		req := mcp.CallToolRequest{}
		req.Params.Name = "run_python"
		req.Params.Arguments = map[string]any{"code": "import time\nprint('running')\ntime.sleep(60)", "timeout": 90}
		res, err := b.c.CallTool(context.Background(), req)
		if err != nil {
			t.Errorf("call: %v", err)
		}
		done <- res
	}()
	time.Sleep(time.Second) // the call is running
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// A grace period of 30 s: the pod's PID 1 ends on SIGTERM at once, so
	// the pod is gone long before it (checked below).
	deleted := time.Now()
	if err := k.core.Delete().Namespace(k.ns).Resource("pods").Name(before).
		Body(&metav1.DeleteOptions{GracePeriodSeconds: ptr.To(int64(30))}).Do(ctx).Error(); err != nil {
		t.Fatalf("delete pod %s: %v", before, err)
	}
	var res *mcp.CallToolResult
	select {
	case res = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the call was never answered after its pod was deleted")
	}
	if res == nil {
		t.Fatal("no result")
	}
	sc := structured(t, res)
	if sc["status"] != "error" || sc["stateLost"] != true {
		t.Errorf("after the delete: %v, want status error and stateLost", sc)
	}
	if got := text(t, res); !strings.Contains(got, "was deleted") || !strings.Contains(got, before) {
		t.Errorf("note = %q, want it to say pod %s was deleted", got, before)
	}
	for slices.Contains(k.bridgePods(t, b.pid()), before) {
		if time.Since(deleted) > 10*time.Second {
			t.Fatalf("pod %s still there %v after its delete with a 30 s grace period: its PID 1 ignores SIGTERM", before, time.Since(deleted).Round(time.Second))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("pod gone %v after its delete (grace period 30 s)", time.Since(deleted).Round(10*time.Millisecond))
	// Call 2 (podName's) imported socket, so it changed the state too: its
	// snapshot is written beside call 3, which the delete may cut short or
	// not, so the session comes back to call 1 or to call 2.
	if got := b.mustOK("print('kept' in globals())"); !regexp.MustCompile(`^True\nnote: session 'default' restored to call [12] of `).MatchString(got) {
		t.Errorf("next call after the delete: %q, want the state of call 1 or 2, restored", got)
	}
	if after := podName(b, "default"); after == before {
		t.Errorf("the next call ran in the deleted pod %s", before)
	}
}

// TestKubeChaosKillBridge kills a bridge with SIGKILL: its pods are gone
// within 30 s of the later of its Lease's expiry (15 s) and the next bridge
// starting, swept by that bridge.
func TestKubeChaosKillBridge(t *testing.T) {
	k := requireKubeRuntime(t)
	b1 := startBridge(t, map[string]string{"MCP_BRIDGE_LOG_LEVEL": "warn"})
	b1.mustOK("print(1)")
	pid := b1.pid()
	if len(k.bridgePods(t, pid)) == 0 {
		t.Fatal("the first bridge has no pods")
	}
	killed := time.Now()
	if err := b1.signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	b1.Close() // leaves its pods, which are this test's to check, to the next bridge's sweep
	// Before any bridge sweeps: the attached pod's stdin closed with the
	// attach (stdinOnce), so its sandbox ends at once.
	waitNoSandboxes(t, pid, 5*time.Second, "after the bridge's SIGKILL")
	b2 := startBridge(t, map[string]string{"MCP_BRIDGE_LOG_LEVEL": "warn"})
	started := time.Now()
	expiry := killed.Add(15 * time.Second)
	deadline := started
	if expiry.After(deadline) {
		deadline = expiry
	}
	deadline = deadline.Add(30 * time.Second)
	for {
		left := k.bridgePods(t, pid)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pods of the killed bridge left %v after SIGKILL (%v after the next bridge started): %v",
				time.Since(killed).Round(time.Second), time.Since(started).Round(time.Second), left)
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Logf("pods of the killed bridge gone %v after SIGKILL", time.Since(killed).Round(100*time.Millisecond))
	b2.mustOK("print(2)")
}

// TestKubeRejectedSettings checks that the container settings a pod cannot
// honour exit 2 with one line naming the variable in kubernetes mode (no
// cluster is needed: the settings are refused before any is asked).
func TestKubeRejectedSettings(t *testing.T) {
	for name, value := range map[string]string{"MCP_BRIDGE_MOUNTS": t.TempDir() + ":/data", "MCP_BRIDGE_OCI_RUNTIME": "runsc"} {
		out, errOut, code := runCLI(t, map[string]string{"MCP_BRIDGE_RUNTIME": "kubernetes", name: value}, "", "run")
		want := "bridge: invalid " + name + "="
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.HasPrefix(errOut, want) || !strings.Contains(errOut, "kubernetes") {
			t.Errorf("%s with kubernetes: exit %d, stdout %q, stderr %q; want exit 2 and one line starting %q", name, code, out, errOut, want)
		}
	}
}

// TestKubePodSpec checks a live sandbox pod, as the API server stored it
// and as the sandbox sees itself (what TestContainerFlags checks of a
// container): restricted security context, limits, stdinOnce, memory
// emptyDirs; inside, uid and gid 65534, no capabilities, no_new_privs, a
// seccomp filter, a read-only root, no service account token and no service
// environment variables but the API server's (the kubelet sets those in
// every container; docs/SECURITY.md).
func TestKubePodSpec(t *testing.T) {
	k := requireKubeRuntime(t)
	b := startBridge(t, map[string]string{"MCP_BRIDGE_MEMORY": "256m", "MCP_BRIDGE_CPUS": "0.5"})
	name := podName(b, "default")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var pod corev1.Pod
	if err := k.core.Get().Namespace(k.ns).Resource("pods").Name(name).Do(ctx).Into(&pod); err != nil {
		t.Fatal(err)
	}
	s, c := pod.Spec, pod.Spec.Containers[0]
	psc, sc := s.SecurityContext, c.SecurityContext
	for _, tt := range []struct {
		name      string
		got, want any
	}{
		{"runAsUser", *psc.RunAsUser, int64(65534)},
		{"runAsGroup", *psc.RunAsGroup, int64(65534)},
		{"runAsNonRoot", *psc.RunAsNonRoot, true},
		{"seccomp", string(psc.SeccompProfile.Type), os.Getenv("MCP_BRIDGE_K8S_SECCOMP_PROFILE") != "" && psc.SeccompProfile.Type == corev1.SeccompProfileTypeLocalhost || os.Getenv("MCP_BRIDGE_K8S_SECCOMP_PROFILE") == "" && psc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault},
		{"automountServiceAccountToken", *s.AutomountServiceAccountToken, false},
		{"enableServiceLinks", *s.EnableServiceLinks, false},
		{"readOnlyRootFilesystem", *sc.ReadOnlyRootFilesystem, true},
		{"allowPrivilegeEscalation", *sc.AllowPrivilegeEscalation, false},
		{"capabilities.drop", fmt.Sprint(sc.Capabilities.Drop), "[ALL]"},
		{"stdinOnce", c.Stdin && c.StdinOnce && !c.TTY, true},
		{"memory limit", c.Resources.Limits.Memory().String(), "256Mi"},
		{"cpu limit", c.Resources.Limits.Cpu().String(), "500m"},
		{"/tmp", s.Volumes[0].EmptyDir.Medium == corev1.StorageMediumMemory && s.Volumes[0].EmptyDir.SizeLimit.String() == "64Mi", true},
		{"/workspace", s.Volumes[1].EmptyDir.Medium == corev1.StorageMediumMemory && s.Volumes[1].EmptyDir.SizeLimit.String() == "128Mi", true},
	} {
		if tt.name == "seccomp" {
			if tt.want != true {
				t.Errorf("seccomp profile %s does not match MCP_BRIDGE_K8S_SECCOMP_PROFILE=%q", tt.got, os.Getenv("MCP_BRIDGE_K8S_SECCOMP_PROFILE"))
			}
			continue
		}
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	view := b.mustOK(`import os, json
st = dict(l.split(":\t", 1) for l in open("/proc/self/status").read().splitlines() if ":\t" in l)
try:
    open("/probe", "w"); root = "writable"
except OSError as e:
    root = e.strerror
print(json.dumps({"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(), "CapEff": st["CapEff"].strip(),
  "NoNewPrivs": st["NoNewPrivs"].strip(), "Seccomp": st["Seccomp"].strip(), "root": root,
  "token": os.path.exists("/var/run/secrets/kubernetes.io"), "service_env": sorted(k for k in os.environ if k.endswith("_SERVICE_HOST"))}))`)
	want := `{"uid": 65534, "gid": 65534, "groups": [65534], "CapEff": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2", "root": "Read-only file system", "token": false, "service_env": ["KUBERNETES_SERVICE_HOST"]}`
	if view != want {
		t.Errorf("the sandbox's view of itself:\n got %s\nwant %s", view, want)
	}
}

// TestKubeWarmPool checks MCP_BRIDGE_K8S_WARM_POOL: a bridge keeps that
// many started pods beside its spare, each a lone Python waiting for its
// boot frame (not attached), and a new session's first call takes one.
func TestKubeWarmPool(t *testing.T) {
	k := requireKubeRuntime(t)
	for _, pool := range []int{0, 2} {
		t.Run(fmt.Sprint(pool), func(t *testing.T) {
			b := startBridge(t, map[string]string{"MCP_BRIDGE_K8S_WARM_POOL": fmt.Sprint(pool)})
			pid := b.pid()
			b.mustOK("print(1)") // adopts the spare; a new spare starts
			want := 2 + pool     // the session's pod, the new spare's and the pool's
			var lone int
			waitFor(t, 30*time.Second, fmt.Sprintf("%d pods of the bridge, %d of them unattached", want, pool), func() bool {
				uids := bridgePodUIDs(pid)
				counts, _ := processesIn(uids)
				lone = 0
				for _, n := range counts {
					if n == 1 {
						lone++
					}
				}
				return len(uids) == want && lone == pool
			})
			if got := len(k.bridgePods(t, pid)); got != want {
				t.Errorf("pods: %d, want %d", got, want)
			}
			b.mustOKIn("new", "print(2)")
		})
	}
}

// TestKubeConcurrentBridges: two live bridges in one namespace each sweep
// (at start and every 10 s) without touching the other's pods: after more
// than a sweep period, both sessions keep their state in their own pods.
func TestKubeConcurrentBridges(t *testing.T) {
	k := requireKubeRuntime(t)
	a := startBridge(t, map[string]string{"MCP_BRIDGE_LOG_LEVEL": "warn"})
	a.mustOK("x = 'a'")
	b := startBridge(t, map[string]string{"MCP_BRIDGE_LOG_LEVEL": "warn"})
	b.mustOK("x = 'b'")
	before := map[int][]string{a.pid(): k.bridgePods(t, a.pid()), b.pid(): k.bridgePods(t, b.pid())}
	time.Sleep(12 * time.Second) // past one sweep of each
	if got := a.mustOK("print(x)"); got != "a" {
		t.Errorf("the first bridge's session after the second's sweeps: %q, want a", got)
	}
	if got := b.mustOK("print(x)"); got != "b" {
		t.Errorf("the second bridge's session after the first's sweeps: %q, want b", got)
	}
	for pid, pods := range before {
		now := k.bridgePods(t, pid)
		for _, p := range pods {
			if !slices.Contains(now, p) {
				t.Errorf("bridge %d's pod %s was removed while it ran (pods now %v)", pid, p, now)
			}
		}
	}
}
