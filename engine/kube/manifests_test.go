package kube

import (
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestManifestsMetricsPrincipal: the Deployment passes bridge serve a
// --metrics-principal for each principal asked for, "prometheus" when none
// is, so a team member's token does not read /metrics.
func TestManifestsMetricsPrincipal(t *testing.T) {
	for _, c := range []struct {
		name       string
		principals []string
		want       []string
	}{
		{"default", nil, []string{"serve", "--listen", "0.0.0.0:8080", "--metrics-principal", "prometheus"}},
		{"given", []string{"ops", "grafana.agent"},
			[]string{"serve", "--listen", "0.0.0.0:8080", "--metrics-principal", "ops", "--metrics-principal", "grafana.agent"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := Manifests("ns", "bridge:1", "sandbox:1", c.principals...)
			if strings.Contains(out, "${") {
				t.Errorf("a placeholder is left:\n%s", out)
			}
			got := deploymentArgs(t, out)
			if !slices.Equal(got, c.want) {
				t.Errorf("args = %q, want %q", got, c.want)
			}
		})
	}
}

// deploymentArgs are the args of the Deployment's first container.
func deploymentArgs(t *testing.T, manifests string) []string {
	t.Helper()
	for _, doc := range strings.Split(manifests, "\n---\n") {
		var obj struct {
			Kind string `json:"kind"`
			Spec struct {
				Template struct {
					Spec struct {
						Containers []struct {
							Args []string `json:"args"`
						} `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%v:\n%s", err, doc)
		}
		if obj.Kind == "Deployment" {
			return obj.Spec.Template.Spec.Containers[0].Args
		}
	}
	t.Fatal("no Deployment")
	return nil
}
