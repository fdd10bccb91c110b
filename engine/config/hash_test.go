package config

import (
	"testing"
)

// loadOne loads the single entry of a config file body.
func loadOne(t *testing.T, body string) Entry {
	t.Helper()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.json": body})
	s := Load(Options{Dir: dir, LookPath: noLookPath})
	if len(s.Entries) != 1 {
		t.Fatalf("Load(%s): Entries = %q, Problems = %q; want one entry", body, names(s), s.Problems)
	}
	return s.Entries[0]
}

// TestHash checks CFG-4: the config hash depends on the normalized fields
// only, not on map order, name, description or file.
func TestHash(t *testing.T) {
	base := loadOne(t, `{"mcpServers":{"a":{"command":"srv","args":["-v","x"],"env":{"A":"1","B":"2"},"cwd":"/tmp"}}}`)
	if len(base.Hash) != 64 {
		t.Fatalf("Hash = %q, want 64 hex digits", base.Hash)
	}
	cases := []struct {
		name, body string
		same       bool
	}{
		{"env order", `{"mcpServers":{"a":{"env":{"B":"2","A":"1"},"cwd":"/tmp","args":["-v","x"],"command":"srv"}}}`, true},
		{"name and description", `{"description":"d","mcpServers":{"other":{"command":"srv","args":["-v","x"],"env":{"A":"1","B":"2"},"cwd":"/tmp","description":"e"}}}`, true},
		{"explicit stdio type", `{"mcpServers":{"a":{"type":"stdio","command":"srv","args":["-v","x"],"env":{"A":"1","B":"2"},"cwd":"/tmp"}}}`, true},
		{"ignored url", `{"mcpServers":{"a":{"type":"stdio","url":"https://x","command":"srv","args":["-v","x"],"env":{"A":"1","B":"2"},"cwd":"/tmp"}}}`, true},
		{"changed arg", `{"mcpServers":{"a":{"command":"srv","args":["-v","y"],"env":{"A":"1","B":"2"},"cwd":"/tmp"}}}`, false},
		{"arg split", `{"mcpServers":{"a":{"command":"srv","args":["-vx"],"env":{"A":"1","B":"2"},"cwd":"/tmp"}}}`, false},
		{"args joined", `{"mcpServers":{"a":{"command":"srv","args":["-v","x",""],"env":{"A":"1","B":"2"},"cwd":"/tmp"}}}`, false},
		{"changed env", `{"mcpServers":{"a":{"command":"srv","args":["-v","x"],"env":{"A":"1","B":"3"},"cwd":"/tmp"}}}`, false},
		{"env key moved", `{"mcpServers":{"a":{"command":"srv","args":["-v","x"],"env":{"A":"1","B2":""},"cwd":"/tmp"}}}`, false},
		{"changed cwd", `{"mcpServers":{"a":{"command":"srv","args":["-v","x"],"env":{"A":"1","B":"2"},"cwd":"/"}}}`, false},
		{"changed command", `{"mcpServers":{"a":{"command":"srv2","args":["-v","x"],"env":{"A":"1","B":"2"},"cwd":"/tmp"}}}`, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := loadOne(t, c.body).Hash
			if (got == base.Hash) != c.same {
				t.Errorf("hash %s vs base %s: same = %v, want %v", got, base.Hash, !c.same, c.same)
			}
		})
	}

	h1 := loadOne(t, `{"mcpServers":{"r":{"url":"https://h/mcp","headers":{"X":"1","Y":"2"}}}}`).Hash
	h2 := loadOne(t, `{"mcpServers":{"q":{"type":"streamable-http","headers":{"Y":"2","X":"1"},"url":"https://h/mcp"}}}`).Hash
	h3 := loadOne(t, `{"mcpServers":{"r":{"type":"sse","url":"https://h/mcp","headers":{"X":"1","Y":"2"}}}}`).Hash
	if h1 != h2 {
		t.Errorf("header order or type synonym changed the hash: %s vs %s", h1, h2)
	}
	if h1 == h3 {
		t.Errorf("http and sse entries hash equally: %s", h1)
	}
}
