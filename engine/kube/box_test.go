package kube

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/rs/zerolog"
)

// TestSettle checks how a pod's end maps to the session's exit code and
// note once its attach ended without a hang-up: deleted, evicted,
// OOMKilled, its own exit code, and an attach that dropped while the pod
// still ran (state lost: 137, and the pod is deleted).
func TestSettle(t *testing.T) {
	terminatedWith := func(code int32, reason string) *corev1.Pod {
		p := &corev1.Pod{}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}}}}
		return p
	}
	evicted := &corev1.Pod{}
	evicted.Status.Phase, evicted.Status.Reason, evicted.Status.Message = corev1.PodFailed, "Evicted", "The node was low on memory.\nMore."
	deleting := &corev1.Pod{}
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	running := &corev1.Pod{}
	running.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: containerName,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}

	for _, tt := range []struct {
		name    string
		pod     *corev1.Pod // nil: 404
		code    int
		reason  string // substring; "" for none
		deleted bool
	}{
		{"gone", nil, 137, "the sandbox pod bridge-x was deleted", false},
		{"deleting", deleting, 137, "the sandbox pod bridge-x was deleted", false},
		{"evicted", evicted, 137, "the sandbox pod bridge-x was evicted: The node was low on memory.", false},
		{"oom killed", terminatedWith(137, "OOMKilled"), exitOOMKilled, "OOMKilled (memory limit)", false},
		{"exited", terminatedWith(3, "Error"), 3, "", false},
		{"attach dropped", running, 137, "the attach to sandbox pod bridge-x dropped (stream reset)", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var deletes atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/api/v1/namespaces/sbx/pods/bridge-x" {
					http.Error(w, "unexpected path "+r.URL.Path, http.StatusBadRequest)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				if r.Method == http.MethodDelete {
					deletes.Add(1)
					_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Success"}`))
					return
				}
				if tt.pod == nil {
					w.WriteHeader(http.StatusNotFound)
					_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`))
					return
				}
				p := tt.pod.DeepCopy()
				p.Kind, p.APIVersion, p.Name = "Pod", "v1", "bridge-x"
				_ = json.NewEncoder(w).Encode(p)
			}))
			defer srv.Close()
			c, err := clientsFor(&rest.Config{Host: srv.URL}, "sbx")
			if err != nil {
				t.Fatal(err)
			}
			// Not New: it routes klog once per process, which TestRouteKlog checks.
			b := &box{l: &Launcher{log: zerolog.Nop()}, name: "bridge-x", killed: make(chan struct{})}
			b.settle(c, errors.New("stream reset"), false)
			if b.exitCode != tt.code || !strings.Contains(b.reason, tt.reason) || (tt.reason == "" && b.reason != "") || strings.Contains(b.reason, "\n") {
				t.Errorf("exit %d, reason %q; want %d and one line with %q", b.exitCode, b.reason, tt.code, tt.reason)
			}
			if got := deletes.Load() > 0; got != tt.deleted {
				t.Errorf("pod deleted: %v, want %v", got, tt.deleted)
			}
		})
	}
	// A hang-up (the supervisor's own shutdown) is exit 0, with no question.
	b := &box{killed: make(chan struct{})}
	b.settle(nil, nil, true)
	if b.exitCode != 0 || b.reason != "" {
		t.Errorf("after a hang-up: exit %d, reason %q", b.exitCode, b.reason)
	}
}
