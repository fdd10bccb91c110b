package kube

import (
	_ "embed"
	"strings"
)

//go:embed manifests/bridge.yaml
var manifests string

// Manifests is the YAML to run the bridge in a cluster (a Namespace at the
// restricted Pod Security level, the ServiceAccount, Role and RoleBinding
// the backend needs, the deny-all NetworkPolicy of the sandbox pods, a
// one-replica Deployment serving HTTP and its Service), for namespace ns,
// the bridge's own image and the sandbox image.
func Manifests(ns, bridgeImage, sandboxImage string) string {
	return strings.NewReplacer("${NAMESPACE}", ns, "${BRIDGE_IMAGE}", bridgeImage, "${SANDBOX_IMAGE}", sandboxImage).Replace(manifests)
}
