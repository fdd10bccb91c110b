// Package kube is the sandbox backend that runs each sandbox as a Pod on a
// Kubernetes cluster (MCP_BRIDGE_RUNTIME=kubernetes). It speaks to the API
// server through client-go's core/v1 REST client (not the typed clientset,
// which would add ~30 MB to the binary): it creates one Pod per sandbox at
// the restricted Pod Security level (pod.go), and the link is the pod's
// stdin and stdout through the API server's attach, WebSocket first, SPDY
// as the fallback (box.go). A warm pool of started pods, the bridge's
// Lease and the sweep of dead bridges' pods run in Launcher.Serve
// (launcher.go, lease.go). *Launcher implements actors.Launcher.
package kube
