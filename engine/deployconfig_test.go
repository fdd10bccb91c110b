package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDeployFiles: good files become the ConfigMap's, with their names in
// the pod; a file the bridge in the pod would not load is an error naming
// the flag and the problem.
func TestDeployFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	servers := write("team.json", `{"mcpServers": {"github": {"command": "npx-not-on-this-host", "args": ["-y", "x"]}}}`)
	policy := write("p.policy", `{"servers": {"github": {"allow": ["*"]}}}`)
	own := write("own.json", `{"mcpServers": {"gh": {"url": "https://gh.example.com/mcp", "identity": "principal"}}}`)
	for _, c := range []struct {
		name            string
		servers, policy string
		publicURL       string
		want            string // error text; "" for none
		keys            []string
	}{
		{"none", "", "", "", "", nil},
		{"both", servers, policy, "", "", []string{ServersFile, PolicyFile}},
		{"servers only", servers, "", "", "", []string{ServersFile}},
		{"missing", filepath.Join(dir, "nope.json"), "", "", "--servers: ", nil},
		{"not json", write("bad.json", `{"mcpServers": `), "", "", "--servers: ", nil},
		{"bad entry", write("entry.json", `{"mcpServers": {"x": {"args": ["a"]}}}`), "", "", `server "x"`, nil},
		{"bad policy", "", write("bad.policy", `{"nonsense": 1}`), "", "--policy: ", nil},
		{"own identity without a public url", own, "", "", `--servers: gh set "identity": "principal": give --public-url https://`, nil},
		{"own identity", own, "", "https://bridge.example.com", "", []string{ServersFile}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := DeployFiles(c.servers, c.policy, c.publicURL)
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("DeployFiles = %v, want an error with %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("DeployFiles = %v", err)
			}
			if len(got) != len(c.keys) {
				t.Fatalf("got %d files, want %v", len(got), c.keys)
			}
			for _, k := range c.keys {
				if _, ok := got[k]; !ok {
					t.Errorf("no %s in %v", k, got)
				}
			}
		})
	}
}
