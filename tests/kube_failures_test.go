package tests

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// kubeconfigFor writes a kubeconfig for server with a bearer token (the
// test cluster's CA) and returns its path.
func kubeconfigFor(t *testing.T, k *kube, server, token string) string {
	t.Helper()
	ca := k.cfg.CAData
	if len(ca) == 0 && k.cfg.CAFile != "" {
		var err error
		if ca, err = os.ReadFile(k.cfg.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	cfg := map[string]any{
		"apiVersion": "v1", "kind": "Config", "current-context": "c",
		"clusters": []any{map[string]any{"name": "c", "cluster": map[string]any{"server": server, "certificate-authority-data": ca}}},
		"users":    []any{map[string]any{"name": "u", "user": map[string]any{"token": token}}},
		"contexts": []any{map[string]any{"name": "c", "context": map[string]any{"cluster": "c", "user": "u", "namespace": k.ns}}},
	}
	data, _ := json.Marshal(cfg) // JSON is YAML
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// serviceAccountToken is a short-lived token of the namespace's default
// ServiceAccount, which no Role grants anything.
func serviceAccountToken(t *testing.T, k *kube) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body := []byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"TokenRequest","spec":{"expirationSeconds":600}}`)
	raw, err := k.core.Post().Namespace(k.ns).Resource("serviceaccounts").Name("default").SubResource("token").
		Body(body).SetHeader("Content-Type", "application/json").Do(ctx).Raw()
	if err != nil {
		t.Fatalf("token request: %v", err)
	}
	var out struct {
		Status struct {
			Token string `json:"token"`
		} `json:"status"`
	}
	if err := json.Unmarshal(raw, &out); err != nil || out.Status.Token == "" {
		t.Fatalf("token request: %v %s", err, raw)
	}
	return out.Status.Token
}

// TestKubeAPIErrors checks the notes of an API server the bridge cannot use:
// unreachable (it names the address) and forbidden (it names the namespace
// and what the account needs); each is one line, and the bridge stays up.
// bridge doctor FAILs the RBAC check of the forbidden account.
func TestKubeAPIErrors(t *testing.T) {
	k := requireKubeRuntime(t)
	cases := []struct {
		name, kubeconfig string
		want             []string
	}{
		{"unreachable", kubeconfigFor(t, k, "https://127.0.0.1:1", "x"), []string{"kubernetes: the API server at https://127.0.0.1:1 is unreachable"}},
		{"forbidden", kubeconfigFor(t, k, k.cfg.Host, serviceAccountToken(t, k)), []string{"forbidden in namespace " + k.ns, "pods create/get/list/delete"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := startBridge(t, map[string]string{"KUBECONFIG": c.kubeconfig, "MCP_BRIDGE_K8S_WARM_POOL": "0"})
			for i := 0; i < 2; i++ {
				sc := structured(t, b.run("print(1)"))
				got, _ := sc["error"].(string)
				for _, w := range c.want {
					if !strings.Contains(got, w) || strings.Contains(got, "\n") {
						t.Errorf("call %d: error %q, want one line with %q", i, got, w)
					}
				}
			}
		})
	}
	out, _, code := runCLI(t, map[string]string{"KUBECONFIG": cases[1].kubeconfig}, "", "doctor")
	if code != 1 || !strings.Contains(out, "FAIL rbac: denied in namespace "+k.ns) {
		t.Errorf("doctor with a forbidden account: exit %d, output:\n%s", code, out)
	}
}

// TestKubeDoctor checks bridge doctor against the test cluster: the API
// server, the Role, the image in a throwaway pod and the Localhost seccomp
// profile pass; the missing NetworkPolicy and the pod limits WARN.
func TestKubeDoctor(t *testing.T) {
	requireKubeRuntime(t)
	if os.Getenv("MCP_BRIDGE_K8S_SECCOMP_PROFILE") == "" {
		t.Fatal("needs MCP_BRIDGE_K8S_SECCOMP_PROFILE (go tool task test:k8s sets it)")
	}
	out, _, _ := runCLI(t, nil, "", "doctor")
	for _, want := range []string{"OK   runtime: kubernetes v1.", "OK   rbac: ", "OK   image: ", "OK   seccomp: the Localhost profile ",
		"WARN network policy: ", "WARN pod limits: "} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, out)
		}
	}
	out, _, code := runCLI(t, map[string]string{"MCP_BRIDGE_K8S_SECCOMP_PROFILE": "bridge/missing.json"}, "", "doctor")
	if code != 1 || !strings.Contains(out, "FAIL seccomp: the Localhost profile bridge/missing.json is not installed") {
		t.Errorf("doctor with a missing profile: exit %d:\n%s", code, out)
	}
}
