package tests

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	"sigs.k8s.io/yaml"

	bkube "github.com/bridge-mcp/bridge/engine/kube"
)

// TestKubeDeployment runs the team service as shipped: the YAML of `bridge
// kubernetes manifests` (servers from --servers, a hostPath
// PersistentVolume standing in for the storage class) is applied
// unchanged, server-side, with the Secret the README has the operator
// create. The rollout completes (the readiness probe passes), and through a
// client-go port-forward to the Service's pod a real MCP client, with a
// token from the Secret, runs Python whose state persists, calls the
// ConfigMap's stdio server (node, in the bridge's image) and finds its
// sandbox pod refused network sockets. `bridge doctor` in the bridge pod
// checks the state volume, the tokens, the servers and the sandbox pods'
// sockets; the bridge logs no warning about its Secret's files. The bridge
// pod, deleted, takes its sandbox pods along, and the session's state comes
// back in its replacement from the state volume; deleting the Deployment
// leaves no sandbox pod.
func TestKubeDeployment(t *testing.T) {
	k := requireKubeRuntime(t)
	ns := fmt.Sprintf("bridge-deploy-%d", time.Now().UnixNano()%1_000_000)
	client := manifestClient(t, k, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	class := statePV(ctx, t, client, ns)

	// The servers: a stdio MCP server run by the image's node.
	script, err := os.ReadFile(filepath.Join("testdata", "echo-server.js"))
	if err != nil {
		t.Fatal(err)
	}
	servers := filepath.Join(t.TempDir(), "servers.json")
	doc := map[string]any{"mcpServers": map[string]any{"echo": map[string]any{"command": "node", "args": []string{"-e", string(script)}}}}
	if err := os.WriteFile(servers, mustJSON(t, doc), 0o600); err != nil {
		t.Fatal(err)
	}
	alice, _ := deploy(ctx, t, client, ns, "--servers", servers, "--storage-class", class, "--storage-size", "1Gi")

	start := time.Now()
	pod := waitRollout(ctx, t, k, client, ns)
	t.Logf("rollout complete in %v: pod %s", time.Since(start).Round(100*time.Millisecond), pod)

	base := portForward(ctx, t, k, ns, pod)
	s := &served{t: t, base: base}
	if code, _, body := s.raw("GET", "/readyz", "", nil); code != 200 {
		t.Errorf("GET /readyz through the port-forward: %d %s", code, body)
	}
	c, err := s.client(alice)
	if err != nil {
		t.Fatalf("MCP client: %v\n%s", err, podLog(t, client, ns, pod))
	}
	close1 := sync.OnceFunc(func() { c.Close() })
	defer close1()
	run := func(args map[string]any) string {
		t.Helper()
		r := callHTTP(t, c, args)
		if r.IsError {
			t.Fatalf("run_python %v: %s", args["code"], text(t, r))
		}
		return strings.TrimSpace(text(t, r))
	}
	run(map[string]any{"code": "x = 41"})
	if got := run(map[string]any{"code": "print(x + 1)"}); got != "42" {
		t.Errorf("state across calls: %q, want 42", got)
	}
	if got, want := run(map[string]any{"code": socketProbe}), "AF_UNIX 0\nAF_INET 1\nAF_INET6 1"; got != want {
		t.Errorf("socket syscalls in the sandbox pod (family errno):\n%s\nwant (EPERM = 1):\n%s", got, want)
	}
	if got := run(map[string]any{"code": `print(await mcp_echo.echo(text="from the pod"))`, "servers": []string{"echo"}}); !strings.Contains(got, "echo: from the pod") {
		t.Errorf("the ConfigMap's server: %q, want its echo", got)
	}
	sessionPod := run(map[string]any{"code": "import socket; print(socket.gethostname())"})
	if pods := sandboxPods(ctx, t, k, ns); !slices.Contains(pods, sessionPod) {
		t.Errorf("the session's pod %s is not among the sandbox pods %v", sessionPod, pods)
	}

	doctor := execInPod(ctx, t, k, ns, pod, "bridge", "doctor")
	t.Logf("bridge doctor in the pod:\n%s", doctor)
	for _, want := range []string{"OK   state dir: /state/.bridge is writable", "OK   tokens: /run/secrets/bridge/tokens: 2 tokens",
		"OK   config /etc/bridge/servers.json: mcps: 1 servers (echo)", "OK   server echo: stdio",
		"OK   network: a sandbox pod cannot open an AF_INET or AF_INET6 socket"} {
		if !strings.Contains(doctor, want) {
			t.Errorf("bridge doctor in the pod has no line %q", want)
		}
	}
	if strings.Contains(doctor, "FAIL") {
		t.Errorf("bridge doctor in the pod failed a check")
	}
	logs := podLog(t, client, ns, pod)
	for _, bad := range []string{"readable by other users", "readable by others"} {
		if strings.Contains(logs, bad) {
			t.Errorf("the bridge warns about its Secret's files (%q):\n%s", bad, logs)
		}
	}
	close1()

	// The bridge pod replaced: the stopping bridge deletes its sandbox pods,
	// and the session's state comes back from its snapshot on the volume,
	// signed with the Secret's key.
	mustAPI(t, client.Delete().AbsPath("/api/v1/namespaces", ns, "pods", pod).Do(ctx))
	waitGone(ctx, t, k, ns, "app.kubernetes.io/name=bridge", pod, 90*time.Second)
	waitGone(ctx, t, k, ns, bkube.LabelSandbox+"=true", sessionPod, 60*time.Second)
	pod = waitRollout(ctx, t, k, client, ns)
	s = &served{t: t, base: portForward(ctx, t, k, ns, pod)}
	c2, err := s.client(alice)
	if err != nil {
		t.Fatalf("MCP client of the new pod: %v\n%s", err, podLog(t, client, ns, pod))
	}
	close2 := sync.OnceFunc(func() { c2.Close() })
	defer close2()
	if r := callHTTP(t, c2, map[string]any{"code": "print(x + 1)"}); r.IsError || !strings.Contains(text(t, r), "42") {
		t.Errorf("the session after the bridge pod was replaced: %s, want 42 restored", text(t, r))
	}
	close2() // before its bridge goes

	// No sandbox pod outlives the bridge: deleting the Deployment stops it,
	// and it deletes every pod it owns.
	mustAPI(t, client.Delete().AbsPath("/apis/apps/v1/namespaces", ns, "deployments", "bridge").Do(ctx))
	deadline := time.Now().Add(90 * time.Second)
	for left := sandboxPods(ctx, t, k, ns); len(left) > 0; left = sandboxPods(ctx, t, k, ns) {
		if time.Now().After(deadline) {
			t.Fatalf("sandbox pods outlived their bridge by 90 s: %v", left)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// deploy applies `bridge kubernetes manifests --namespace ns args...`
// unchanged, server-side, with the Secret the README has the operator
// create, and deletes the namespace when the test ends. It returns alice's
// token and the scraper's (the principal prometheus).
func deploy(ctx context.Context, t *testing.T, client *rest.RESTClient, ns string, args ...string) (alice, scraper string) {
	t.Helper()
	out, errOut, code := runCLI(t, nil, "", append([]string{"kubernetes", "manifests", "--namespace", ns}, args...)...)
	if code != 0 {
		t.Fatalf("bridge kubernetes manifests: exit %d: %s", code, errOut)
	}
	t.Cleanup(func() { deleteNamespace(t, client, ns) })
	for i, doc := range strings.Split(out, "\n---\n") {
		if err := applyYAML(ctx, client, doc, ns); err != nil {
			t.Fatalf("apply document %d: %v\n%s", i, err, doc)
		}
	}
	alice, scraper = randToken(t), randToken(t)
	secret := map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "bridge-secrets"},
		"stringData": map[string]any{"tokens": "alice " + alice + "\nprometheus " + scraper + "\n", "key": randToken(t)}}
	mustAPI(t, client.Post().AbsPath("/api/v1/namespaces", ns, "secrets").Body(mustJSON(t, secret)).SetHeader("Content-Type", "application/json").Do(ctx))
	return alice, scraper
}

// statePV creates the state volume of a deployment in ns: a hostPath
// PersistentVolume (ReadWriteOnce) of a class no other volume has, owned by
// the bridge's uid (the kubelet applies no fsGroup to hostPath volumes),
// deleted when the test ends. It returns the class.
func statePV(ctx context.Context, t *testing.T, client *rest.RESTClient, ns string) string {
	t.Helper()
	stateDir := t.TempDir()
	if err := os.Chown(stateDir, 65532, 65532); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(stateDir, 0o770); err != nil {
		t.Fatal(err)
	}
	class := ns + "-hostpath"
	pv := map[string]any{"apiVersion": "v1", "kind": "PersistentVolume", "metadata": map[string]any{"name": class},
		"spec": map[string]any{"storageClassName": class, "capacity": map[string]any{"storage": "2Gi"},
			"accessModes": []string{"ReadWriteOnce"}, "persistentVolumeReclaimPolicy": "Retain",
			"hostPath": map[string]any{"path": stateDir, "type": "Directory"}}}
	mustAPI(t, client.Post().AbsPath("/api/v1/persistentvolumes").Body(mustJSON(t, pv)).SetHeader("Content-Type", "application/json").Do(ctx))
	t.Cleanup(func() {
		_ = client.Delete().AbsPath("/api/v1/persistentvolumes", class).Do(context.Background()).Error()
	})
	return class
}

// waitGone waits until pod name, of those with label selector sel in ns,
// is gone or being deleted.
func waitGone(ctx context.Context, t *testing.T, k *kube, ns, sel, name string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		live := false
		for _, p := range k.podsIn(ctx, t, ns, sel) {
			live = live || (p.Name == name && p.DeletionTimestamp == nil && p.Status.Phase == corev1.PodRunning)
		}
		if !live {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pod %s still running %v after it should have stopped", name, d)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// applyYAML applies one document server-side (kubectl apply
// --server-side), unchanged, in namespace ns.
func applyYAML(ctx context.Context, client *rest.RESTClient, doc, ns string) error {
	var obj map[string]any
	if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
		return err
	}
	name, _ := obj["metadata"].(map[string]any)["name"].(string)
	path, err := resourcePath(obj, ns)
	if err != nil {
		return err
	}
	return client.Patch("application/apply-patch+yaml").AbsPath(path, name).
		Param("fieldManager", "bridge-e2e").Param("force", "true").Body([]byte(doc)).Do(ctx).Error()
}

// resourcePath is where objects of obj's kind live in namespace ns.
func resourcePath(obj map[string]any, ns string) (string, error) {
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	res, ok := plural[kind]
	if !ok {
		return "", fmt.Errorf("unexpected kind %s", kind)
	}
	base := "/apis/" + apiVersion
	if !strings.Contains(apiVersion, "/") {
		base = "/api/" + apiVersion
	}
	if kind == "Namespace" {
		return base + "/" + res, nil
	}
	return base + "/namespaces/" + ns + "/" + res, nil
}

// waitRollout waits for the Deployment bridge to be Available with its
// pod Ready, and returns the pod's name; it fails with the pod's state
// and log when that takes over 4 minutes.
func waitRollout(ctx context.Context, t *testing.T, k *kube, client *rest.RESTClient, ns string) string {
	t.Helper()
	deadline := time.Now().Add(4 * time.Minute)
	for {
		var dep struct {
			Status struct {
				AvailableReplicas int `json:"availableReplicas"`
				UpdatedReplicas   int `json:"updatedReplicas"`
			} `json:"status"`
		}
		raw, err := client.Get().AbsPath("/apis/apps/v1/namespaces", ns, "deployments", "bridge").Do(ctx).Raw()
		if err == nil {
			err = json.Unmarshal(raw, &dep)
		}
		pods := k.podsIn(ctx, t, ns, "app.kubernetes.io/name=bridge")
		if err == nil && dep.Status.AvailableReplicas == 1 && dep.Status.UpdatedReplicas == 1 && len(pods) == 1 && podReady(&pods[0]) {
			return pods[0].Name
		}
		if time.Now().After(deadline) {
			var state, logs string
			for _, p := range pods {
				b, _ := json.MarshalIndent(p.Status, "", "  ")
				state += string(b)
				logs += podLog(t, client, ns, p.Name)
			}
			t.Fatalf("the Deployment did not roll out in 4 minutes (%v, %+v):\n%s\n%s", err, dep.Status, state, logs)
		}
		time.Sleep(time.Second)
	}
}

// podReady reports the pod's Ready condition.
func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// sandboxPods are the names of the live sandbox pods in ns.
func sandboxPods(ctx context.Context, t *testing.T, k *kube, ns string) []string {
	t.Helper()
	var names []string
	for _, p := range k.podsIn(ctx, t, ns, bkube.LabelSandbox+"=true") {
		if p.DeletionTimestamp == nil {
			names = append(names, p.Name)
		}
	}
	return names
}

// portForward forwards a local port to the pod's port 8080, the Service's
// target port "http" (as kubectl port-forward svc/bridge resolves it),
// until the test ends, and returns http://127.0.0.1:PORT.
func portForward(ctx context.Context, t *testing.T, k *kube, ns, pod string) string {
	t.Helper()
	rt, upgrader, err := spdy.RoundTripperFor(k.cfg)
	if err != nil {
		t.Fatal(err)
	}
	url := k.core.Post().Namespace(ns).Resource("pods").Name(pod).SubResource("portforward").URL()
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, "POST", url)
	stop, ready := make(chan struct{}), make(chan struct{})
	errOut := &syncBuffer{}
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:8080"}, stop, ready, io.Discard, errOut)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	t.Cleanup(func() {
		close(stop)
		<-done
	})
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("port-forward to %s: %v %s", pod, err, errOut.String())
	case <-ctx.Done():
		t.Fatalf("port-forward to %s: not ready", pod)
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("port-forward ports: %v %v", ports, err)
	}
	return fmt.Sprintf("http://127.0.0.1:%d", ports[0].Local)
}

// execInPod runs argv in the pod's container bridge (pods/exec, as kubectl
// exec does) and returns its stdout and stderr.
func execInPod(ctx context.Context, t *testing.T, k *kube, ns, pod string, argv ...string) string {
	t.Helper()
	req := k.core.Post().Namespace(ns).Resource("pods").Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "bridge", Command: argv, Stdout: true, Stderr: true}, k.params)
	ex, err := remotecommand.NewSPDYExecutor(k.cfg, "POST", req.URL())
	if err != nil {
		t.Fatal(err)
	}
	// Stdout and stderr are copied from two goroutines.
	out := &syncBuffer{}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	// doctor exits 1 when a check fails: the output says which.
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: out, Stderr: out}); err != nil {
		t.Logf("%v: %v", argv, err)
	}
	return out.String()
}

// podLog is the last 200 lines of the bridge container's log.
func podLog(t *testing.T, client *rest.RESTClient, ns, pod string) string {
	t.Helper()
	return containerLog(client, ns, pod, false)
}

// containerLog is the last 200 lines of the bridge container's log, or of
// its previous run's (a restarted container's), or the error getting it.
func containerLog(client *rest.RESTClient, ns, pod string, previous bool) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := client.Get().AbsPath("/api/v1/namespaces", ns, "pods", pod, "log").
		Param("container", "bridge").Param("previous", strconv.FormatBool(previous)).Param("tailLines", "200").Do(ctx).Raw()
	if err != nil {
		return fmt.Sprintf("(log of %s: %v)", pod, err)
	}
	return string(raw)
}

// deleteNamespace deletes ns and waits (up to 2 minutes) until it is gone,
// with every pod in it.
func deleteNamespace(t *testing.T, client *rest.RESTClient, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := client.Delete().AbsPath("/api/v1/namespaces", ns).Do(ctx).Error(); err != nil {
		t.Errorf("delete namespace %s: %v", ns, err)
		return
	}
	for ctx.Err() == nil {
		if err := client.Get().AbsPath("/api/v1/namespaces", ns).Do(ctx).Error(); err != nil {
			return
		}
		time.Sleep(time.Second)
	}
	t.Errorf("namespace %s still there 2 minutes after its deletion", ns)
}

// mustAPI fails the test on an API error.
func mustAPI(t *testing.T, r rest.Result) {
	t.Helper()
	if err := r.Error(); err != nil {
		t.Fatal(err)
	}
}

// mustJSON is v as JSON.
func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// randToken is 64 random hex digits.
func randToken(t *testing.T) string {
	t.Helper()
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}
