package actors

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// maxPreviewValue bounds one string value in an approval's argument
// preview: a longer one shows its head and its tail, so a dangerous end
// past the cut ("…; rm -rf ~") is still seen.
const maxPreviewValue = 160

// argsPreview is args as an approval form shows them, within max bytes:
// each long string value cut in its middle, then the whole, when still
// over max, cut in its middle too, each cut saying how many bytes it left
// out. Keys come sorted; arguments that are not JSON are shown as text.
func argsPreview(args json.RawMessage, max int) string {
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err == nil {
		if out, err := json.Marshal(shortenValues(v)); err == nil {
			return headTail(string(out), max)
		}
	}
	return headTail(string(args), max)
}

// shortenValues cuts each string of v longer than maxPreviewValue.
func shortenValues(v any) any {
	switch x := v.(type) {
	case string:
		return headTail(x, maxPreviewValue)
	case []any:
		for i := range x {
			x[i] = shortenValues(x[i])
		}
	case map[string]any:
		for k := range x {
			x[k] = shortenValues(x[k])
		}
	}
	return v
}

// headTail is s when it fits in n bytes, else its first and last n/2
// bytes (at rune boundaries) around "…[k bytes cut]…".
func headTail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	head, tail := n/2, len(s)-n/2
	for head > 0 && !utf8.RuneStart(s[head]) {
		head--
	}
	for tail < len(s) && !utf8.RuneStart(s[tail]) {
		tail++
	}
	return fmt.Sprintf("%s…[%d bytes cut]…%s", s[:head], tail-head, s[tail:])
}
