package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// plural is the resource path of each kind the manifests hold.
var plural = map[string]string{
	"Namespace": "namespaces", "ServiceAccount": "serviceaccounts", "Role": "roles", "RoleBinding": "rolebindings",
	"NetworkPolicy": "networkpolicies", "Deployment": "deployments", "Service": "services", "Pod": "pods",
	"ConfigMap": "configmaps", "PersistentVolumeClaim": "persistentvolumeclaims", "Secret": "secrets",
}

// warnings collects the API server's warning headers (PodSecurity's among them).
type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

// TestKubeManifests validates `bridge kubernetes manifests` against the real
// API server: the Namespace is created, every other object passes a
// server-side dry-run create in it (the ServiceAccount is created), with no
// warning, and the Deployment's pod
// passes PodSecurity admission at the restricted level, which the namespace
// enforces (the same pod keeping its default capabilities is refused there:
// the check is live).
func TestKubeManifests(t *testing.T) {
	k := requireKubeRuntime(t)
	ns := fmt.Sprintf("bridge-manifests-%d", time.Now().UnixNano()%1_000_000)
	w := &warnings{}
	client := manifestClient(t, k, w)
	kinds := map[string]bool{}
	var template map[string]any
	for _, obj := range manifestObjects(t, ns) {
		kind, _ := obj["kind"].(string)
		kinds[kind] = true
		// The Namespace and the ServiceAccount are created for real: the
		// dry-runs need the one, the pod below the other (the test cluster
		// has no controller that would make a default one).
		if err := createObject(t, client, obj, ns, kind != "Namespace" && kind != "ServiceAccount"); err != nil {
			t.Errorf("%s: %v", kind, err)
		}
		if kind == "Deployment" {
			template = obj["spec"].(map[string]any)["template"].(map[string]any)
		}
	}
	for _, kind := range []string{"Namespace", "ServiceAccount", "Role", "RoleBinding", "NetworkPolicy", "ConfigMap", "PersistentVolumeClaim", "Deployment", "Service"} {
		if !kinds[kind] {
			t.Errorf("the manifests have no %s", kind)
		}
	}
	if len(w.list) > 0 {
		t.Errorf("the API server warned: %v", w.list)
	}
	if template == nil {
		t.Fatal("no Deployment pod template")
	}
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "bridge-dry-run"}, "spec": template["spec"]}
	spec := pod["spec"].(map[string]any)
	if err := createObject(t, client, pod, ns, true); err != nil {
		t.Errorf("the Deployment's pod at the restricted level: %v", err)
	}
	c := spec["containers"].([]any)[0].(map[string]any)
	delete(c["securityContext"].(map[string]any), "capabilities") // keeps the runtime's default capabilities
	if err := createObject(t, client, pod, ns, true); err == nil || !strings.Contains(err.Error(), "restricted") {
		t.Errorf("a pod with default capabilities in the namespace: got %v, want PodSecurity to refuse it", err)
	}
}

// TestKubeShippedRole runs the bridge with the shipped Role's permissions
// and no others: the manifests' Namespace, ServiceAccount, Role, RoleBinding
// and NetworkPolicy are created for real, and `bridge exec` and `bridge
// doctor` run as that ServiceAccount (their kubeconfig impersonates it).
// The same exec as a ServiceAccount the Role is not bound to is refused,
// which shows the impersonation, and so the check, is live.
func TestKubeShippedRole(t *testing.T) {
	k := requireKubeRuntime(t)
	ns := fmt.Sprintf("bridge-role-%d", time.Now().UnixNano()%1_000_000)
	client := manifestClient(t, k, nil)
	for _, obj := range manifestObjects(t, ns) {
		switch kind, _ := obj["kind"].(string); kind {
		case "Namespace", "ServiceAccount", "Role", "RoleBinding", "NetworkPolicy":
			if err := createObject(t, client, obj, ns, false); err != nil {
				t.Fatalf("%s: %v", kind, err)
			}
		}
	}
	// Every namespace has a ServiceAccount "default", which a pod's
	// admission looks up; the controller manager makes it, perhaps not yet.
	sa := map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "default"}}
	if err := createObject(t, client, sa, ns, false); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("ServiceAccount default: %v", err)
	}
	as := func(account string) map[string]string {
		return map[string]string{"KUBECONFIG": impersonating(t, "system:serviceaccount:"+ns+":"+account), "MCP_BRIDGE_K8S_NAMESPACE": ns}
	}
	out, errOut, code := runCLI(t, as("bridge"), "", "exec", "print(6 * 7)")
	if code != 0 || out != "42\n" {
		t.Errorf("bridge exec as the shipped Role's ServiceAccount: exit %d, stdout %q; want 0, %q\nstderr: %s", code, out, "42\n", tail(errOut, 3000))
	}
	out, errOut, code = runCLI(t, as("bridge"), "", "doctor")
	for _, want := range []string{`OK\s+rbac:`, `OK\s+image:`, `WARN\s+network policy: bridge-sandbox-deny-all denies all traffic`} {
		if !regexp.MustCompile(`(?m)^` + want).MatchString(out) {
			t.Errorf("bridge doctor as the shipped Role's ServiceAccount: no line %q (exit %d):\n%s\nstderr: %s", want, code, out, tail(errOut, 2000))
		}
	}
	out, errOut, code = runCLI(t, as("nobody"), "", "exec", "print(6 * 7)")
	if code == 0 || !strings.Contains(strings.ToLower(out+errOut), "forbidden") {
		t.Errorf("bridge exec as a ServiceAccount without the Role: exit %d, stdout %q; want a failure that says forbidden\nstderr: %s", code, out, tail(errOut, 2000))
	}
	// Every pod the bridge made is deleted (a pod the kubelet still stops
	// is listed with its deletion time).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range k.podsIn(ctx, t, ns, "") {
		if p.DeletionTimestamp == nil {
			t.Errorf("pod %s left in %s", p.Name, ns)
		}
	}
}

// manifestObjects are the objects of `bridge kubernetes manifests` for ns.
func manifestObjects(t *testing.T, ns string) []map[string]any {
	t.Helper()
	out, err := exec.Command(bridgeBin, "kubernetes", "manifests", "--namespace", ns).Output()
	if err != nil {
		t.Fatalf("bridge kubernetes manifests: %v", err)
	}
	var objs []map[string]any
	for i, doc := range strings.Split(string(out), "\n---\n") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		objs = append(objs, obj)
	}
	return objs
}

// manifestClient is a REST client of the test cluster for any group; w,
// when set, collects the API server's warnings.
func manifestClient(t *testing.T, k *kube, w *warnings) *rest.RESTClient {
	t.Helper()
	cfg := rest.CopyConfig(k.cfg)
	if w != nil {
		cfg.WarningHandler = w
	}
	client, err := rest.UnversionedRESTClientForConfigAndClient(withCodecs(cfg, k), k.http)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// createObject creates obj in namespace ns, or only dry-runs its creation.
func createObject(t *testing.T, client *rest.RESTClient, obj map[string]any, ns string, dryRun bool) error {
	t.Helper()
	body, _ := json.Marshal(obj)
	req := client.Post().AbsPath(apiPath(t, obj, ns)).Body(body).SetHeader("Content-Type", "application/json")
	if dryRun {
		req = req.Param("dryRun", "All")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return req.Do(ctx).Error()
}

// impersonating writes a copy of the test's kubeconfig whose user acts as
// user (the admin may impersonate anyone) and returns its path.
func impersonating(t *testing.T, user string) string {
	t.Helper()
	raw, err := os.ReadFile(os.Getenv("KUBECONFIG"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("KUBECONFIG: %v", err)
	}
	users, _ := cfg["users"].([]any)
	if len(users) == 0 {
		t.Fatal("KUBECONFIG has no user")
	}
	for _, u := range users {
		u.(map[string]any)["user"].(map[string]any)["as"] = user
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// apiPath is where obj is created.
func apiPath(t *testing.T, obj map[string]any, ns string) string {
	t.Helper()
	path, err := resourcePath(obj, ns)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// withCodecs gives cfg the codecs of the test's core client.
func withCodecs(cfg *rest.Config, k *kube) *rest.Config {
	cfg.NegotiatedSerializer = k.codecs
	return cfg
}
