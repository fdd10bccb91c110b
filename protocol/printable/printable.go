// Package printable renders text that came from the sandbox so that a
// terminal shows it and obeys none of it. Cell output, progress messages and
// log fields can carry escape sequences (cursor moves, window titles, OSC 52
// clipboard writes) that a terminal or log viewer would act on.
package printable

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// String returns s with everything a terminal could act on shown as an
// escape: C0 controls other than \n, \t and \r, and DEL, as \xNN; C1
// controls (U+0080–U+009F) and the bidirectional formatting characters as
// \uNNNN; bytes that are not valid UTF-8 as \xNN. The bidi controls are
// escaped because they reorder what a reader sees ("Trojan Source"): a log
// line or a progress message could show text in an order other than the
// bytes it holds. All other text, any script or emoji, is unchanged, and so
// is s when it holds nothing to escape. Backslashes are not escaped: the rendering is
// for a reader, not a decoder.
func String(s string) string {
	i := 0
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		if needsEscape(r, size) {
			break
		}
		i += size
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 16)
	b.WriteString(s[:i])
	for i < len(s) {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case !needsEscape(r, size):
			b.WriteString(s[i : i+size])
		case size == 1: // a C0 control, DEL, or an invalid byte
			fmt.Fprintf(&b, `\x%02x`, s[i])
		default: // a C1 control or a bidi control
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	return b.String()
}

// needsEscape reports whether the rune r, of size bytes in the input, is
// rendered as an escape.
func needsEscape(r rune, size int) bool {
	switch {
	case r == utf8.RuneError && size == 1:
		return true // an invalid byte (a valid U+FFFD is 3 bytes)
	case r == '\n' || r == '\t' || r == '\r':
		return false
	case r < 0x20 || r == 0x7f:
		return true
	case r >= 0x80 && r <= 0x9f:
		return true
	default:
		return IsBidiControl(r)
	}
}

// IsBidiControl reports whether r is one of Unicode's explicit
// bidirectional formatting characters (UAX #9): the marks ALM, LRM and RLM,
// the embeddings and overrides LRE, RLE, PDF, LRO and RLO, and the isolates
// LRI, RLI, FSI and PDI.
func IsBidiControl(r rune) bool {
	switch {
	case r == 0x061c, r == 0x200e, r == 0x200f:
		return true
	case r >= 0x202a && r <= 0x202e:
		return true
	default:
		return r >= 0x2066 && r <= 0x2069
	}
}

// MaxLogField is the most bytes of one sandbox-supplied value a log line
// carries.
const MaxLogField = 200

// Log is how every value that came from the sandbox appears in a log: at
// most MaxLogField bytes, cut on a rune boundary and marked with "…" when
// longer, and rendered by String so that a log read on a terminal obeys
// none of it. Only a bounded prefix of s is examined.
func Log(s string) string {
	cut := len(s) > MaxLogField
	if cut {
		s = s[:MaxLogField]
	}
	s = String(s)
	if !cut && len(s) <= MaxLogField {
		return s
	}
	const mark = "…"
	n := MaxLogField - len(mark)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + mark
}
