package actors

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// ToolPattern is a compiled tool-name pattern, the one matcher of every rule
// that names tools (policy allow, deny and timeouts, and any later one). '*'
// matches any run of characters, '/' and '.' included: MCP tool names may
// contain both, and a deny rule must not miss "admin/delete_all". '?'
// matches exactly one character (rune). Everything else matches itself,
// case-sensitively, against the raw name: no folding or aliasing, so a rule
// means the same on every server.
type ToolPattern struct {
	raw   string
	runes []rune // nil when literal
}

// maxPatternBytes bounds a pattern; tool names are far shorter.
const maxPatternBytes = 1024

// CompileToolPattern validates s. '[', ']' and '\' are refused: under the
// older path.Match syntax they were classes and escapes, so a rule written
// for it would otherwise silently match something else.
func CompileToolPattern(s string) (ToolPattern, error) {
	switch {
	case s == "":
		return ToolPattern{}, errors.New("empty pattern")
	case len(s) > maxPatternBytes:
		return ToolPattern{}, fmt.Errorf("pattern of %d bytes, over %d", len(s), maxPatternBytes)
	case !utf8.ValidString(s):
		return ToolPattern{}, fmt.Errorf("pattern %q is not valid UTF-8", s)
	}
	for _, r := range s {
		switch {
		case r == '[' || r == ']' || r == '\\':
			return ToolPattern{}, fmt.Errorf("pattern %q: %q is not pattern syntax (only * and ? are; classes and escapes are not supported)", s, r)
		case unicode.IsControl(r):
			return ToolPattern{}, fmt.Errorf("pattern %q holds a control character", s)
		}
	}
	p := ToolPattern{raw: s}
	if strings.ContainsAny(s, "*?") {
		p.runes = []rune(s)
	}
	return p, nil
}

// String returns the pattern as written.
func (p ToolPattern) String() string { return p.raw }

// Match reports whether name matches the whole pattern. It runs in
// O(len(pattern)·len(name)) at worst: a failed match after a '*' resumes
// from the last '*' only, never from earlier ones.
func (p ToolPattern) Match(name string) bool {
	if p.runes == nil {
		return p.raw != "" && name == p.raw
	}
	pat := p.runes
	pi, star := 0, -1 // star: index in pat just after the last '*' seen
	ni, mark := 0, 0  // mark: the name offset that '*' resumes from
	for ni < len(name) {
		r, size := utf8.DecodeRuneInString(name[ni:])
		switch {
		case pi < len(pat) && pat[pi] == '*':
			pi++
			star, mark = pi, ni
		case pi < len(pat) && (pat[pi] == '?' || (pat[pi] == r && size == utf8.RuneLen(r))):
			// The size check keeps a literal U+FFFD from matching an invalid byte.
			pi++
			ni += size
		case star >= 0:
			// Let the last '*' take one more character and retry.
			_, msize := utf8.DecodeRuneInString(name[mark:])
			mark += msize
			pi, ni = star, mark
		default:
			return false
		}
	}
	for pi < len(pat) && pat[pi] == '*' {
		pi++
	}
	return pi == len(pat)
}

// compilePatterns compiles each of ss.
func compilePatterns(ss []string) ([]ToolPattern, error) {
	out := make([]ToolPattern, 0, len(ss))
	for _, s := range ss {
		p, err := CompileToolPattern(s)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// matchAny reports whether any of patterns matches name.
func matchAny(patterns []ToolPattern, name string) bool {
	for _, p := range patterns {
		if p.Match(name) {
			return true
		}
	}
	return false
}
