// Package kube is the sandbox backend that runs each sandbox as a Pod on a
// Kubernetes cluster (MCP_BRIDGE_RUNTIME=kubernetes). It speaks to the API
// server through client-go's core/v1 REST client: it creates one Pod per sandbox at
// the restricted Pod Security level (pod.go), and the link is the pod's
// stdin and stdout through the API server's attach, WebSocket first, SPDY
// as the fallback (box.go). A warm pool of started pods, the bridge's
// Lease and the sweep of dead bridges' pods run in Launcher.Serve
// (launcher.go, lease.go). *Launcher implements actors.Launcher.
//
// With replicas (bridge serve --leader-elect), Leadership holds the Lease
// bridge-leader through client-go's leaderelection (leader.go), whose lock
// imports the typed clientset (docs/DECISIONS.md has the binary's cost),
// and fences a leader that missed its renewals before another may lead.
package kube
