package schema

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestSignature checks the rendered signature: required parameters first,
// then optional ones defaulting to None, each group in property order.
func TestSignature(t *testing.T) {
	cases := []struct{ schema, want string }{
		{`{"type":"object","properties":{"path":{"type":"string"},"tail":{"type":"integer"},"head":{"type":"integer"}},"required":["path"]}`,
			"read_file(path: string, tail: integer = None, head: integer = None)"},
		{`{"properties":{"z":{"type":["string","null"]},"a":{}},"required":["a","z"]}`, "read_file(z: string | null, a: any)"},
		{`{"type":"object"}`, "read_file()"},
		{`not json`, "read_file()"},
	}
	for _, c := range cases {
		if got := Signature("read_file", json.RawMessage(c.schema)); got != c.want {
			t.Errorf("Signature(%s) = %q, want %q", c.schema, got, c.want)
		}
	}
}

// FuzzSignature checks that any schema renders without panicking, as one
// line of the form alias(...) with required parameters before optional ones.
func FuzzSignature(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"path":{"type":"string"},"n":{"type":"integer"}},"required":["path"]}`,
		`{"properties":{"a":{"type":["string","null"]}},"required":["a","a","b"]}`,
		`{"properties":[1,2]}`, `{"properties":{"x":5}}`, `null`, `{`, `{"properties":{"\n":{}}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, schema string) {
		got := Signature("tool", json.RawMessage(schema))
		if !strings.HasPrefix(got, "tool(") || !strings.HasSuffix(got, ")") {
			t.Fatalf("Signature(%q) = %q", schema, got)
		}
		inner := strings.TrimSuffix(strings.TrimPrefix(got, "tool("), ")")
		seenOptional := false
		for _, p := range splitParams(inner) {
			optional := strings.HasSuffix(p, " = None")
			if seenOptional && !optional {
				t.Fatalf("Signature(%q) = %q: a required parameter after an optional one", schema, got)
			}
			seenOptional = seenOptional || optional
		}
	})
}

// splitParams splits a rendered parameter list; property names may contain
// ", " themselves, so it only splits where a type follows.
func splitParams(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	for _, p := range strings.Split(s, ", ") {
		if strings.Contains(p, ": ") || len(out) == 0 {
			out = append(out, p)
		} else {
			out[len(out)-1] += ", " + p
		}
	}
	return out
}

// TestCompile checks PXY-6: arguments are checked against a schema that
// compiles, the error names the most specific problem, and a schema that
// does not compile gives no validator.
func TestCompile(t *testing.T) {
	v := Compile(json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}`))
	if v == nil {
		t.Fatal("Compile: nil validator for a valid schema")
	}
	for _, c := range []struct {
		args string
		want string // "" for valid
	}{
		{`{"path":"a"}`, ""},
		{`{}`, "missing property 'path'"},
		{`{"path":1}`, "want string"},
		{`not json`, "arguments are not JSON"},
	} {
		err := v(json.RawMessage(c.args))
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("validate(%s) = %v, want %q", c.args, err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("validate(%s) = %q: more than one line", c.args, err)
		}
	}
	if got := Compile(json.RawMessage(`{"type":12}`)); got != nil {
		t.Error("Compile of a schema that does not compile: got a validator, want nil")
	}
}
