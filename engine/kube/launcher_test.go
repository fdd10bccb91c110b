package kube

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/rs/zerolog"
)

func waiting(reason, msg string) *corev1.Pod {
	p := &corev1.Pod{}
	p.Name, p.Spec.NodeName = "bridge-x", "node-1"
	p.Status.Phase = corev1.PodPending
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}}
	return p
}

// TestPodStarted checks the one-line reasons a pod never runs, and that a
// pod still pulling or being scheduled is waited for.
func TestPodStarted(t *testing.T) {
	running := waiting("", "")
	running.Status.ContainerStatuses[0].State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	failed := &corev1.Pod{}
	failed.Name = "bridge-x"
	failed.Status.Phase, failed.Status.Reason, failed.Status.Message = corev1.PodFailed, "Evicted", "The node was low on memory."
	for _, tt := range []struct {
		name    string
		pod     *corev1.Pod
		started bool
		err     string // substring; "" for none
	}{
		{"running", running, true, ""},
		{"creating", waiting("ContainerCreating", ""), false, ""},
		{"pending", &corev1.Pod{}, false, ""},
		{"never pull", waiting("ErrImageNeverPull", "not present"), false, "Sandbox image 'img' is not available on node node-1 (ErrImageNeverPull: not present)"},
		{"pull backoff", waiting("ImagePullBackOff", "back-off"), false, "check MCP_BRIDGE_IMAGE and MCP_BRIDGE_K8S_PULL_POLICY"},
		{"create error", waiting("CreateContainerError", "cannot load seccomp profile"), false, "cannot start its container (CreateContainerError: cannot load seccomp profile)"},
		{"evicted", failed, false, "Sandbox pod bridge-x failed: Evicted The node was low on memory."},
	} {
		started, err := podStarted(tt.pod, "img")
		if started != tt.started || (err == nil) != (tt.err == "") || (err != nil && (!strings.Contains(err.Error(), tt.err) || strings.Contains(err.Error(), "\n"))) {
			t.Errorf("%s: got %v, %v; want %v, an error with %q", tt.name, started, err, tt.started, tt.err)
		}
	}
}

// TestAPIError checks that a request the Role does not allow names the
// namespace and the permissions, one an admission plugin refused says why
// without blaming the Role, and an unreachable server its address.
func TestAPIError(t *testing.T) {
	l := New(Config{Owner: "o"}, 0, zerolog.Nop())
	c := &clients{cfg: &rest.Config{Host: "https://api:6443"}, namespace: "sbx"}
	pods := schema.GroupResource{Resource: "pods"}
	rbac := apierrors.NewForbidden(pods, "", errors.New(`User "system:serviceaccount:sbx:nobody" cannot create resource "pods" in API group "" in the namespace "sbx"`))
	admission := apierrors.NewForbidden(pods, "bridge-1", errors.New(`error looking up service account sbx/default: serviceaccount "default" not found`))
	const role = "`bridge kubernetes manifests` has the Role"
	for _, tt := range []struct {
		err           error
		want, notWant string
	}{
		{rbac, "kubernetes: create pod forbidden in namespace sbx: ", ""},
		{rbac, role, ""},
		{admission, `kubernetes: create pod refused in namespace sbx: pods "bridge-1" is forbidden: error looking up service account`, role},
		{apierrors.NewUnauthorized("x"), "refused the credentials", ""},
		{errors.New(`Post "https://api:6443/api/v1": dial tcp 127.0.0.1:6443: connect: connection refused`), "kubernetes: the API server at https://api:6443 is unreachable", ""},
	} {
		got := l.apiError(c, "create pod", tt.err).Error()
		if !strings.Contains(got, tt.want) || strings.Contains(got, "\n") || (tt.notWant != "" && strings.Contains(got, tt.notWant)) {
			t.Errorf("apiError(%v) = %q, want one line with %q, without %q", tt.err, got, tt.want, tt.notWant)
		}
	}
}
