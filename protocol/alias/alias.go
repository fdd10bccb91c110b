// Package alias turns server and tool names into the Python identifiers the
// sandbox's proxies use (SPEC §9.3, ALS-1..3). It depends only on the names.
package alias

import (
	"regexp"
	"strconv"
	"strings"
)

// pyKeywords is Python's keyword.kwlist (hard keywords). Aliases are
// lower-case, so only the lower-case ones can match; soft keywords such as
// match and type are valid identifiers and stay as they are.
var pyKeywords = map[string]bool{
	"False": true, "None": true, "True": true, "and": true, "as": true, "assert": true,
	"async": true, "await": true, "break": true, "class": true, "continue": true, "def": true,
	"del": true, "elif": true, "else": true, "except": true, "finally": true, "for": true,
	"from": true, "global": true, "if": true, "import": true, "in": true, "is": true,
	"lambda": true, "nonlocal": true, "not": true, "or": true, "pass": true, "raise": true,
	"return": true, "try": true, "while": true, "with": true, "yield": true,
}

// nonIdent matches a run of characters that cannot appear in an alias.
var nonIdent = regexp.MustCompile(`[^a-z0-9_]+`)

// reservedTool is the proxy method name a tool alias may not take (ALS-2).
const reservedTool = "list_tools"

// Servers returns the alias of each server name, in config order
// (ALS-1). Each alias is a unique Python identifier matching
// ^[a-z_][a-z0-9_]*$ and no keyword, and depends only on names (ALS-3).
func Servers(names []string) []string {
	bases := make([]string, len(names))
	for i, n := range names {
		bases[i] = baseAlias(n, "server")
	}
	return dedupe(bases)
}

// Tools returns the alias of each tool name, in tools/list order
// (ALS-2), with the rules of Servers and fallback "tool". A tool whose
// alias would be "list_tools" gets "list_tools_".
func Tools(names []string) []string {
	bases := make([]string, len(names))
	for i, n := range names {
		bases[i] = ToolBase(n)
	}
	return dedupe(bases)
}

// ToolBase is the alias a tool named name asks for, before collisions
// resolve: Tools gives it to the first tool that asks for it, and a later
// one gets it with a suffix.
func ToolBase(name string) string {
	if b := baseAlias(name, "tool"); b != reservedTool {
		return b
	}
	return reservedTool + "_"
}

// baseAlias sanitizes name: lower-case, each run of [^a-z0-9_] becomes "_",
// fallback if empty, "_" before a leading digit, "_" after a keyword.
func baseAlias(name, fallback string) string {
	s := nonIdent.ReplaceAllString(strings.ToLower(name), "_")
	if s == "" {
		s = fallback
	}
	if s[0] >= '0' && s[0] <= '9' {
		s = "_" + s
	}
	if pyKeywords[s] {
		s += "_"
	}
	return s
}

// dedupe resolves collisions in order: the first holder of a base keeps it,
// and each later one gets the first free base_N (N = 2, 3, ...) that is no
// one's base and not yet taken. A suffixed alias therefore never equals a
// base, so every base's first holder keeps it and the result is unique.
func dedupe(bases []string) []string {
	isBase := make(map[string]bool, len(bases))
	for _, b := range bases {
		isBase[b] = true
	}
	used := make(map[string]bool, len(bases))
	next := map[string]int{} // the next suffix to try per base; earlier ones stay taken
	out := make([]string, len(bases))
	for i, b := range bases {
		if !used[b] {
			used[b], out[i] = true, b
			continue
		}
		n := max(next[b], 2)
		for ; ; n++ {
			c := b + "_" + strconv.Itoa(n)
			if !isBase[c] && !used[c] {
				used[c], out[i] = true, c
				break
			}
		}
		next[b] = n + 1
	}
	return out
}
