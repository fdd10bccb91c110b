package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// maxDepth bounds how deep ArgNames follows subschemas and $refs; a schema
// nested deeper is open (its names are not all known), so nothing is
// refused on a guess.
const maxDepth = 32

// maxRefs bounds the distinct $refs ArgNames follows: each resolves from
// the root, so a schema of many refs (a hostile server's) costs at most
// maxRefs passes over it; one with more is open.
const maxRefs = 64

// Names is what an input schema says about argument names (issue 35).
type Names struct {
	// Declared lists every property name the schema declares, at its top
	// and in the subschemas reached through allOf, anyOf, oneOf, if, then,
	// else, dependentSchemas, dependencies and local $refs; first
	// occurrence first, each once.
	Declared []string
	// Closed says an argument not in Declared is refused: the top level
	// declares properties, and no schema reached lets other names through
	// (additionalProperties or unevaluatedProperties other than false,
	// non-empty patternProperties, a $ref that is not local or does not
	// resolve, $dynamicRef, $recursiveRef, nesting past maxDepth).
	// A false additionalProperties or unevaluatedProperties closes no less
	// than their absence: JSON Schema refuses those names anyway, and the
	// bridge's message names them better.
	Closed bool
}

// ArgNames collects the argument names schema declares and whether it
// refuses the others. A schema that is not an object, or has no top-level
// properties (the bridge's default {"type": "object"} for a tool without
// one), is open.
func ArgNames(schema json.RawMessage) Names {
	w := &walker{root: schema, seen: map[string]bool{}, refs: map[string]bool{}}
	top, ok := object(schema)
	if !ok {
		return Names{}
	}
	_, hasProps := object(top["properties"])
	w.walk(top, 0)
	return Names{Declared: w.declared, Closed: hasProps && !w.open}
}

type walker struct {
	root     json.RawMessage
	declared []string
	seen     map[string]bool // in declared
	refs     map[string]bool // $refs followed once already: their names are in declared
	open     bool
}

// walk adds the names node declares and notes whatever lets other names
// through.
func (w *walker) walk(node map[string]json.RawMessage, depth int) {
	if depth > maxDepth {
		w.open = true
		return
	}
	for _, p := range orderedProps(node["properties"]) { // none when it is not an object
		if !w.seen[p.key] {
			w.seen[p.key] = true
			w.declared = append(w.declared, p.key)
		}
	}
	for _, k := range []string{"additionalProperties", "unevaluatedProperties"} {
		if v, ok := node[k]; ok && !isFalse(v) {
			w.open = true
		}
	}
	if pp, ok := node["patternProperties"]; ok {
		if m, isObj := object(pp); !isObj || len(m) > 0 {
			w.open = true
		}
	}
	if _, ok := node["$dynamicRef"]; ok {
		w.open = true
	}
	if _, ok := node["$recursiveRef"]; ok {
		w.open = true
	}
	for _, k := range []string{"allOf", "anyOf", "oneOf"} {
		var subs []json.RawMessage
		if json.Unmarshal(node[k], &subs) == nil {
			for _, s := range subs {
				w.sub(s, depth)
			}
		}
	}
	for _, k := range []string{"if", "then", "else"} {
		w.sub(node[k], depth)
	}
	for _, k := range []string{"dependentSchemas", "dependencies"} {
		for _, p := range orderedProps(node[k]) {
			w.sub(p.value, depth) // dependencies' name lists are arrays: sub skips them
		}
	}
	if raw, ok := node["$ref"]; ok {
		w.ref(raw, depth)
	}
}

// sub walks a subschema; a boolean schema (or any non-object) declares no
// names.
func (w *walker) sub(raw json.RawMessage, depth int) {
	if m, ok := object(raw); ok {
		w.walk(m, depth+1)
	}
}

// ref follows a local $ref ("#", "#/$defs/x", "#/definitions/x", any JSON
// pointer into the root document); any other leaves the names unknown.
func (w *walker) ref(raw json.RawMessage, depth int) {
	var ref string
	if json.Unmarshal(raw, &ref) != nil {
		w.open = true
		return
	}
	if w.refs[ref] {
		return
	}
	if len(w.refs) >= maxRefs {
		w.open = true
		return
	}
	w.refs[ref] = true
	target, ok := w.resolve(ref)
	if !ok {
		w.open = true
		return
	}
	if m, isObj := object(target); isObj {
		w.walk(m, depth+1)
	}
}

// resolve is the value a local JSON-pointer $ref names in the root
// document.
func (w *walker) resolve(ref string) (json.RawMessage, bool) {
	frag, ok := strings.CutPrefix(ref, "#")
	if !ok || (frag != "" && !strings.HasPrefix(frag, "/")) {
		return nil, false // another document, or an $anchor
	}
	frag, err := url.PathUnescape(frag)
	if err != nil {
		return nil, false
	}
	cur := w.root
	if frag == "" {
		return cur, true
	}
	for _, tok := range strings.Split(frag[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		if m, isObj := object(cur); isObj {
			if cur, ok = m[tok]; !ok {
				return nil, false
			}
			continue
		}
		var arr []json.RawMessage
		i, err := strconv.Atoi(tok)
		if json.Unmarshal(cur, &arr) != nil || err != nil || i < 0 || i >= len(arr) {
			return nil, false
		}
		cur = arr[i]
	}
	return cur, true
}

// object decodes raw as a JSON object; false for anything else.
func object(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return nil, false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return nil, false
	}
	return m, true
}

func isFalse(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "false"
}

// Checker checks a tool call's arguments against the tool's input schema
// (PXY-6): their names first (issue 35), then JSON Schema. Built once per
// tool; safe for concurrent use.
type Checker struct {
	signature string // rendered once: every message shows it
	names     Names
	declared  map[string]bool // names.Declared as a set
	required  []string
	valid     func(json.RawMessage) error // nil: the schema does not compile
}

// New is the checker of the tool shown to Python as alias.
func New(alias string, schema json.RawMessage) *Checker {
	c := &Checker{signature: Signature(alias, schema), valid: Compile(schema), names: ArgNames(schema), declared: map[string]bool{}}
	for _, d := range c.names.Declared {
		c.declared[d] = true
	}
	var s struct {
		Required []any `json:"required"`
	}
	_ = json.Unmarshal(schema, &s)
	for _, r := range s.Required {
		if name, ok := r.(string); ok {
			c.required = append(c.required, name)
		}
	}
	return c
}

// Check refuses args when the schema does: an undeclared argument (when
// the names are Closed), then a missing required one, then whatever JSON
// Schema refuses. closest picks the declared name nearest a wrong one, ""
// for none (search.Suggest in the bridge; this package imports no other
// part of it). A schema that does not compile checks nothing (PXY-6), not
// even names: what it declares is not known for sure.
//
// The error's text is the reason and the signature, one line; the caller
// adds which tool it was.
func (c *Checker) Check(args json.RawMessage, closest func(name string, candidates []string) string) error {
	if c.valid == nil {
		return nil
	}
	if !json.Valid(args) {
		return c.valid(args) // "arguments are not JSON"
	}
	given := map[string]bool{}
	keys := orderedProps(args)
	for _, k := range keys {
		given[k.key] = true
	}
	e := &ArgError{Signature: c.signature}
	if c.names.Closed {
		for _, k := range keys {
			if c.declared[k.key] {
				continue
			}
			e.Total++
			if len(e.Unexpected) < maxNamed {
				e.Unexpected = append(e.Unexpected, k.key)
			}
		}
		if e.Total > 0 {
			var free []string // declared but not given: what a wrong name may have meant
			for _, d := range c.names.Declared {
				if !given[d] {
					free = append(free, d)
				}
			}
			for _, name := range e.Unexpected {
				e.Closest = append(e.Closest, closest(name, free))
			}
			return e
		}
	}
	for _, r := range c.required {
		if !given[r] {
			e.Missing = append(e.Missing, r)
		}
	}
	if len(e.Missing) > 0 {
		return e
	}
	if err := c.valid(args); err != nil {
		return fmt.Errorf("%w; expected: %s", err, e.Signature)
	}
	return nil
}

// maxNamed bounds the unexpected arguments a message names.
const maxNamed = 10

// ArgError is a call refused for its argument names: undeclared ones, each
// with the declared name closest to it, or missing required ones.
type ArgError struct {
	Unexpected []string
	Closest    []string // parallel to Unexpected; "" when no declared name is close
	Total      int      // unexpected arguments, named or not
	Missing    []string
	Signature  string
}

// Error is the reason, then the signature:
//
//	unexpected argument 'heads'; did you mean 'head'? read_text_file(path: string, head: number = None)
//	unexpected arguments 'heads' (did you mean 'head'?), 'x'; read_text_file(...)
//	missing required argument 'path'; read_text_file(...)
func (e *ArgError) Error() string {
	var b strings.Builder
	switch {
	case len(e.Unexpected) == 1 && e.Total == 1:
		fmt.Fprintf(&b, "unexpected argument %s", quote(e.Unexpected[0]))
		if e.Closest[0] != "" {
			fmt.Fprintf(&b, "; did you mean %s? ", quote(e.Closest[0]))
		} else {
			b.WriteString("; ")
		}
	case len(e.Unexpected) > 0:
		b.WriteString("unexpected arguments ")
		for i, name := range e.Unexpected {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(quote(name))
			if e.Closest[i] != "" {
				fmt.Fprintf(&b, " (did you mean %s?)", quote(e.Closest[i]))
			}
		}
		if more := e.Total - len(e.Unexpected); more > 0 {
			fmt.Fprintf(&b, " and %d more", more)
		}
		b.WriteString("; ")
	case len(e.Missing) == 1:
		fmt.Fprintf(&b, "missing required argument %s; ", quote(e.Missing[0]))
	default:
		quoted := make([]string, len(e.Missing))
		for i, m := range e.Missing {
			quoted[i] = quote(m)
		}
		fmt.Fprintf(&b, "missing required arguments %s; ", strings.Join(quoted, ", "))
	}
	b.WriteString(e.Signature)
	return b.String()
}

// maxQuoted bounds the runes of a name a message repeats: the sandbox's
// code chose it, and it may be any length.
const maxQuoted = 64

// quote is a name as a message shows it: in single quotes when it is plain
// printable text, else Go-quoted so control characters are escapes; cut
// after maxQuoted runes.
func quote(name string) string {
	cut := name
	if utf8.RuneCountInString(name) > maxQuoted {
		cut = string([]rune(name)[:maxQuoted]) + "..."
	}
	for _, r := range cut {
		if !unicode.IsPrint(r) || r == '\'' || r == utf8.RuneError {
			return strconv.Quote(cut)
		}
	}
	return "'" + cut + "'"
}
