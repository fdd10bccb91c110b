package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
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
	out, err := exec.Command(bridgeBin, "kubernetes", "manifests", "--namespace", ns).Output()
	if err != nil {
		t.Fatalf("bridge kubernetes manifests: %v", err)
	}
	w := &warnings{}
	cfg := rest.CopyConfig(k.cfg)
	cfg.WarningHandler = w
	client, err := rest.UnversionedRESTClientForConfigAndClient(withCodecs(cfg, k), k.http)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	var template map[string]any
	for i, doc := range strings.Split(string(out), "\n---\n") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		kind, _ := obj["kind"].(string)
		kinds[kind] = true
		path := apiPath(t, obj, ns)
		body, _ := json.Marshal(obj)
		req := client.Post().AbsPath(path).Body(body).SetHeader("Content-Type", "application/json")
		// The Namespace and the ServiceAccount are created for real: the
		// dry-runs need the one, the pod below the other (the test cluster
		// has no controller that would make a default one).
		if kind != "Namespace" && kind != "ServiceAccount" {
			req = req.Param("dryRun", "All")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := req.Do(ctx).Error()
		cancel()
		if err != nil {
			t.Errorf("%s: %v", kind, err)
		}
		if kind == "Deployment" {
			template = obj["spec"].(map[string]any)["template"].(map[string]any)
		}
	}
	for _, kind := range []string{"Namespace", "ServiceAccount", "Role", "RoleBinding", "NetworkPolicy", "Deployment", "Service"} {
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
	dryRunPod := func(pod map[string]any) error {
		body, _ := json.Marshal(pod)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return client.Post().AbsPath("/api/v1/namespaces", ns, "pods").Param("dryRun", "All").Body(body).
			SetHeader("Content-Type", "application/json").Do(ctx).Error()
	}
	spec := pod["spec"].(map[string]any)
	if err := dryRunPod(pod); err != nil {
		t.Errorf("the Deployment's pod at the restricted level: %v", err)
	}
	c := spec["containers"].([]any)[0].(map[string]any)
	delete(c["securityContext"].(map[string]any), "capabilities") // keeps the runtime's default capabilities
	if err := dryRunPod(pod); err == nil || !strings.Contains(err.Error(), "restricted") {
		t.Errorf("a pod with default capabilities in the namespace: got %v, want PodSecurity to refuse it", err)
	}
}

// apiPath is where obj is created.
func apiPath(t *testing.T, obj map[string]any, ns string) string {
	t.Helper()
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	res, ok := plural[kind]
	if !ok {
		t.Fatalf("unexpected kind %s", kind)
	}
	base := "/apis/" + apiVersion
	if !strings.Contains(apiVersion, "/") {
		base = "/api/" + apiVersion
	}
	if kind == "Namespace" {
		return base + "/" + res
	}
	return base + "/namespaces/" + ns + "/" + res
}

// withCodecs gives cfg the codecs of the test's core client.
func withCodecs(cfg *rest.Config, k *kube) *rest.Config {
	cfg.NegotiatedSerializer = k.codecs
	return cfg
}
