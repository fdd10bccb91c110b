package tests

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestPerCallReloadAgentFiles checks RLD-1 for the agent config files the
// bridge remembers as missing (it skips their stat while their nearest
// existing directory is unchanged): a file created in a home directory
// older than a few seconds, and one created in a new subdirectory of it,
// are each seen by the very next call, with no --watch.
func TestPerCallReloadAgentFiles(t *testing.T) {
	requirePodman(t)
	home := t.TempDir()
	b := startBridge(t, map[string]string{"HOME": home, "MCP_BRIDGE_CONFIG_DIR": filepath.Join(home, "MCPs")})
	const list = "import json, os\nprint(sorted(json.loads(os.environ['MCP_DISCOVERED_SERVERS'])))"
	steps := []struct {
		name   string
		change func()
		want   string
	}{
		{"start", func() {}, "[]"},
		{"home aged", func() { // what the bridge created in it at start is old now
			old := time.Now().Add(-time.Hour)
			if err := os.Chtimes(home, old, old); err != nil {
				t.Fatal(err)
			}
		}, "[]"},
		{"unchanged", func() {}, "[]"},
		{"~/.claude.json created", func() {
			writeJSON(t, filepath.Join(home, ".claude.json"), map[string]any{"mcpServers": map[string]any{"one": fake()}})
		}, "['one']"},
		{"~/.cursor/mcp.json created with its dir", func() {
			if err := os.Mkdir(filepath.Join(home, ".cursor"), 0o755); err != nil {
				t.Fatal(err)
			}
			writeJSON(t, filepath.Join(home, ".cursor", "mcp.json"), map[string]any{"mcpServers": map[string]any{"two": fake()}})
		}, "['one', 'two']"},
	}
	for _, st := range steps {
		st.change()
		if got := b.mustOK(list); got != st.want {
			t.Errorf("%s: servers %s, want %s", st.name, got, st.want)
		}
	}
}
