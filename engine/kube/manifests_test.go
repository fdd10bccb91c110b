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
		publicURL  string
		want       []string
	}{
		{"default", nil, "", []string{"serve", "--listen", "0.0.0.0:8080", "--metrics-principal", "prometheus"}},
		{"given", []string{"ops", "grafana.agent"}, "",
			[]string{"serve", "--listen", "0.0.0.0:8080", "--metrics-principal", "ops", "--metrics-principal", "grafana.agent"}},
		{"public url", nil, "https://bridge.example.com",
			[]string{"serve", "--listen", "0.0.0.0:8080", "--metrics-principal", "prometheus", "--public-url", "https://bridge.example.com"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := Manifests(Deployment{Namespace: "ns", Image: "bridge:1", SandboxImage: "sandbox:1", MetricsPrincipals: c.principals, PublicURL: c.publicURL})
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

// TestManifestsConfigData: each file lands in the ConfigMap with exactly
// its content, as a block scalar a user can edit or, when one cannot hold
// it, a quoted string.
func TestManifestsConfigData(t *testing.T) {
	files := map[string][]byte{
		"servers.json":  []byte("{\"mcpServers\": {\n  \"a\": {\"command\": \"npx\"}\n}}\n"),
		"bridge.policy": []byte("{\"servers\": {}}"), // no final newline
		"tabbed":        []byte(" leading space\n\ttab\r\n"),
		"blank.lines":   []byte("a\n\nb\n"),
	}
	out := Manifests(Deployment{Namespace: "ns", Image: "b", SandboxImage: "s", Files: files})
	for _, doc := range strings.Split(out, "\n---\n") {
		var obj struct {
			Kind string            `json:"kind"`
			Data map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%v:\n%s", err, doc)
		}
		if obj.Kind != "ConfigMap" {
			continue
		}
		for name, want := range files {
			if got := obj.Data[name]; got != string(want) {
				t.Errorf("%s = %q, want %q", name, got, want)
			}
		}
		if !strings.Contains(doc, "  servers.json: |\n") {
			t.Errorf("servers.json is not a block scalar:\n%s", doc)
		}
		return
	}
	t.Fatal("no ConfigMap")
}

// TestDeploymentValidate: one line naming the field for each bad value.
func TestDeploymentValidate(t *testing.T) {
	ok := Deployment{Namespace: "bridge", Image: "b", SandboxImage: "s"}
	for _, c := range []struct {
		name string
		edit func(*Deployment)
		want string // "" when valid
	}{
		{"defaults", func(*Deployment) {}, ""},
		{"all set", func(d *Deployment) {
			d.StorageClass, d.StorageSize, d.Replicas, d.SeccompProfile = "local-path", "20Gi", 1, "bridge/sandbox.json"
		}, ""},
		{"two replicas", func(d *Deployment) { d.Replicas, d.VolumeAccess = 2, ReadWriteMany }, ""},
		{"four replicas", func(d *Deployment) { d.Replicas = 4 }, "replicas: 4"},
		{"bad access", func(d *Deployment) { d.VolumeAccess = "RWX" }, "volume access"},
		{"bad size", func(d *Deployment) { d.StorageSize = "ten" }, "storage size"},
		{"zero size", func(d *Deployment) { d.StorageSize = "0" }, "storage size"},
		{"bad class", func(d *Deployment) { d.StorageClass = "Fast SSD" }, "storage class"},
		{"bad namespace", func(d *Deployment) { d.Namespace = "Bridge_1" }, "namespace"},
		{"profile escapes", func(d *Deployment) { d.SeccompProfile = "../etc/x.json" }, "seccomp profile"},
		{"bad key", func(d *Deployment) { d.Files = map[string][]byte{"a b": nil} }, "config file"},
		{"public url", func(d *Deployment) { d.PublicURL = "https://bridge.example.com/team" }, ""},
		{"plain public url", func(d *Deployment) { d.PublicURL = "http://bridge.example.com" }, "public url"},
		{"quoted public url", func(d *Deployment) { d.PublicURL = `https://b.example.com/"x` }, "public url"},
		{"too big", func(d *Deployment) { d.Files = map[string][]byte{"a": make([]byte, 1<<20+1)} }, "1 MiB"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := ok
			c.edit(&d)
			err := d.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("Validate = %v, want an error with %q", err, c.want)
			}
		})
	}
}
