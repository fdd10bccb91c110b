package actors

import (
	"path"
	"strings"
	"testing"
)

// TestToolPattern checks the one tool-name matcher: '*' crosses '/' and
// '.', '?' is one rune, everything else is literal and case-sensitive.
func TestToolPattern(t *testing.T) {
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"*delete*", "admin/delete_all", true},
		{"*delete*", "delete", true},
		{"*delete*", "bulk.delete-v2", true},
		{"*delete*", "Delete_all", false}, // case-sensitive
		{"*delete*", "del/ete", false},
		{"admin/*", "admin/delete_all", true},
		{"admin/*", "admin/", true},
		{"admin/*", "admin", false},
		{"admin/*", "team/admin/x", false},
		{"*/*", "a/b/c", true},
		{"*", "", true},
		{"*", "a/b.c-d", true},
		{"?", "/", true},
		{"?", "é", true}, // one rune, two bytes
		{"?", "ab", false},
		{"?", "", false},
		{"a?c", "a/c", true},
		{"a?c", "a.c", true},
		{"a?c", "a-c", true},
		{"a?c", "abbc", false},
		{"get.file-v1", "get.file-v1", true},
		{"get.file-v1", "getXfile-v1", false}, // '.' is literal
		{"get.file-v1", "get.file-v", false},
		{"get_*_v?", "get_user/x_v2", true},
		{"get_*_v?", "get_v2", false},
		{"**x**", "a/x/b", true},
		{"*a*a*a*b", strings.Repeat("a", 200), false},
		{"*a*a*a*b", strings.Repeat("a", 200) + "b", true},
		{"fs.read", "fs.read", true},
		{"fs.read", "FS.READ", false},
		{"x\uFFFDy", "x\xffy", false}, // an invalid byte is no literal U+FFFD
		{"x?y", "x\xffy", true},
	}
	for _, c := range cases {
		p, err := CompileToolPattern(c.pattern)
		if err != nil {
			t.Fatalf("CompileToolPattern(%q): %v", c.pattern, err)
		}
		if got := p.Match(c.name); got != c.want {
			t.Errorf("%q.Match(%q) = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
	// The cases that broke path.Match, which this matcher replaced.
	if m, _ := path.Match("*delete*", "admin/delete_all"); m {
		t.Errorf("path.Match crosses '/' now; the regression case is moot")
	}
}

// TestToolPatternInvalid: patterns are refused at load with the reason.
func TestToolPatternInvalid(t *testing.T) {
	cases := []struct{ pattern, want string }{
		{"", "empty pattern"},
		{"[x", `'[' is not pattern syntax`},
		{"delete_[ab]", `'[' is not pattern syntax`},
		{"a]", `']' is not pattern syntax`},
		{`a\*`, `'\\' is not pattern syntax`},
		{"a\x00b", "control character"},
		{"a\nb", "control character"},
		{"\xff", "not valid UTF-8"},
		{strings.Repeat("a", maxPatternBytes+1), "over 1024"},
	}
	for _, c := range cases {
		_, err := CompileToolPattern(c.pattern)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("CompileToolPattern(%q) = %v, want one line containing %q", c.pattern, err, c.want)
		}
	}
}

// TestPolicyPatterns: deny, allow and timeouts all use ToolPattern, and
// NewPolicy names the rule at fault.
func TestPolicyPatterns(t *testing.T) {
	p, err := NewPolicy("test", 0, map[string]ServerPolicy{
		"*":   {Deny: []string{"*delete*"}, Timeouts: map[string]float64{"*": 9, "slow/*": 3}},
		"gh":  {Allow: []string{"repo/*", "get_?"}, Timeouts: map[string]float64{"repo/*": 2, "repo/big.*": 1, "repo/x": 5}},
		"dot": {Deny: []string{"fs.write-*"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		server, tool, want string
	}{
		{"any", "admin/delete_all", "denied"},
		{"gh", "repo/delete.branch", "denied"},
		{"gh", "repo/list", ""},
		{"gh", "get_a", ""},
		{"gh", "get_ab", "not allowed"},
		{"gh", "other/repo/list", "not allowed"},
		{"dot", "fs.write-all", "denied"},
		{"dot", "fs.writeall", ""},
	}
	for _, c := range checks {
		err := p.Check(c.server, c.tool)
		if got := err != nil; got != (c.want != "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("Check(%s, %s) = %v, want %q", c.server, c.tool, err, c.want)
		}
	}
	timeouts := []struct {
		server, tool string
		want         float64
	}{
		{"gh", "repo/x", 5},         // exact wins
		{"gh", "repo/big.csv", 1},   // the longer pattern wins
		{"gh", "repo/small", 2},     //
		{"other", "slow/thing", 3},  // "*" server, longer pattern
		{"other", "fast/thing", 9},  //
		{"gh", "unlisted/thing", 9}, // falls back to "*"
	}
	for _, c := range timeouts {
		d, ok := p.Timeout(c.server, c.tool)
		if !ok || d.Seconds() != c.want {
			t.Errorf("Timeout(%s, %s) = %v, %v, want %vs", c.server, c.tool, d, ok, c.want)
		}
	}
	for want, servers := range map[string]map[string]ServerPolicy{
		`server "x": deny: pattern "[x"`:       {"x": {Deny: []string{"[x"}}},
		`server "y": allow: empty pattern`:     {"y": {Allow: []string{""}}},
		`server "z": timeouts: pattern "a\\b"`: {"z": {Timeouts: map[string]float64{`a\b`: 1}}},
		`timeout of "t" must be above 0`:       {"z": {Timeouts: map[string]float64{"t": 0}}},
	} {
		if _, err := NewPolicy("test", 0, servers); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("NewPolicy(%v) = %v, want an error containing %q", servers, err, want)
		}
	}
}
