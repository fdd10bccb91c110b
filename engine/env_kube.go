package engine

import (
	"regexp"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/engine/kube"
	"github.com/bridge-mcp/bridge/engine/owner"
)

// RuntimeKubernetes is the MCP_BRIDGE_RUNTIME value of the kubernetes
// backend (engine/kube): each sandbox is a Pod.
const RuntimeKubernetes = "kubernetes"

var (
	dnsLabelRe     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	dnsSubdomainRe = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$`)
)

// KubeEnv is what MCP_BRIDGE_K8S_* set.
type KubeEnv struct {
	Namespace    string // "" takes the kubeconfig context's namespace
	PullPolicy   string // Always, IfNotPresent or Never
	WarmPool     int
	RuntimeClass string
	NodeName     string // tests on clusters without a scheduler only
	Seccomp      string // the Localhost seccomp profile installed on the nodes; "" for RuntimeDefault
}

// readKube reads the kubernetes backend's settings, and refuses the
// container settings a pod cannot honour when that backend is chosen.
func (r *envReader) readKube(e *Env) {
	k := &e.Kube
	if k.Namespace = r.str("MCP_BRIDGE_K8S_NAMESPACE"); k.Namespace != "" && !dnsLabelRe.MatchString(k.Namespace) {
		r.fail("MCP_BRIDGE_K8S_NAMESPACE", "a namespace name (lower-case letters, digits and '-')")
	}
	switch r.choice("MCP_BRIDGE_K8S_PULL_POLICY", "ifnotpresent", "Always, IfNotPresent or Never", "always", "ifnotpresent", "never") {
	case "always":
		k.PullPolicy = "Always"
	case "never":
		k.PullPolicy = "Never"
	default:
		k.PullPolicy = "IfNotPresent"
	}
	k.WarmPool = r.intRange("MCP_BRIDGE_K8S_WARM_POOL", 1, 0, 16)
	if k.RuntimeClass = r.str("MCP_BRIDGE_K8S_RUNTIME_CLASS"); k.RuntimeClass != "" && !dnsSubdomainRe.MatchString(k.RuntimeClass) {
		r.fail("MCP_BRIDGE_K8S_RUNTIME_CLASS", "a RuntimeClass name (lower-case letters, digits, '-' and '.')")
	}
	if k.NodeName = r.str("MCP_BRIDGE_K8S_NODE_NAME"); k.NodeName != "" && !dnsSubdomainRe.MatchString(k.NodeName) {
		r.fail("MCP_BRIDGE_K8S_NODE_NAME", "a node name (lower-case letters, digits, '-' and '.')")
	}
	if k.Seccomp = r.str("MCP_BRIDGE_K8S_SECCOMP_PROFILE"); k.Seccomp != "" && !seccompLocalRe.MatchString(k.Seccomp) {
		r.fail("MCP_BRIDGE_K8S_SECCOMP_PROFILE", "a path relative to the kubelet's seccomp directory, e.g. bridge/sandbox.json")
	}
	if e.Runtime != RuntimeKubernetes {
		return
	}
	// Pods have no host folders to bind and take their runtime from a
	// RuntimeClass: a setting that would silently do nothing is refused.
	if e.Mounts != nil {
		r.fail("MCP_BRIDGE_MOUNTS", "unset with MCP_BRIDGE_RUNTIME=kubernetes (pods cannot mount the bridge host's folders)")
	}
	if e.OCIRuntime != "" {
		r.fail("MCP_BRIDGE_OCI_RUNTIME", "unset with MCP_BRIDGE_RUNTIME=kubernetes (set MCP_BRIDGE_K8S_RUNTIME_CLASS to a RuntimeClass instead)")
	}
}

var seccompLocalRe = regexp.MustCompile(`^[A-Za-z0-9_.][A-Za-z0-9_./-]*$`)

// KubeConfig is what the kubernetes backend reads of env.
func (env Env) KubeConfig() kube.Config {
	return kube.Config{
		Namespace: env.Kube.Namespace, PullPolicy: env.Kube.PullPolicy, WarmPool: env.Kube.WarmPool,
		RuntimeClass: env.Kube.RuntimeClass, NodeName: env.Kube.NodeName, SeccompProfile: env.Kube.Seccomp,
		Image: env.Image, User: env.ContainerUser, MemoryBytes: env.MemoryBytes, CPUs: env.CPUs, Owner: owner.Label(),
	}
}

// NewKube returns the kubernetes backend for env.
func NewKube(env Env, log zerolog.Logger) *kube.Launcher {
	return kube.New(env.KubeConfig(), time.Duration(env.StartTimeout)*time.Second, log)
}
