package toon

// quote.go decides when a key or a string needs quotes and writes them
// (TOON §7).

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// encodeKey returns key unquoted when it matches ^[A-Za-z_][A-Za-z0-9_.]*$
// (§7.3), else quoted.
func encodeKey(key string) string {
	if key == "" || !(isAlpha(key[0]) || key[0] == '_') {
		return quote(key)
	}
	for i := 1; i < len(key); i++ {
		c := key[i]
		if !(isAlpha(c) || isDigit(c) || c == '_' || c == '.') {
			return quote(key)
		}
	}
	return key
}

// isIdentifierSegment reports whether s matches ^[A-Za-z_][A-Za-z0-9_]*$.
func isIdentifierSegment(s string) bool {
	if s == "" || !(isAlpha(s[0]) || s[0] == '_') {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !(isAlpha(c) || isDigit(c) || c == '_') {
			return false
		}
	}
	return true
}

func isAlpha(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }

// isSafeUnquoted reports whether s may appear unquoted (§7.2). It quotes a
// little more than the spec demands, never less: a numeric-like string with a
// leading '+' and a string with leading or trailing Unicode white space are
// quoted too, so that no decoder can read them as a number or trim them.
func isSafeUnquoted(s string, delim byte) bool {
	if s == "" || s == "true" || s == "false" || s == "null" || s[0] == '-' {
		return false
	}
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		return false
	}
	if isNumericLike(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c == ':', c == '"', c == '\\', c == '[', c == ']', c == '{', c == '}', c == delim:
			return false
		}
	}
	return true
}

// isNumericLike matches /^[+-]?\d+(?:\.\d+)?(?:e[+-]?\d+)?$/i.
func isNumericLike(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '-' || s[i] == '+') {
		i++
	}
	digits := func() bool {
		start := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		return i > start
	}
	if !digits() {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '-' || s[i] == '+') {
			i++
		}
		if !digits() {
			return false
		}
	}
	return i == len(s)
}

// quote returns s in double quotes, escaped per §7.1: \\ \" \n \r \t, other
// C0 controls as lowercase \u00xx, everything else literal.
func quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			b.WriteString(`\\`)
		case '"':
			b.WriteString(`\"`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 {
				const hex = "0123456789abcdef"
				b.WriteString(`\u00`)
				b.WriteByte(hex[c>>4])
				b.WriteByte(hex[c&0xf])
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
