package kube

import (
	_ "embed"
	"fmt"
	"strings"
)

//go:embed manifests/bridge.yaml
var manifests string

// Manifests is the YAML to run the bridge in a cluster (a Namespace at the
// restricted Pod Security level, the ServiceAccount, Role and RoleBinding
// the backend needs, the deny-all NetworkPolicy of the sandbox pods, a
// one-replica Deployment serving HTTP and its Service), for namespace ns,
// the bridge's own image and the sandbox image. The Deployment passes
// bridge serve a --metrics-principal for each of metricsPrincipals, or
// DefaultMetricsPrincipal when none is given: /metrics names every
// principal, so no team member's token reads it.
func Manifests(ns, bridgeImage, sandboxImage string, metricsPrincipals ...string) string {
	if len(metricsPrincipals) == 0 {
		metricsPrincipals = []string{DefaultMetricsPrincipal}
	}
	var args strings.Builder
	for _, p := range metricsPrincipals {
		fmt.Fprintf(&args, ", --metrics-principal, %q", p)
	}
	return strings.NewReplacer("${NAMESPACE}", ns, "${BRIDGE_IMAGE}", bridgeImage, "${SANDBOX_IMAGE}", sandboxImage,
		"${METRICS_ARGS}", args.String(), "${METRICS_PRINCIPAL}", metricsPrincipals[0]).Replace(manifests)
}

// DefaultMetricsPrincipal is the principal the manifests let read /metrics
// when the manifests command is given no --metrics-principal: the
// Prometheus scraper's line in the tokens Secret.
const DefaultMetricsPrincipal = "prometheus"
