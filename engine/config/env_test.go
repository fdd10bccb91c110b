package config

import (
	"slices"
	"testing"
)

// TestChildEnv checks ENV-1: the child gets only the pass-through variables
// that are set, plus the entry's env, which wins; secrets stay behind.
func TestChildEnv(t *testing.T) {
	bridge := map[string]string{
		"PATH":                  "/usr/bin:/bin",
		"HOME":                  "/home/u",
		"LANG":                  "C.UTF-8",
		"TMPDIR":                "/tmp",
		"TERM":                  "", // set but empty counts as unset
		"AWS_SECRET_ACCESS_KEY": "hunter2",
		"GITHUB_TOKEN":          "ghp_secret",
		"MCP_BRIDGE_IMAGE":      "x",
	}
	getenv := func(k string) string { return bridge[k] }
	cases := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"no entry env", nil, []string{"HOME=/home/u", "LANG=C.UTF-8", "PATH=/usr/bin:/bin", "TMPDIR=/tmp"}},
		{"entry env wins", map[string]string{"PATH": "/opt/bin", "API_KEY": "k", "A_B": "1", "A": "0"},
			[]string{"A=0", "API_KEY=k", "A_B=1", "HOME=/home/u", "LANG=C.UTF-8", "PATH=/opt/bin", "TMPDIR=/tmp"}},
		{"entry passes a secret on purpose", map[string]string{"GITHUB_TOKEN": "scoped"},
			[]string{"GITHUB_TOKEN=scoped", "HOME=/home/u", "LANG=C.UTF-8", "PATH=/usr/bin:/bin", "TMPDIR=/tmp"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ChildEnv(Entry{Name: "x", Type: TypeStdio, Command: "x", Env: c.env}, getenv)
			if !slices.Equal(got, c.want) {
				t.Errorf("ChildEnv = %q, want %q", got, c.want)
			}
			for _, kv := range got {
				if kv == "AWS_SECRET_ACCESS_KEY=hunter2" || kv == "MCP_BRIDGE_IMAGE=x" {
					t.Errorf("bridge variable leaked: %s", kv)
				}
			}
		})
	}
}
