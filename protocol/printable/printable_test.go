package printable

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestString(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"plain text unchanged", "hello, world", "hello, world"},
		{"newline, tab and carriage return kept", "a\tb\r\nc\n", "a\tb\r\nc\n"},
		{"non-ASCII text unchanged", "héllo 世界 🙂 \u00a0\u2028", "héllo 世界 🙂 \u00a0\u2028"},
		{"U+FFFD itself unchanged", "\uFFFD", "\uFFFD"},
		{"CSI sequence", "\x1b[2J\x1b[Hstatus: success", `\x1b[2J\x1b[Hstatus: success`},
		{"window title (OSC 0, BEL)", "\x1b]0;pwned\x07", `\x1b]0;pwned\x07`},
		{"clipboard write (OSC 52, ST)", "\x1b]52;c;ZWNobyBoaQ==\x1b\\", `\x1b]52;c;ZWNobyBoaQ==\x1b\`},
		{"NUL, backspace, form feed, vertical tab", "\x00\b\f\v", `\x00\x08\x0c\x0b`},
		{"DEL", "a\x7fb", `a\x7fb`},
		{"C1 CSI and OSC", "\u009b2J\u009d0;t\u009c", `\u009b2J\u009d0;t\u009c`},
		{"C1 range ends", "\u0080\u009f\u00a0", `\u0080\u009f` + "\u00a0"},
		{"invalid UTF-8 bytes", "a\xffb\xc0\x80c", `a\xffb\xc0\x80c`},
		{"raw 8-bit CSI byte", "\x9b31m", `\x9b31m`},
		{"truncated rune at the end", "ok\xe4\xb8", `ok\xe4\xb8`},
		{"bidi overrides and isolates (Trojan Source)", "ok\u202e\u2066txt.exe\u2069\u202c", `ok\u202e\u2066txt.exe\u2069\u202c`},
		{"bidi marks", "a\u200eb\u200fc\u061cd", `a\u200eb\u200fc\u061cd`},
		{"right-to-left text itself unchanged", "שלום مرحبا", "שלום مرحبا"},
		{"empty", "", ""},
	} {
		if got := String(tc.in); got != tc.want {
			t.Errorf("%s: String(%q)\n got %q\nwant %q", tc.name, tc.in, got, tc.want)
		}
	}
}

func TestLog(t *testing.T) {
	long := strings.Repeat("m", 10_000)
	for _, tc := range []struct{ name, in, want string }{
		{"short unchanged", "image/png", "image/png"},
		{"exactly the cap unchanged", long[:MaxLogField], long[:MaxLogField]},
		{"long cut with a mark", long, long[:MaxLogField-len("…")] + "…"},
		{"escapes rendered", "a\x1b[31m", `a\x1b[31m`},
		{"escapes past the cap cut", strings.Repeat("\x1b", 100), strings.Repeat(`\x1b`, 49) + `\` + "…"},
		{"cut on a rune boundary", strings.Repeat("世", 100), strings.Repeat("世", 65) + "…"},
	} {
		got := Log(tc.in)
		if got != tc.want {
			t.Errorf("%s: Log(%q)\n got %q\nwant %q", tc.name, tc.in, got, tc.want)
		}
		if len(got) > MaxLogField || !utf8.ValidString(got) {
			t.Errorf("%s: Log gave %d bytes (valid UTF-8: %v), want at most %d", tc.name, len(got), utf8.ValidString(got), MaxLogField)
		}
	}
}
