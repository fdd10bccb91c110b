package engine

import (
	"strings"
	"testing"
)

// TestLoadEnvKube checks the kubernetes settings: valid values land in
// Env.Kube, and the container settings a pod cannot honour are refused in
// that mode only (one line naming the variable: the bridge exits 2).
func TestLoadEnvKube(t *testing.T) {
	got, err := LoadEnv(envOf(map[string]string{
		"MCP_BRIDGE_RUNTIME": "kubernetes", "MCP_BRIDGE_K8S_NAMESPACE": "sandboxes", "MCP_BRIDGE_K8S_PULL_POLICY": "never",
		"MCP_BRIDGE_K8S_WARM_POOL": "0", "MCP_BRIDGE_K8S_RUNTIME_CLASS": "gvisor", "MCP_BRIDGE_K8S_NODE_NAME": "node-1.example",
		"MCP_BRIDGE_K8S_SECCOMP_PROFILE": "bridge/sandbox.json",
	}), testHome)
	if err != nil {
		t.Fatal(err)
	}
	want := KubeEnv{Namespace: "sandboxes", PullPolicy: "Never", WarmPool: 0, RuntimeClass: "gvisor", NodeName: "node-1.example", Seccomp: "bridge/sandbox.json"}
	if got.Kube != want {
		t.Errorf("Kube = %+v, want %+v", got.Kube, want)
	}
	dir := t.TempDir()
	for name, value := range map[string]string{"MCP_BRIDGE_MOUNTS": dir + ":/data", "MCP_BRIDGE_OCI_RUNTIME": "runsc"} {
		env := map[string]string{name: value}
		if _, err := LoadEnv(envOf(env), testHome); err != nil {
			t.Errorf("%s=%s without kubernetes: %v", name, value, err)
		}
		env["MCP_BRIDGE_RUNTIME"] = "kubernetes"
		_, err := LoadEnv(envOf(env), testHome)
		if err == nil || !strings.HasPrefix(err.Error(), "invalid "+name+"=") || !strings.Contains(err.Error(), "kubernetes") {
			t.Errorf("%s=%s with kubernetes: got %v, want it refused", name, value, err)
		}
	}
}
