package toon

import (
	"errors"
	"testing"
)

// FuzzEncode checks that Encode never panics on any JSON value and any
// option set, and that its output re-parses to the same value (TOON §2
// round-trip equality).
func FuzzEncode(f *testing.F) {
	names, cases := loadFixtures(f)
	for i, name := range names {
		f.Add([]byte(cases[name].Input), uint8(i))
	}
	f.Add([]byte(`{"a":{"b":{"c":[{"x":1},{"x":2}]}},"a.b":[[1],[]],"-":"- x"}`), uint8(0x10))
	f.Add([]byte(`[{"k":[{"a":1}],"n":{}},{},[[{"z":"\u0000"}]],1e400,-0.0]`), uint8(0x25))
	f.Fuzz(func(t *testing.T, data []byte, opts uint8) {
		checkRoundTrip(t, data, opts&0x7f)
		checkJSONRoundTrip(t, data)
	})
}

// checkJSONRoundTrip checks that the ordered tree of data marshals back to
// JSON that decodes to the same tree.
func checkJSONRoundTrip(t *testing.T, data []byte) {
	t.Helper()
	v, err := DecodeJSON(data)
	if err != nil {
		return
	}
	out, err := appendJSON(nil, v, 0)
	if err != nil {
		if errors.Is(err, errTooDeep) {
			return
		}
		t.Fatalf("appendJSON(%s): %v", data, err)
	}
	back, err := DecodeJSON(out)
	if err != nil {
		t.Fatalf("DecodeJSON(%s) of marshaled %s: %v", out, data, err)
	}
	if !equalValue(v, back) {
		t.Fatalf("JSON round trip of %s gave %s", data, out)
	}
}
