package config

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
			l.loadBytes("fuzz.json", data, ft)
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

// identRe is a Python identifier as ALS-1 produces them.
var identRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// FuzzAliases checks that server and tool aliases of arbitrary name lists
// are unique, valid Python identifiers, not keywords, deterministic, and
// that each base alias's first holder keeps it.
func FuzzAliases(f *testing.F) {
	f.Add("demo-server\nOther Server!\nclass\n9lives")
	f.Add("x\nx_2\nx\nx_3\nx")
	f.Add("a-b\na_b\na.b\n\n\nserver\ntool")
	f.Add("list_tools\nlist-tools\nlist_tools_\nimport\nNone")
	f.Fuzz(func(t *testing.T, joined string) {
		in := strings.Split(joined, "\n")
		for _, fn := range []struct {
			name    string
			aliases func([]string) []string
		}{{"ServerAliases", ServerAliases}, {"ToolAliases", ToolAliases}} {
			got := fn.aliases(in)
			if len(got) != len(in) {
				t.Fatalf("%s: %d aliases for %d names", fn.name, len(got), len(in))
			}
			if again := fn.aliases(slices.Clone(in)); !slices.Equal(got, again) {
				t.Fatalf("%s not deterministic: %q vs %q", fn.name, got, again)
			}
			seen := map[string]bool{}
			for i, a := range got {
				if !identRe.MatchString(a) || pyKeywords[a] {
					t.Fatalf("%s(%q)[%d] = %q: not a usable identifier", fn.name, in[i], i, a)
				}
				if seen[a] {
					t.Fatalf("%s: alias %q given twice in %q", fn.name, a, got)
				}
				seen[a] = true
				if fn.name == "ToolAliases" && a == reservedTool {
					t.Fatalf("ToolAliases gave the reserved %q", a)
				}
			}
			// The first name with a given base keeps that base.
			fallback := map[string]string{"ServerAliases": "server", "ToolAliases": "tool"}[fn.name]
			first := map[string]bool{}
			for i, n := range in {
				b := baseAlias(n, fallback)
				if fn.name == "ToolAliases" && b == reservedTool {
					b += "_"
				}
				if !first[b] {
					first[b] = true
					if got[i] != b {
						t.Fatalf("%s: first holder %q of base %q got %q", fn.name, n, b, got[i])
					}
				}
			}
		}
	})
}
