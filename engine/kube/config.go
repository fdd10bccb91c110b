package kube

import (
	"fmt"
	"strconv"
	"strings"
)

// Config is what the launcher reads of the bridge's settings; the engine
// builds it from MCP_BRIDGE_*.
type Config struct {
	Namespace    string // MCP_BRIDGE_K8S_NAMESPACE; "" takes the kubeconfig context's, else "default"
	PullPolicy   string // Always, IfNotPresent or Never
	WarmPool     int    // pods kept started and unattached, ready for a session
	RuntimeClass string // "" for the cluster's default
	NodeName     string // set spec.nodeName (tests on clusters without a scheduler); "" lets the scheduler choose
	Image        string
	User         string // MCP_BRIDGE_CONTAINER_USER: numeric uid[:gid] (runAsUser needs numbers)
	MemoryBytes  int64
	CPUs         string // "" sets defaultCPUs
	Owner        string // this bridge's owner label (engine/owner)
	// SeccompProfile is the Localhost profile (relative to the kubelet's
	// seccomp directory) tried first; "" uses RuntimeDefault.
	SeccompProfile string
}

// defaultCPUs is the CPU limit of a pod when MCP_BRIDGE_CPUS is unset: a
// pod shares its node with other workloads, so it is never unbounded.
const defaultCPUs = "1"

// ids parses the numeric uid:gid of cfg.User (gid defaults to uid).
func (cfg Config) ids() (uid, gid int64, err error) {
	u, g, found := strings.Cut(cfg.User, ":")
	if !found {
		g = u
	}
	uid, err1 := strconv.ParseInt(u, 10, 64)
	gid, err2 := strconv.ParseInt(g, 10, 64)
	if err1 != nil || err2 != nil || uid <= 0 || gid <= 0 {
		return 0, 0, fmt.Errorf("kubernetes: MCP_BRIDGE_CONTAINER_USER=%q: want a numeric non-root uid[:gid] (pods run as runAsUser/runAsGroup)", cfg.User)
	}
	return uid, gid, nil
}
