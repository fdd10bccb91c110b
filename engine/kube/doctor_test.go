package kube

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"k8s.io/client-go/rest"
)

// TestDoctorNetworkPolicy checks what doctor says of the namespace's
// NetworkPolicies: a deny-all one that selects the sandbox pods (by their
// label, or every pod) is named; one that selects other pods, allows some
// traffic or governs one direction only is not enough; a refused list is a
// WARN that names the permission.
func TestDoctorNetworkPolicy(t *testing.T) {
	const denyAll = `"policyTypes":["Ingress","Egress"]`
	for _, tt := range []struct {
		name   string
		status int
		body   string
		want   string // substring of the one line doctor adds
	}{
		{"deny all, sandbox label", 200, `{"items":[{"metadata":{"name":"sbx-deny"},"spec":{"podSelector":{"matchLabels":{"` + LabelSandbox + `":"true"}},` + denyAll + `}}]}`,
			"sbx-deny denies all traffic of the sandbox pods"},
		{"deny all, every pod", 200, `{"items":[{"metadata":{"name":"all-deny"},"spec":{"podSelector":{},` + denyAll + `}}]}`,
			"all-deny denies all traffic of the sandbox pods"},
		{"other pods", 200, `{"items":[{"metadata":{"name":"web"},"spec":{"podSelector":{"matchLabels":{"app":"web"}},` + denyAll + `}}]}`,
			"no NetworkPolicy in namespace sbx denies all traffic"},
		{"allows egress", 200, `{"items":[{"metadata":{"name":"dns"},"spec":{"podSelector":{},` + denyAll + `,"egress":[{"ports":[{"port":53}]}]}}]}`,
			"no NetworkPolicy in namespace sbx denies all traffic"},
		{"ingress only", 200, `{"items":[{"metadata":{"name":"in"},"spec":{"podSelector":{},"policyTypes":["Ingress"]}}]}`,
			"no NetworkPolicy in namespace sbx denies all traffic"},
		{"none", 200, `{"items":[]}`, "no NetworkPolicy in namespace sbx denies all traffic"},
		{"forbidden", 403, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"networkpolicies.networking.k8s.io is forbidden: User \"u\" cannot list resource \"networkpolicies\" in API group \"networking.k8s.io\" in the namespace \"sbx\""}`,
			`list networkpolicies forbidden in namespace sbx: networkpolicies.networking.k8s.io is forbidden: User "u" cannot list`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/apis/networking.k8s.io/v1/namespaces/sbx/networkpolicies" {
					http.Error(w, "unexpected path "+r.URL.Path, http.StatusBadRequest)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				_, _ = w.Write([]byte(tt.body))
			}))
			defer srv.Close()
			c, err := clientsFor(&rest.Config{Host: srv.URL}, "sbx")
			if err != nil {
				t.Fatal(err)
			}
			l := &Launcher{log: zerolog.Nop()}
			var lines []string
			l.doctorNetworkPolicy(context.Background(), c, func(status, name, format string, a ...any) {
				lines = append(lines, status+" "+name+": "+fmt.Sprintf(format, a...))
			})
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "WARN network policy: ") || !strings.Contains(lines[0], tt.want) {
				t.Errorf("doctor said %q, want one WARN line with %q", lines, tt.want)
			}
		})
	}
}
