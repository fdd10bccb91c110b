package toon

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fixtureDir holds the vendored @toon-format/spec 3.3.2 encode fixtures.
const fixtureDir = "../../tests/testdata/toon"

// wantFixtureCases is the number of encode cases in @toon-format/spec 3.3.2.
const wantFixtureCases = 153

type fixtureFile struct {
	Category string        `json:"category"`
	Tests    []fixtureCase `json:"tests"`
}

type fixtureCase struct {
	Name        string                     `json:"name"`
	Input       json.RawMessage            `json:"input"`
	Expected    string                     `json:"expected"`
	Options     map[string]json.RawMessage `json:"options"`
	ShouldError bool                       `json:"shouldError"`
}

// loadFixtures returns every encode case, keyed by "file/case name", failing
// the test when the directory is missing or the count is off.
func loadFixtures(tb testing.TB) (names []string, cases map[string]fixtureCase) {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(fixtureDir, "*.json"))
	if err != nil {
		tb.Fatal(err)
	}
	if len(files) == 0 {
		tb.Fatalf("no fixture files in %s", fixtureDir)
	}
	cases = make(map[string]fixtureCase)
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			tb.Fatal(err)
		}
		var ff fixtureFile
		if err := json.Unmarshal(data, &ff); err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
		if ff.Category != "encode" {
			tb.Fatalf("%s: category %q, want encode", path, ff.Category)
		}
		base := strings.TrimSuffix(filepath.Base(path), ".json")
		for _, tc := range ff.Tests {
			name := base + "/" + tc.Name
			if _, dup := cases[name]; dup {
				tb.Fatalf("duplicate fixture name %q", name)
			}
			cases[name] = tc
			names = append(names, name)
		}
	}
	if len(names) != wantFixtureCases {
		tb.Fatalf("found %d encode fixture cases in %s, want %d", len(names), fixtureDir, wantFixtureCases)
	}
	return names, cases
}

// fixtureOptions maps a fixture's options onto Options; every option key must
// be understood.
func fixtureOptions(t *testing.T, raw map[string]json.RawMessage) Options {
	t.Helper()
	var opts Options
	for k, v := range raw {
		switch k {
		case "delimiter":
			var d string
			if err := json.Unmarshal(v, &d); err != nil || len([]rune(d)) != 1 {
				t.Fatalf("bad delimiter option %s", v)
			}
			opts.Delimiter = []rune(d)[0]
		case "indent":
			if err := json.Unmarshal(v, &opts.Indent); err != nil {
				t.Fatalf("bad indent option %s", v)
			}
		case "keyFolding":
			var kf string
			if err := json.Unmarshal(v, &kf); err != nil {
				t.Fatalf("bad keyFolding option %s", v)
			}
			opts.KeyFolding = KeyFolding(kf)
		case "flattenDepth":
			var fd int
			if err := json.Unmarshal(v, &fd); err != nil || fd < 0 {
				t.Fatalf("bad flattenDepth option %s", v)
			}
			// The spec's 0 and 1 both fold nothing; our 0 means "no limit".
			opts.FlattenDepth = max(fd, 1)
		default:
			t.Fatalf("unsupported fixture option %q", k)
		}
	}
	return opts
}

func TestEncodeFixtures(t *testing.T) {
	names, cases := loadFixtures(t)
	passed := 0
	for _, name := range names {
		tc := cases[name]
		ok := t.Run(name, func(t *testing.T) {
			if tc.ShouldError {
				t.Fatalf("shouldError fixtures are not expected in the encode suite")
			}
			opts := fixtureOptions(t, tc.Options)
			in, err := DecodeJSON(tc.Input)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Encode(in, opts)
			if err != nil {
				t.Fatal(err)
			}
			if want := tc.Expected; got != want {
				t.Errorf("Encode(%s, %+v)\ngot:\n%s\nwant:\n%s", tc.Input, opts, got, want)
			}
		})
		if ok {
			passed++
		}
	}
	t.Logf("%d of %d encode fixtures pass", passed, len(names))
}

func TestEncodeGoValues(t *testing.T) {
	tests := []struct {
		name string
		in   any
		opts Options
		want string
	}{
		{"sorted map", map[string]any{"b": 1, "a": []string{"x", "y"}}, Options{}, "a[2]: x,y\nb: 1"},
		{"ints", []any{int8(-8), uint16(16), int64(math.MinInt64), uint64(math.MaxUint64)}, Options{},
			"[4]: -8,16,-9223372036854775808,18446744073709551615"},
		{"floats", []any{1.5, -0.0, math.NaN(), math.Inf(1), math.Inf(-1), 1e21, 1e-7, float32(0.1), 123456789.0},
			Options{}, "[9]: 1.5,0,null,null,null,1e+21,1e-7,0.1,123456789"},
		{"json.Number keeps digits", []any{json.Number("9007199254740993"), json.Number("1.50"), json.Number("-0.0"), json.Number("12e-1"), json.Number("1E400")},
			Options{}, "[5]: 9007199254740993,1.5,0,1.2,1e+400"},
		{"nil object", Object(nil), Options{}, ""},
		{"duplicate keys", Object{{"a", 1}, {"b", 2}, {"a", 3}}, Options{}, "a: 3\nb: 2"},
		{"invalid utf-8", Object{{"k\xff", "v\xfe"}}, Options{}, "\"k\uFFFD\": v\uFFFD"},
		{"plus and unicode space quoted", []string{"+1", "\u00a0x", "x\u3000", "1.5.1"}, Options{}, "[4]: \"+1\",\"\u00a0x\",\"x\u3000\",1.5.1"},
		{"empty root array", []string{}, Options{}, "[]"},
		{"root string", "a,b", Options{}, "\"a,b\""},
		{"root string pipe", "a,b", Options{Delimiter: '|'}, "a,b"},
		{"list object keeps first key out of folds", Object{{"items", []any{Object{{"a.b", 1}, {"a", Object{{"b", 2}}}}}}},
			Options{KeyFolding: KeyFoldingSafe}, "items[1]:\n  - a.b: 1\n    a:\n      b: 2"},
		{"partial fold of multi-key tail", Object{{"a", Object{{"b", Object{{"c", 1}, {"d", 2}}}}}},
			Options{KeyFolding: KeyFoldingSafe}, "a.b:\n  c: 1\n  d: 2"},
		{"root literal dotted key blocks nested fold", Object{{"a", Object{{"b", Object{{"c", Object{{"d", 1}, {"e", 2}}}}}}}, {"a.b.c", 0}},
			Options{KeyFolding: KeyFoldingSafe}, "a:\n  b:\n    c:\n      d: 1\n      e: 2\na.b.c: 0"},
		{"list object first field nested list, indent 4", Object{{"x", []any{Object{{"m", []any{Object{{"a", 1}}, 2}}, {"n", 1}}}}},
			Options{Indent: 4}, "x[1]:\n    - m[2]:\n            - a: 1\n            - 2\n        n: 1"},
		{"wide tabular", []any{wideObject(10, 0), wideObject(10, 1)}, Options{},
			"[2]{k0,k1,k2,k3,k4,k5,k6,k7,k8,k9}:\n  0,1,2,3,4,5,6,7,8,9\n  1,2,3,4,5,6,7,8,9,10"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Encode(tt.in, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got:\n%q\nwant:\n%q", got, tt.want)
			}
		})
	}
}

// wideObject returns {k0: off, k1: off+1, ...} with n keys, in reverse order
// when off is odd, to exercise column lookup by name.
func wideObject(n, off int) Object {
	o := make(Object, n)
	for i := range n {
		o[i] = Field{Key: "k" + string(rune('0'+i)), Value: i + off}
	}
	if off%2 == 1 {
		for i, j := 0, n-1; i < j; i, j = i+1, j-1 {
			o[i], o[j] = o[j], o[i]
		}
	}
	return o
}

func TestEncodeErrors(t *testing.T) {
	cyclic := []any{nil}
	cyclic[0] = cyclic
	tests := []struct {
		name string
		in   any
		opts Options
		want string
	}{
		{"unsupported type", struct{}{}, Options{}, "unsupported type struct {}"},
		{"bad number", json.Number("01"), Options{}, `invalid number "01"`},
		{"bad delimiter", 1, Options{Delimiter: ';'}, "delimiter"},
		{"negative indent", 1, Options{Indent: -1}, "indent -1 is negative"},
		{"bad folding", 1, Options{KeyFolding: "all"}, "key folding"},
		{"cycle", cyclic, Options{}, "nesting too deep"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Encode(tt.in, tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

func TestCanonicalNumber(t *testing.T) {
	tests := []struct{ in, want string }{
		{"0", "0"}, {"-0", "0"}, {"0.000", "0"}, {"-0e5", "0"},
		{"1", "1"}, {"1.0", "1"}, {"1.5000", "1.5"}, {"-7", "-7"},
		{"1e6", "1000000"}, {"1E+6", "1000000"}, {"1e-6", "0.000001"}, {"0.000001", "0.000001"},
		{"1e-7", "1e-7"}, {"12.5e-8", "1.25e-7"}, {"1e20", "100000000000000000000"},
		{"123456789012345678901", "123456789012345678901"}, {"1e21", "1e+21"},
		{"1234567890123456789012", "1.234567890123456789012e+21"}, {"-1.5e300", "-1.5e+300"},
		{"0.00123", "0.00123"}, {"100.0100", "100.01"}, {"3.14", "3.14"},
		{"1e99999999999999999999", "1e+99999999999999999999"}, {"25e-99999999999999999999", "2.5e-99999999999999999998"},
	}
	for _, tt := range tests {
		got, ok := canonicalNumber(tt.in)
		if !ok || got != tt.want {
			t.Errorf("canonicalNumber(%q) = %q, %v, want %q", tt.in, got, ok, tt.want)
		}
	}
	for _, bad := range []string{"", "-", "01", "1.", ".5", "1e", "1e+", "+1", "1x", "0x10", "NaN", "Infinity", "--1"} {
		if got, ok := canonicalNumber(bad); ok {
			t.Errorf("canonicalNumber(%q) = %q, want rejection", bad, got)
		}
	}
}

func TestDecodeJSON(t *testing.T) {
	got, err := DecodeJSON([]byte(` {"b": [1, "x", true, null, {}], "a": {"c": 2.50}, "b": 0} `))
	if err != nil {
		t.Fatal(err)
	}
	want := Object{
		{"b", json.Number("0")},
		{"a", Object{{"c", json.Number("2.50")}}},
	}
	if !equalValue(got, want) {
		t.Errorf("got %#v, want %#v", got, want)
	}
	for _, bad := range []string{``, `{`, `{"a":1}x`, `1 2`, `[1,]`, `{"a" 1}`, `nul`, `[1]]`, strings.Repeat("[", maxJSONDepth+2) + strings.Repeat("]", maxJSONDepth+2)} {
		if v, err := DecodeJSON([]byte(bad)); err == nil {
			t.Errorf("DecodeJSON(%.20q) = %v, want an error", bad, v)
		}
	}
}

func TestObjectMarshalJSON(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"order kept", Object{{"z", 1}, {"a", []any{"<&>", nil, true, 1.5}}, {"m", Object{}}}, `{"z":1,"a":["<&>",null,true,1.5],"m":{}}`},
		{"nil object", Object(nil), `{}`},
		{"nested in slice", []any{Object{{"k", "v"}}}, `[{"k":"v"}]`},
		{"escapes", Object{{"q\"\\\n\x01\u2028", "\xff"}}, `{"q\"\\\n\u0001\u2028":"\ufffd"}`},
		{"numbers", Object{{"n", json.Number("1E3")}, {"f", math.NaN()}, {"u", uint8(7)}, {"m", map[string]any{"b": 1, "a": []string{"x"}}}},
			`{"n":1000,"f":null,"u":7,"m":{"a":["x"],"b":1}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			// json.Marshal re-escapes HTML in Marshaler output; compare our own bytes
			// where that matters.
			if o, ok := tt.in.(Object); ok {
				if b, err = o.MarshalJSON(); err != nil {
					t.Fatal(err)
				}
			}
			if got := string(b); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
	if _, err := (Object{{"x", func() {}}}).MarshalJSON(); err == nil {
		t.Error("MarshalJSON of a func value succeeded, want an error")
	}
}

// TestRoundTrip checks the decoder used by FuzzEncode against every fixture
// input under several option sets.
func TestRoundTrip(t *testing.T) {
	names, cases := loadFixtures(t)
	for _, name := range names {
		tc := cases[name]
		for ob := range 128 {
			checkRoundTrip(t, tc.Input, uint8(ob))
		}
	}
}
