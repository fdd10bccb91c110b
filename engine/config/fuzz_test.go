package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoadFile feeds arbitrary bytes to the loader as one config file. It
// must never panic, and every entry it returns has a non-empty name, a
// valid type and the fields that type requires, and a hash.
func FuzzLoadFile(f *testing.F) {
	seeds, _ := filepath.Glob(filepath.Join("testdata", "*", "*.json"))
	for _, p := range seeds {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	f.Add([]byte(`{"mcpServers":{"a":{"command":"x","args":["1"],"env":{"K":"v"},"disabled":false}}}`))
	f.Add([]byte(`{"mcpServers":{"a":{"url":"https://h","type":"streamableHttp"},"a":{}}}`))
	f.Add([]byte(`{"mcpServers":{"a":{"command":"x"}}, "mcpServers": null}`))
	f.Add([]byte(strings.Repeat("[", 600)))
	f.Add([]byte(`{"mcp":{"a":{"type":"local","command":["x","-y"],"environment":{"K":"v"},"enabled":false}}}`))
	f.Add([]byte(`{"projects":{"/w":{"mcpServers":{"a":{"command":"x"}}}},"servers":{"b":{"type":"stdio","command":"y"}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		// Every file format keeps the invariants.
		for _, ft := range []format{formatMCPServers, formatServers, formatClaudeCode, formatOpencode} {
			l := newLoader(Options{LookPath: noLookPath, Cwd: "/w"})
			l.loadBytes("fuzz.json", data, ft, nil)
			s := l.set
			seen := map[string]bool{}
			for _, e := range s.Entries {
				if e.Name == "" {
					t.Fatalf("entry with an empty name: %+v", e)
				}
				if seen[e.Name] {
					t.Fatalf("duplicate entry %q", e.Name)
				}
				seen[e.Name] = true
				switch e.Type {
				case TypeStdio:
					if e.Command == "" || e.URL != "" || e.Headers != nil {
						t.Fatalf("bad stdio entry: %+v", e)
					}
				case TypeHTTP, TypeSSE:
					if e.URL == "" || e.Command != "" || e.Args != nil || e.Env != nil || e.Cwd != "" {
						t.Fatalf("bad %s entry: %+v", e.Type, e)
					}
				default:
					t.Fatalf("entry with type %q: %+v", e.Type, e)
				}
				if len(e.Hash) != 64 || e.Hash != hashEntry(e) {
					t.Fatalf("bad hash %q for %+v", e.Hash, e)
				}
				if e.File != "fuzz.json" {
					t.Fatalf("File = %q", e.File)
				}
			}
			for _, p := range s.Problems {
				if p.File != "fuzz.json" || p.Reason == "" {
					t.Fatalf("bad problem %#v", p)
				}
			}
		}
	})
}
