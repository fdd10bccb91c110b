package actors

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestArgsPreview: an approval's preview shows the head and the tail of a
// long value, with the bytes cut between them (issue 36: a dangerous tail
// past the 400-byte preview was invisible), and stays within its cap.
func TestArgsPreview(t *testing.T) {
	long := "echo hello " + strings.Repeat("a", 5000) + "; rm -rf ~"
	tests := []struct {
		name, args string
		want       []string
	}{
		{"short", `{"path":"/tmp/x","n":1}`, []string{`{"n":1,"path":"/tmp/x"}`}},
		{"long value", `{"cmd":"` + long + `"}`, []string{`"cmd":"echo hello aaa`, "; rm -rf ~\"}", "bytes cut]…"}},
		{"many values", `{"a":"` + strings.Repeat("x", 300) + `","b":"` + strings.Repeat("y", 300) + `","c":"` + strings.Repeat("z", 300) + `","d":"tail-of-d"}`,
			[]string{`{"a":"xxx`, `tail-of-d"}`, "bytes cut]…"}},
		{"not JSON", "plain " + long, []string{"plain echo", "; rm -rf ~", "bytes cut]…"}},
		{"multi-byte", `{"s":"` + strings.Repeat("é", 400) + `"}`, []string{"é…[", "]…é"}},
	}
	for _, tt := range tests {
		got := argsPreview([]byte(tt.args), maxPreview)
		if len(got) > maxPreview+40 {
			t.Errorf("%s: %d bytes, want about %d at most", tt.name, len(got), maxPreview)
		}
		for _, w := range tt.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s: got %q, want it to contain %q", tt.name, got, w)
			}
		}
		if !utf8.ValidString(got) {
			t.Errorf("%s: a rune was split: %q", tt.name, got)
		}
	}
}
