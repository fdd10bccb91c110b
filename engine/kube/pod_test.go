package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func testConfig() Config {
	return Config{Image: "localhost/bridge-python:latest", PullPolicy: "IfNotPresent", User: "65534:65534",
		MemoryBytes: 512 << 20, Owner: "host/1/2", NodeName: "node-1"}
}

// TestPodSpec pins the restricted Pod Security fields and the limits of a
// sandbox pod.
func TestPodSpec(t *testing.T) {
	pod, err := PodSpec(testConfig(), "bridge-x", "")
	if err != nil {
		t.Fatal(err)
	}
	s := pod.Spec
	c := s.Containers[0]
	sc := c.SecurityContext
	tmp, ws := s.Volumes[0].EmptyDir, s.Volumes[1].EmptyDir
	for _, tt := range []struct {
		name      string
		got, want any
	}{
		{"runAsUser", *s.SecurityContext.RunAsUser, int64(65534)},
		{"runAsGroup", *s.SecurityContext.RunAsGroup, int64(65534)},
		{"runAsNonRoot", *s.SecurityContext.RunAsNonRoot, true},
		{"seccomp", s.SecurityContext.SeccompProfile.Type, corev1.SeccompProfileTypeRuntimeDefault},
		{"automountServiceAccountToken", *s.AutomountServiceAccountToken, false},
		{"enableServiceLinks", *s.EnableServiceLinks, false},
		{"nodeName", s.NodeName, "node-1"},
		{"restartPolicy", s.RestartPolicy, corev1.RestartPolicyNever},
		{"readOnlyRootFilesystem", *sc.ReadOnlyRootFilesystem, true},
		{"allowPrivilegeEscalation", *sc.AllowPrivilegeEscalation, false},
		{"privileged", *sc.Privileged, false},
		{"capabilities.drop", len(sc.Capabilities.Drop) == 1 && sc.Capabilities.Drop[0] == "ALL" && sc.Capabilities.Add == nil, true},
		{"stdin", c.Stdin && c.StdinOnce && !c.TTY, true},
		{"memory limit", c.Resources.Limits.Memory().Value(), int64(512 << 20)},
		{"cpu limit", c.Resources.Limits.Cpu().String(), "1"},
		{"pull policy", c.ImagePullPolicy, corev1.PullIfNotPresent},
		{"/tmp", tmp.Medium == corev1.StorageMediumMemory && tmp.SizeLimit.String() == "64Mi", true},
		{"/workspace", ws.Medium == corev1.StorageMediumMemory && ws.SizeLimit.String() == "128Mi", true},
		{"PID 1 handles SIGTERM", strings.HasPrefix(c.Command[3], sigtermPrefix), true},
		{"owner label", pod.Labels[LabelOwner], OwnerID("host/1/2")},
		{"runtimeClass", s.RuntimeClassName == nil, true},
	} {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
	cfg := testConfig()
	cfg.RuntimeClass, cfg.CPUs = "gvisor", "0.5"
	pod, err = PodSpec(cfg, "bridge-x", "bridge/sandbox.json")
	if err != nil {
		t.Fatal(err)
	}
	if got := *pod.Spec.RuntimeClassName; got != "gvisor" {
		t.Errorf("runtimeClassName = %q, want gvisor", got)
	}
	if p := pod.Spec.SecurityContext.SeccompProfile; p.Type != corev1.SeccompProfileTypeLocalhost || *p.LocalhostProfile != "bridge/sandbox.json" {
		t.Errorf("seccomp = %+v, want Localhost bridge/sandbox.json", p)
	}
	if got := pod.Spec.Containers[0].Resources.Limits.Cpu().String(); got != "500m" {
		t.Errorf("cpu limit = %s, want 500m", got)
	}
}

// TestPodSpecUser checks that a user the pod cannot run as is refused in
// one line.
func TestPodSpecUser(t *testing.T) {
	for _, user := range []string{"nobody", "0", "0:0", "1000:x"} {
		cfg := testConfig()
		cfg.User = user
		if _, err := PodSpec(cfg, "x", ""); err == nil || !strings.Contains(err.Error(), "MCP_BRIDGE_CONTAINER_USER") {
			t.Errorf("user %q: got %v, want an error naming MCP_BRIDGE_CONTAINER_USER", user, err)
		}
	}
	cfg := testConfig()
	cfg.User = "1000"
	pod, err := PodSpec(cfg, "x", "")
	if err != nil || *pod.Spec.SecurityContext.RunAsGroup != 1000 {
		t.Errorf("user 1000: %v", err)
	}
}
