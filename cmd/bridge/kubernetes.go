package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/bridge-mcp/bridge/engine"
	"github.com/bridge-mcp/bridge/engine/container"
	"github.com/bridge-mcp/bridge/engine/httpd"
	"github.com/bridge-mcp/bridge/engine/kube"
	"github.com/bridge-mcp/bridge/protocol/search"
)

// kubernetesCmd prints what running with MCP_BRIDGE_RUNTIME=kubernetes
// needs in a cluster: the manifests, or the seccomp profile to install on
// the nodes.
func (m *Main) kubernetesCmd(_ context.Context, args []string) int {
	subs := []string{"manifests", "seccomp"}
	fs := flag.NewFlagSet("kubernetes", flag.ContinueOnError)
	ns := fs.String("namespace", "bridge", "`NAMESPACE` of the bridge and its sandbox pods (manifests)")
	bridgeImage := fs.String("image", "localhost/bridge:latest", "the bridge's own `IMAGE`, from bridge image build --bridge (manifests)")
	sandboxImage := fs.String("sandbox-image", engine.DefaultImage, "the sandbox `IMAGE` (manifests)")
	servers := fs.String("servers", "", "the servers `FILE` (\"mcpServers\" JSON) for the ConfigMap (manifests; default: none)")
	policy := fs.String("policy", "", "the bridge.policy `FILE` for the ConfigMap (manifests; default: none, every tool allowed)")
	storageClass := fs.String("storage-class", "", "the state volume's storage `CLASS` (manifests; default: the cluster's default class)")
	storageSize := fs.String("storage-size", kube.DefaultStorageSize, "the state volume's `SIZE` (manifests)")
	replicas := fs.Int("replicas", 1, "`N` replicas: from 2 on, the one holding the leader Lease serves and the others stand by to take over (manifests)")
	volumeAccess := fs.String("volume-access", kube.ReadWriteOnce, "the state volume's access `MODE`: ReadWriteOnce (replicas share one node) or ReadWriteMany (they spread; the storage class must offer it) (manifests)")
	seccomp := fs.String("seccomp-profile", kube.DefaultSeccompProfile, "the sandbox pods' Localhost seccomp `PROFILE`, relative to the kubelet's seccomp directory; \"\" for RuntimeDefault (manifests)")
	publicURL := fs.String("public-url", "", "the https `URL` browsers reach the bridge at, passed to bridge serve: needed by servers with \"identity\": \"principal\" (manifests)")
	var metricsPrincipals stringList
	fs.Var(&metricsPrincipals, "metrics-principal", "the `PRINCIPAL` of the tokens that may read /metrics, passed to bridge serve; "+
		"repeatable (manifests; default "+kube.DefaultMetricsPrincipal+")")
	switch {
	case len(args) == 0:
		return m.usage("kubernetes: want a subcommand: manifests or seccomp (bridge kubernetes --help)")
	case args[0] == "-h" || args[0] == "--help" || args[0] == "-help":
		m.commandHelp("kubernetes", fs)
		return 0
	case args[0] != "manifests" && args[0] != "seccomp":
		msg := fmt.Sprintf("kubernetes: unknown subcommand %q", args[0])
		if s := search.Suggest(args[0], subs, 1); len(s) > 0 {
			msg += fmt.Sprintf("; did you mean %q?", s[0])
		}
		return m.usage("%s (subcommands: manifests, seccomp; bridge kubernetes --help)", msg)
	}
	if _, code, ok := m.parse("kubernetes "+args[0], fs, args[1:], 0); !ok {
		return code
	}
	if args[0] == "seccomp" {
		_, _ = m.Stdout.Write(append(container.PodSeccompProfile(), '\n'))
		return 0
	}
	for _, p := range metricsPrincipals {
		if !httpd.ValidPrincipal(p) {
			return m.usage("kubernetes manifests: --metrics-principal %q: a principal is 1-64 characters from A-Z a-z 0-9 _ . - (not . or ..)", p)
		}
	}
	d := kube.Deployment{Namespace: *ns, Image: *bridgeImage, SandboxImage: *sandboxImage,
		StorageClass: *storageClass, StorageSize: *storageSize, Replicas: *replicas, VolumeAccess: *volumeAccess,
		MetricsPrincipals: metricsPrincipals, SeccompProfile: *seccomp, PublicURL: *publicURL}
	if err := d.Validate(); err != nil {
		return m.usage("kubernetes manifests: %v", err)
	}
	files, err := engine.DeployFiles(*servers, *policy, *publicURL)
	if err != nil {
		m.Stderr.Write([]byte("bridge: kubernetes manifests: " + err.Error() + "\n"))
		return 1
	}
	d.Files = files
	fmt.Fprint(m.Stdout, kube.Manifests(d))
	return 0
}
