package alias

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

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
		}{{"Servers", Servers}, {"Tools", Tools}} {
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
				if fn.name == "Tools" && a == reservedTool {
					t.Fatalf("Tools gave the reserved %q", a)
				}
			}
			// The first name with a given base keeps that base.
			fallback := map[string]string{"Servers": "server", "Tools": "tool"}[fn.name]
			first := map[string]bool{}
			for i, n := range in {
				b := baseAlias(n, fallback)
				if fn.name == "Tools" && b == reservedTool {
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
