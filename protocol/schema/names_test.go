package schema

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestArgNames checks the declared names a schema gives and whether it
// refuses the others (issue 35): every case of the rule, each keyword that
// opens a schema, names declared only in allOf/anyOf/oneOf/$ref, and the
// bounds on $refs.
func TestArgNames(t *testing.T) {
	cases := []struct {
		name, schema string
		declared     []string
		closed       bool
	}{
		{"properties, nothing else", `{"type":"object","properties":{"path":{},"head":{}},"required":["path"]}`, []string{"path", "head"}, true},
		{"empty properties", `{"type":"object","properties":{}}`, nil, true},
		{"no properties (the bridge's default)", `{"type":"object"}`, nil, false},
		{"no properties, allOf declares some", `{"type":"object","allOf":[{"properties":{"a":{}}}]}`, []string{"a"}, false},
		{"properties not an object", `{"properties":[1]}`, nil, false},
		{"additionalProperties true", `{"properties":{"a":{}},"additionalProperties":true}`, []string{"a"}, false},
		{"additionalProperties a schema", `{"properties":{"a":{}},"additionalProperties":{"type":"string"}}`, []string{"a"}, false},
		{"additionalProperties false", `{"properties":{"a":{}},"additionalProperties":false}`, []string{"a"}, true},
		{"patternProperties", `{"properties":{"a":{}},"patternProperties":{"^x_":{}}}`, []string{"a"}, false},
		{"patternProperties empty", `{"properties":{"a":{}},"patternProperties":{}}`, []string{"a"}, true},
		{"unevaluatedProperties a schema", `{"properties":{"a":{}},"unevaluatedProperties":{}}`, []string{"a"}, false},
		{"unevaluatedProperties false", `{"properties":{"a":{}},"unevaluatedProperties":false}`, []string{"a"}, true},
		{"allOf", `{"properties":{"a":{}},"allOf":[{"properties":{"b":{}}},true]}`, []string{"a", "b"}, true},
		{"anyOf", `{"properties":{"a":{}},"anyOf":[{"properties":{"b":{}}},{"properties":{"c":{}}}]}`, []string{"a", "b", "c"}, true},
		{"oneOf", `{"properties":{"a":{}},"oneOf":[{"properties":{"b":{},"a":{}}}]}`, []string{"a", "b"}, true},
		{"nested combinators", `{"properties":{"a":{}},"allOf":[{"anyOf":[{"oneOf":[{"properties":{"deep":{}}}]}]}]}`, []string{"a", "deep"}, true},
		{"a subschema opens it", `{"properties":{"a":{}},"anyOf":[{"properties":{"b":{}},"additionalProperties":true}]}`, []string{"a", "b"}, false},
		{"a subschema's patternProperties", `{"properties":{"a":{}},"allOf":[{"patternProperties":{".":{}}}]}`, []string{"a"}, false},
		{"$ref to $defs", `{"properties":{"a":{}},"$ref":"#/$defs/More","$defs":{"More":{"properties":{"b":{}}}}}`, []string{"a", "b"}, true},
		{"$ref to definitions", `{"properties":{"a":{}},"allOf":[{"$ref":"#/definitions/M"}],"definitions":{"M":{"properties":{"b":{}}}}}`, []string{"a", "b"}, true},
		{"$ref chain", `{"properties":{"a":{}},"$ref":"#/$defs/X","$defs":{"X":{"$ref":"#/$defs/Y"},"Y":{"properties":{"y":{}}}}}`, []string{"a", "y"}, true},
		{"$ref escaped pointer", `{"properties":{"a":{}},"$ref":"#/$defs/a~1b%20c","$defs":{"a/b c":{"properties":{"b":{}}}}}`, []string{"a", "b"}, true},
		{"$ref into an array", `{"properties":{"a":{}},"$ref":"#/$defs/L/1","$defs":{"L":[{},{"properties":{"b":{}}}]}}`, []string{"a", "b"}, true},
		{"$ref cycle", `{"properties":{"a":{}},"$ref":"#/$defs/X","$defs":{"X":{"properties":{"x":{}},"$ref":"#"}}}`, []string{"a", "x"}, true},
		{"$ref missing", `{"properties":{"a":{}},"$ref":"#/$defs/Nope"}`, []string{"a"}, false},
		{"$ref remote", `{"properties":{"a":{}},"$ref":"https://example.com/s.json"}`, []string{"a"}, false},
		{"$ref anchor", `{"properties":{"a":{}},"$ref":"#thing"}`, []string{"a"}, false},
		{"$ref not a string", `{"properties":{"a":{}},"$ref":5}`, []string{"a"}, false},
		{"$dynamicRef", `{"properties":{"a":{}},"$dynamicRef":"#meta"}`, []string{"a"}, false},
		{"$defs alone declare nothing", `{"properties":{"a":{}},"$defs":{"X":{"properties":{"b":{}}}}}`, []string{"a"}, true},
		{"if then else", `{"properties":{"a":{}},"if":{"properties":{"i":{}}},"then":{"properties":{"t":{}}},"else":{"properties":{"e":{}}}}`, []string{"a", "i", "t", "e"}, true},
		{"dependentSchemas", `{"properties":{"a":{}},"dependentSchemas":{"a":{"properties":{"d":{}}}}}`, []string{"a", "d"}, true},
		{"dependencies", `{"properties":{"a":{}},"dependencies":{"a":["b"],"c":{"properties":{"d":{}}}}}`, []string{"a", "d"}, true},
		{"not an object", `true`, nil, false},
		{"not JSON", `{`, nil, false},
		{"null", `null`, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ArgNames(json.RawMessage(c.schema))
			if !slices.Equal(got.Declared, c.declared) || got.Closed != c.closed {
				t.Errorf("ArgNames(%s)\n got: %q closed=%v\nwant: %q closed=%v", c.schema, got.Declared, got.Closed, c.declared, c.closed)
			}
		})
	}
}

// TestArgNamesDepth checks that nesting past maxDepth, a chain of $refs as
// long, or more than maxRefs distinct $refs leave the names unknown (open),
// and that each is followed up to its bound.
func TestArgNamesDepth(t *testing.T) {
	nest := func(n int) string {
		s := `{"properties":{"deep":{}}}`
		for range n {
			s = `{"allOf":[` + s + `]}`
		}
		return `{"properties":{"a":{}},"allOf":[` + s + `]}`
	}
	if got := ArgNames(json.RawMessage(nest(maxDepth - 1))); !got.Closed || !slices.Contains(got.Declared, "deep") {
		t.Errorf("nesting within the bound: %+v, want closed with deep", got)
	}
	if got := ArgNames(json.RawMessage(nest(maxDepth + 1))); got.Closed {
		t.Errorf("nesting past the bound: %+v, want open", got)
	}
	var defs []string
	for i := range maxDepth + 2 {
		defs = append(defs, fmt.Sprintf(`"d%d":{"$ref":"#/$defs/d%d"}`, i, i+1))
	}
	chain := `{"properties":{"a":{}},"$ref":"#/$defs/d0","$defs":{` + strings.Join(defs, ",") + `,"d` + fmt.Sprint(maxDepth+2) + `":{}}}`
	if got := ArgNames(json.RawMessage(chain)); got.Closed {
		t.Errorf("a $ref chain past the bound: %+v, want open", got)
	}
	many := func(n int) string {
		var refs, defs []string
		for i := range n {
			refs = append(refs, fmt.Sprintf(`{"$ref":"#/$defs/d%d"}`, i))
			defs = append(defs, fmt.Sprintf(`"d%d":{"properties":{"p%d":{}}}`, i, i))
		}
		return `{"properties":{"a":{}},"allOf":[` + strings.Join(refs, ",") + `],"$defs":{` + strings.Join(defs, ",") + `}}`
	}
	if got := ArgNames(json.RawMessage(many(maxRefs))); !got.Closed || len(got.Declared) != maxRefs+1 {
		t.Errorf("%d distinct $refs: closed=%v with %d names, want closed with %d", maxRefs, got.Closed, len(got.Declared), maxRefs+1)
	}
	if got := ArgNames(json.RawMessage(many(maxRefs + 1))); got.Closed {
		t.Errorf("%d distinct $refs: closed, want open", maxRefs+1)
	}
}

// closestForTest stands in for search.Suggest: a candidate that shares the
// name's first two letters.
func closestForTest(name string, candidates []string) string {
	for _, c := range candidates {
		if len(name) >= 2 && strings.HasPrefix(c, name[:2]) {
			return c
		}
	}
	return ""
}

const readText = `{"type":"object","properties":{"path":{"type":"string"},"tail":{"type":"number"},"head":{"type":"number"}},"required":["path"]}`

// TestCheck checks the refusal rule and the messages: an undeclared name
// is refused only when the schema is closed, named with its closest free
// declared name and the signature; then missing required names; then JSON
// Schema's reason with "expected:".
func TestCheck(t *testing.T) {
	const sig = "read_text_file(path: string, tail: number = None, head: number = None)"
	cases := []struct {
		name, schema, args, want string // want "" for accepted
	}{
		{"declared names", readText, `{"path":"a","head":2}`, ""},
		{"a misspelt name", readText, `{"path":"a","heads":2}`, "unexpected argument 'heads'; did you mean 'head'? " + sig},
		{"no close name", readText, `{"path":"a","zzz":2}`, "unexpected argument 'zzz'; " + sig},
		{"the close name is given already", readText, `{"path":"a","head":1,"heads":2}`, "unexpected argument 'heads'; " + sig},
		{"a misspelt required name", readText, `{"pat":"a"}`, "unexpected argument 'pat'; did you mean 'path'? " + sig},
		{"several", readText, `{"path":"a","heads":2,"zzz":1}`, "unexpected arguments 'heads' (did you mean 'head'?), 'zzz'; " + sig},
		{"missing required", readText, `{"head":2}`, "missing required argument 'path'; " + sig},
		{"missing several", `{"properties":{"a":{"type":"number"},"b":{"type":"number"}},"required":["a","b"]}`, `{}`,
			"missing required arguments 'a', 'b'; add(a: number, b: number)"},
		{"wrong type", readText, `{"path":1}`, "at '/path': got number, want string; expected: " + sig},
		{"additionalProperties true", `{"properties":{"a":{}},"additionalProperties":true}`, `{"b":1}`, ""},
		{"additionalProperties false", `{"properties":{"a":{}},"additionalProperties":false}`, `{"b":1}`, "unexpected argument 'b'; add(a: any = None)"},
		{"patternProperties", `{"properties":{"a":{}},"patternProperties":{"^b":{}}}`, `{"b":1}`, ""},
		{"unevaluatedProperties", `{"properties":{"a":{}},"unevaluatedProperties":{"type":"number"}}`, `{"b":1}`, ""},
		{"no properties", `{"type":"object"}`, `{"anything":1}`, ""},
		{"declared in allOf", `{"properties":{"a":{}},"allOf":[{"properties":{"b":{}}}]}`, `{"b":1}`, ""},
		{"declared in anyOf", `{"properties":{"a":{}},"anyOf":[{"properties":{"b":{}}}]}`, `{"b":1}`, ""},
		{"declared in oneOf", `{"properties":{"a":{}},"oneOf":[{"properties":{"b":{}}}]}`, `{"b":1}`, ""},
		{"declared through $ref", `{"properties":{"a":{}},"$ref":"#/$defs/B","$defs":{"B":{"properties":{"b":{}}}}}`, `{"b":1}`, ""},
		{"not declared in the subschemas either", `{"properties":{"a":{}},"allOf":[{"properties":{"b":{}}}]}`, `{"c":1}`, "unexpected argument 'c'; add(a: any = None)"},
		{"a schema that does not compile checks nothing", `{"type":12,"properties":{"a":{}}}`, `{"c":1}`, ""},
		{"a quote in a name", readText, `{"path":"a","it's":1}`, `unexpected argument "it's"; ` + sig},
		{"a control character in a name", readText, `{"path":"a","x\ny":1}`, `unexpected argument "x\ny"; ` + sig},
		{"not JSON", readText, `{`, "arguments are not JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			alias := "read_text_file"
			if !strings.Contains(c.schema, "path") {
				alias = "add"
			}
			err := New(alias, json.RawMessage(c.schema)).Check(json.RawMessage(c.args), closestForTest)
			switch {
			case c.want == "" && err != nil:
				t.Errorf("Check(%s)\n got: %v\nwant: accepted", c.args, err)
			case c.want != "" && err == nil:
				t.Errorf("Check(%s) accepted, want %q", c.args, c.want)
			case c.want != "" && c.name == "not JSON" && !strings.HasPrefix(err.Error(), c.want):
				t.Errorf("Check(%s)\n got: %v\nwant: %s...", c.args, err, c.want)
			case c.want != "" && c.name != "not JSON" && err.Error() != c.want:
				t.Errorf("Check(%s)\n got: %v\nwant: %s", c.args, err, c.want)
			}
		})
	}
}

// TestCheckManyUnexpected checks that a message names at most maxNamed
// unexpected arguments and counts the rest, and cuts a long name.
func TestCheckManyUnexpected(t *testing.T) {
	var args []string
	for i := range maxNamed + 5 {
		args = append(args, fmt.Sprintf(`"x%d":1`, i))
	}
	err := New("t", json.RawMessage(`{"properties":{}}`)).Check(json.RawMessage("{"+strings.Join(args, ",")+"}"), closestForTest)
	var ae *ArgError
	if !errors.As(err, &ae) || ae.Total != maxNamed+5 || len(ae.Unexpected) != maxNamed {
		t.Fatalf("Check: %v, want an ArgError naming %d of %d", err, maxNamed, maxNamed+5)
	}
	if want := "'x9' and 5 more; t()"; !strings.HasSuffix(err.Error(), want) {
		t.Errorf("Check: %q, want it ending %q", err, want)
	}
	long := strings.Repeat("y", 500)
	err = New("t", json.RawMessage(`{"properties":{}}`)).Check(json.RawMessage(`{"`+long+`":1}`), closestForTest)
	if want := "unexpected argument '" + strings.Repeat("y", maxQuoted) + "...'; t()"; err == nil || err.Error() != want {
		t.Errorf("Check of a long name: %v, want %q", err, want)
	}
}
