// Package schema checks a tool call's arguments against the tool's input
// schema (PXY-6): the names first, refusing an argument the schema does not
// declare (names.go, issue 35), then JSON Schema. It renders the tool's
// Python-style signature for its messages.
package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Compile compiles a tool's input schema into a validator of arguments;
// nil when the schema does not compile (PXY-6 skips such schemas).
func Compile(schema json.RawMessage) func(json.RawMessage) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("tool.json", doc); err != nil {
		return nil
	}
	sch, err := c.Compile("tool.json")
	if err != nil {
		return nil
	}
	return func(args json.RawMessage) error {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
		if err != nil {
			return fmt.Errorf("arguments are not JSON: %w", err)
		}
		if err := sch.Validate(v); err != nil {
			return fmt.Errorf("%s", lastLine(err.Error()))
		}
		return nil
	}
}

// lastLine is the most specific line of a multi-line validation error.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimPrefix(strings.TrimSpace(lines[len(lines)-1]), "- ")
}

// Signature renders a tool's Python-style signature from its input schema:
// required parameters, then optional ones defaulting to None, each group in
// the schema's property order.
func Signature(alias string, schema json.RawMessage) string {
	var s struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	_ = json.Unmarshal(schema, &s)
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	var first, rest []string
	for _, p := range orderedProps(s.Properties) {
		var spec struct {
			Type any `json:"type"`
		}
		_ = json.Unmarshal(p.value, &spec)
		typ := "any"
		switch t := spec.Type.(type) {
		case string:
			typ = t
		case []any:
			parts := make([]string, len(t))
			for i, x := range t {
				parts[i] = fmt.Sprint(x)
			}
			typ = strings.Join(parts, " | ")
		}
		if req[p.key] {
			first = append(first, p.key+": "+typ)
		} else {
			rest = append(rest, p.key+": "+typ+" = None")
		}
	}
	return alias + "(" + strings.Join(append(first, rest...), ", ") + ")"
}

type prop struct {
	key   string
	value json.RawMessage
}

// orderedProps returns an object's members in their JSON order.
func orderedProps(obj json.RawMessage) []prop {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var out []prop
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return out
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return out
		}
		out = append(out, prop{key, v})
	}
	return out
}
