package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/bridge-mcp/bridge/entrypoint"
)

// Labels every sandbox pod carries. LabelSandbox selects them in the
// shipped NetworkPolicy; LabelOwner names the bridge that owns them (its
// Lease is leaseName of the same value), so a live bridge can sweep the pods
// of a dead one.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedBy      = "bridge"
	LabelSandbox   = "bridge-mcp.dev/sandbox"
	LabelOwner     = "bridge-mcp.dev/owner"
	// AnnotationOwner is the owner label itself (host/pid/start...), for
	// people and tests: LabelOwner is only its hash.
	AnnotationOwner = "bridge-mcp.dev/owner"
	containerName   = "sandbox"
)

// Sizes of the memory-backed emptyDirs, as the container backend's tmpfs.
var (
	tmpSize       = resource.MustParse("64Mi")
	workspaceSize = resource.MustParse("128Mi")
)

// sigtermPrefix runs before the bootstrap in the pod's PID 1: a PID 1 with
// no handler ignores SIGTERM, and every delete would wait out the grace
// period. The container backend gets this from --init.
const sigtermPrefix = "import os,signal;signal.signal(signal.SIGTERM,lambda*_:os._exit(143))\n"

// OwnerID is the label value of an owner label (engine/owner): a hash,
// because owner labels hold '/' and '=', which label values cannot.
func OwnerID(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(sum[:8])
}

// seccomp is a pod's seccomp profile: the bridge's own as a Localhost
// profile when one is configured, else the runtime's default.
func seccomp(localhost string) *corev1.SeccompProfile {
	if localhost != "" {
		return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeLocalhost, LocalhostProfile: ptr.To(localhost)}
	}
	return &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}
}

// PodSpec is the sandbox pod named name, at the restricted Pod Security
// level: a pure function of cfg, so a golden test pins every field.
// seccompLocalhost is the Localhost profile, "" for RuntimeDefault.
func PodSpec(cfg Config, name, seccompLocalhost string) (*corev1.Pod, error) {
	uid, gid, err := cfg.ids()
	if err != nil {
		return nil, err
	}
	cpus := cfg.CPUs
	if cpus == "" {
		cpus = defaultCPUs
	}
	cpu, err := resource.ParseQuantity(cpus)
	if err != nil {
		return nil, fmt.Errorf("kubernetes: MCP_BRIDGE_CPUS=%q: %w", cfg.CPUs, err)
	}
	mem := *resource.NewQuantity(cfg.MemoryBytes, resource.BinarySI)
	limits := corev1.ResourceList{corev1.ResourceMemory: mem, corev1.ResourceCPU: cpu}
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{LabelManagedBy: ManagedBy, LabelSandbox: "true", LabelOwner: OwnerID(cfg.Owner)},
			Annotations: map[string]string{AnnotationOwner: cfg.Owner},
		},
		Spec: corev1.PodSpec{
			NodeName:                     cfg.NodeName,
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: ptr.To(false),
			EnableServiceLinks:           ptr.To(false),
			// The pod's PID 1 ends on SIGTERM at once (sigtermPrefix).
			TerminationGracePeriodSeconds: ptr.To(int64(2)),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsUser: ptr.To(uid), RunAsGroup: ptr.To(gid), RunAsNonRoot: ptr.To(true),
				SupplementalGroups: []int64{}, SeccompProfile: seccomp(seccompLocalhost),
			},
			Containers: []corev1.Container{{
				Name:            containerName,
				Image:           cfg.Image,
				ImagePullPolicy: corev1.PullPolicy(cfg.PullPolicy),
				Command:         []string{"python3", "-u", "-c", sigtermPrefix + entrypoint.Bootstrap},
				WorkingDir:      "/workspace",
				Env: []corev1.EnvVar{
					{Name: "HOME", Value: "/workspace"}, {Name: "PYTHONUNBUFFERED", Value: "1"},
					{Name: "PYTHONDONTWRITEBYTECODE", Value: "1"}, {Name: "PYTHONIOENCODING", Value: "utf-8"},
				},
				// stdinOnce: the container's stdin closes when the bridge's
				// attach ends, however it ends, so an orphaned sandbox stops
				// at once (the supervisor takes EOF as a shutdown).
				Stdin: true, StdinOnce: true, TTY: false,
				Resources: corev1.ResourceRequirements{Limits: limits, Requests: corev1.ResourceList{
					corev1.ResourceMemory: mem, corev1.ResourceCPU: resource.MustParse("100m")}},
				SecurityContext: &corev1.SecurityContext{
					Privileged: ptr.To(false), AllowPrivilegeEscalation: ptr.To(false),
					ReadOnlyRootFilesystem: ptr.To(true), RunAsNonRoot: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				VolumeMounts:             []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}, {Name: "workspace", MountPath: "/workspace"}},
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			}},
			Volumes: []corev1.Volume{
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &tmpSize}}},
				{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory, SizeLimit: &workspaceSize}}},
			},
		},
	}
	if cfg.RuntimeClass != "" {
		pod.Spec.RuntimeClassName = ptr.To(cfg.RuntimeClass)
	}
	return pod, nil
}
