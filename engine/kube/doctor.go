package kube

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
)

// doctorPodBound bounds the throwaway pod of a doctor check.
const doctorPodBound = 90 * time.Second

// Doctor checks the backend, one line each with its fix: the API server
// answers, the bridge's account may do what the backend does, the image
// runs in a throwaway pod (with the Localhost seccomp profile when one is
// set, which checks it is installed), and a NetworkPolicy selects the
// sandbox pods; it WARNs what a pod cannot match of the container flags.
func (l *Launcher) Doctor(ctx context.Context, add func(status, name, format string, a ...any)) {
	c, err := l.connect()
	if err != nil {
		add("FAIL", "runtime", "%v", err)
		return
	}
	var version struct {
		GitVersion string `json:"gitVersion"`
	}
	raw, err := rawBody(c.core.Get().AbsPath("/version").Do(ctx))
	if err == nil {
		err = json.Unmarshal(raw, &version)
	}
	if err != nil {
		add("FAIL", "runtime", "%v", l.apiError(c, "version", err))
		return
	}
	add("OK", "runtime", "kubernetes %s at %s, namespace %s", version.GitVersion, c.cfg.Host, c.namespace)
	l.doctorRBAC(ctx, c, add)
	l.doctorImage(ctx, c, add)
	l.doctorNetworkPolicy(ctx, c, add)
	l.doctorLeader(ctx, add)
	add("WARN", "pod limits", "the sandbox's /tmp and /workspace are memory emptyDirs, which cannot be noexec, and its process limit is the kubelet's podPidsLimit, not MCP_BRIDGE_PIDS (docs/SECURITY.md, per-backend table)")
}

// doctorLeader names the replica holding the leader Lease, when replicas
// run with bridge serve --leader-elect.
func (l *Launcher) doctorLeader(ctx context.Context, add func(status, name, format string, a ...any)) {
	info, err := l.Leader(ctx)
	switch {
	case errors.Is(err, errNoLeaderLease):
		add("OK", "leader", "no Lease %s: one replica, serving without election (bridge serve --leader-elect)", LeaderLease)
	case err != nil:
		add("WARN", "leader", "%v", err)
	case info.Holder == "" || info.Expired:
		add("WARN", "leader", "no replica holds the Lease %s (last renewed %s ago): the standby takes it within seconds; if this lasts, no replica serves",
			LeaderLease, time.Since(info.Renewed).Round(time.Second))
	default:
		pod, _, _ := strings.Cut(info.Holder, "_")
		add("OK", "leader", "pod %s holds the Lease %s (renewed %s ago)", pod, LeaderLease, time.Since(info.Renewed).Round(100*time.Millisecond))
	}
}

// rawBody is r's body, or its error as the API server stated it: Raw
// alone gives a refusal in JSON as "unknown", without the server's message.
func rawBody(r rest.Result) ([]byte, error) {
	raw, err := r.Raw()
	if err != nil {
		return nil, r.Error()
	}
	return raw, nil
}

// needed is what the backend does with the API, as access review attributes.
var needed = []struct{ group, resource, verb string }{
	{"", "pods", "create"}, {"", "pods", "get"}, {"", "pods", "list"}, {"", "pods", "delete"},
	{"", "pods/attach", "create"},
	{"coordination.k8s.io", "leases", "create"}, {"coordination.k8s.io", "leases", "get"}, {"coordination.k8s.io", "leases", "update"},
	{"coordination.k8s.io", "leases", "delete"},
}

// doctorRBAC asks the API server whether the bridge's account may do each
// thing in needed (SelfSubjectAccessReview).
func (l *Launcher) doctorRBAC(ctx context.Context, c *clients, add func(status, name, format string, a ...any)) {
	var denied []string
	for _, n := range needed {
		resource, sub, _ := strings.Cut(n.resource, "/")
		review := map[string]any{"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
			"spec": map[string]any{"resourceAttributes": map[string]any{
				"namespace": c.namespace, "group": n.group, "resource": resource, "subresource": sub, "verb": n.verb}}}
		body, _ := json.Marshal(review)
		raw, err := rawBody(c.core.Post().AbsPath("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews").
			SetHeader("Content-Type", "application/json").Body(body).Do(ctx))
		var out struct {
			Status struct {
				Allowed bool `json:"allowed"`
			} `json:"status"`
		}
		if err == nil {
			err = json.Unmarshal(raw, &out)
		}
		if err != nil {
			add("FAIL", "rbac", "%v", l.apiError(c, "access review", err))
			return
		}
		if !out.Status.Allowed {
			denied = append(denied, n.verb+" "+strings.TrimPrefix(n.group+"/"+n.resource, "/"))
		}
	}
	if len(denied) > 0 {
		add("FAIL", "rbac", "denied in namespace %s: %s (`bridge kubernetes manifests` has the Role the backend needs)", c.namespace, strings.Join(denied, ", "))
		return
	}
	add("OK", "rbac", "pods, pods/attach and leases allowed in namespace %s", c.namespace)
}

// doctorImage runs the image in a throwaway pod with the sandbox's spec,
// which checks the pull, Pod Security admission, the seccomp profile and
// the Python version at once.
func (l *Launcher) doctorImage(ctx context.Context, c *clients, add func(status, name, format string, a ...any)) {
	ctx, cancel := context.WithTimeout(ctx, doctorPodBound)
	defer cancel()
	name := "bridge-doctor-" + randHex(4)
	pod, err := PodSpec(l.cfg, name, l.cfg.SeccompProfile)
	if err != nil {
		add("FAIL", "image", "%v", err)
		return
	}
	ctr := &pod.Spec.Containers[0]
	ctr.Command = []string{"python3", "-c", doctorPodCheck}
	ctr.Stdin, ctr.StdinOnce = false, false
	pod.Labels[LabelSandbox] = "doctor"
	if err := c.core.Post().Namespace(c.namespace).Resource("pods").Body(pod).Do(ctx).Error(); err != nil {
		add("FAIL", "image", "%v", l.apiError(c, "create pod", err))
		return
	}
	defer l.deletePod(c, name)
	for {
		var p corev1.Pod
		err := c.core.Get().Namespace(c.namespace).Resource("pods").Name(name).Do(ctx).Into(&p)
		if err == nil {
			if t := terminated(&p); t != nil {
				switch {
				case t.ExitCode == 0 || t.ExitCode == 4:
					add("OK", "image", "%s runs in a sandbox pod (Python 3.11+)", l.cfg.Image)
					l.doctorSeccomp(add)
					l.doctorSockets(add, t.ExitCode == 0)
				case t.ExitCode == 3:
					add("FAIL", "image", "%s has Python older than 3.11 (rebuild it: bridge image build)", l.cfg.Image)
				default:
					add("FAIL", "image", "%s exited with code %d in a sandbox pod: %s %s", l.cfg.Image, t.ExitCode, t.Reason, oneLine(t.Message))
				}
				return
			}
			if _, err := podStarted(&p, l.cfg.Image); err != nil {
				if l.cfg.SeccompProfile != "" && strings.Contains(strings.ToLower(err.Error()), "seccomp") {
					add("FAIL", "seccomp", "the Localhost profile %s is not installed on node %s: save `bridge kubernetes seccomp` there under the kubelet's seccomp directory, or unset MCP_BRIDGE_K8S_SECCOMP_PROFILE (%v)", l.cfg.SeccompProfile, p.Spec.NodeName, err)
					return
				}
				add("FAIL", "image", "%v", err)
				return
			}
		}
		select {
		case <-ctx.Done():
			add("FAIL", "image", "%v", notStarted(&p, doctorPodBound))
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// doctorPodCheck is the doctor pod's Python: exit 3 for a Python older
// than 3.11, 4 when it may open an AF_INET or AF_INET6 socket, else 0.
const doctorPodCheck = `import socket, sys
if sys.version_info < (3, 11):
    sys.exit(3)
for family in (socket.AF_INET, socket.AF_INET6):
    try:
        socket.socket(family, socket.SOCK_STREAM).close()
    except OSError:
        continue
    sys.exit(4)
`

// doctorSockets reports whether the doctor pod could open network sockets.
func (l *Launcher) doctorSockets(add func(status, name, format string, a ...any), refused bool) {
	switch {
	case refused:
		add("OK", "network", "a sandbox pod cannot open an AF_INET or AF_INET6 socket (seccomp), whatever the CNI")
	case l.cfg.SeccompProfile != "":
		add("FAIL", "network", "a sandbox pod opened an AF_INET socket under the Localhost profile %s, which is out of date: save `bridge kubernetes seccomp` there again", l.cfg.SeccompProfile)
	default:
		add("WARN", "network", "a sandbox pod can open AF_INET sockets (RuntimeDefault): only a NetworkPolicy that the CNI enforces keeps it off the network; install `bridge kubernetes seccomp` and set MCP_BRIDGE_K8S_SECCOMP_PROFILE")
	}
}

// doctorSeccomp reports the seccomp profile the pods run with.
func (l *Launcher) doctorSeccomp(add func(status, name, format string, a ...any)) {
	if l.cfg.SeccompProfile == "" {
		add("WARN", "seccomp", "sandbox pods use RuntimeDefault; install `bridge kubernetes seccomp` on each node under the kubelet's seccomp directory and set MCP_BRIDGE_K8S_SECCOMP_PROFILE for the bridge's stricter profile")
		return
	}
	add("OK", "seccomp", "the Localhost profile %s is installed on the node (a pod ran with it)", l.cfg.SeccompProfile)
}

// doctorNetworkPolicy checks that a NetworkPolicy in the namespace selects
// the sandbox pods and denies both directions.
func (l *Launcher) doctorNetworkPolicy(ctx context.Context, c *clients, add func(status, name, format string, a ...any)) {
	raw, err := rawBody(c.core.Get().AbsPath("/apis/networking.k8s.io/v1/namespaces", c.namespace, "networkpolicies").Do(ctx))
	var list struct {
		Items []struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
			Spec struct {
				PodSelector struct {
					MatchLabels map[string]string `json:"matchLabels"`
				} `json:"podSelector"`
				PolicyTypes []string `json:"policyTypes"`
				Ingress     []any    `json:"ingress"`
				Egress      []any    `json:"egress"`
			} `json:"spec"`
		} `json:"items"`
	}
	if err == nil {
		err = json.Unmarshal(raw, &list)
	}
	if err != nil {
		add("WARN", "network policy", "%v", l.apiError(c, "list networkpolicies", err))
		return
	}
	for _, p := range list.Items {
		sel := p.Spec.PodSelector.MatchLabels
		selects := len(sel) == 0 || (len(sel) == 1 && sel[LabelSandbox] == "true")
		types := strings.Join(p.Spec.PolicyTypes, ",")
		if selects && strings.Contains(types, "Ingress") && strings.Contains(types, "Egress") && len(p.Spec.Ingress) == 0 && len(p.Spec.Egress) == 0 {
			add("WARN", "network policy", "%s denies all traffic of the sandbox pods; only a CNI plugin that enforces NetworkPolicy makes that hold", p.Metadata.Name)
			return
		}
	}
	add("WARN", "network policy", "no NetworkPolicy in namespace %s denies all traffic of the sandbox pods: apply the one in `bridge kubernetes manifests` (and use a CNI plugin that enforces it)", c.namespace)
}
