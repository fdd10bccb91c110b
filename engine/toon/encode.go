package toon

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// maxEncodeDepth bounds the nesting Encode accepts. Indentation makes the
// output grow with the square of the depth, and a cyclic Go value would
// otherwise recurse forever.
const maxEncodeDepth = 1000

// KeyFolding selects key folding (TOON §13.4).
type KeyFolding string

// Key folding modes. The zero value means KeyFoldingOff.
const (
	KeyFoldingOff  KeyFolding = "off"
	KeyFoldingSafe KeyFolding = "safe"
)

// Options are the encoder options of TOON §13. The zero value gives the spec
// defaults: indent 2, comma delimiter, no key folding.
type Options struct {
	// Indent is the number of spaces per level; 0 means 2.
	Indent int
	// Delimiter is the document delimiter: ',', '\t' or '|'; 0 means ','.
	Delimiter rune
	// KeyFolding is KeyFoldingOff (or "") or KeyFoldingSafe.
	KeyFolding KeyFolding
	// FlattenDepth is the most segments a folded key may have. 0 means no
	// limit, the spec's default of Infinity; 1 (like the spec's 0 and 1)
	// folds nothing.
	FlattenDepth int
}

// Encode renders v as a TOON document without a trailing newline. v is a tree
// of Object, map[string]any (keys sorted), []any, []string, string, bool, nil,
// json.Number and any int, uint or float kind. Numbers are canonical (§2):
// json.Number keeps all its digits, floats use their shortest round-tripping
// digits, NaN and ±Inf become null; magnitudes outside [1e-6, 1e21) use
// exponent form (1e+21). Invalid UTF-8 becomes U+FFFD. A repeated Object key
// keeps its first position and its last value. Trees nested deeper than 1000
// levels, and so cyclic values, are refused.
func Encode(v any, opts Options) (string, error) {
	e, err := newEncoder(opts)
	if err != nil {
		return "", err
	}
	n, err := normalize(v, 0)
	if err != nil {
		return "", fmt.Errorf("toon: encode: %w", err)
	}
	switch {
	case n.isPrimitive():
		e.b.WriteString(e.primitive(n, e.delim))
	case n.kind == kindArray:
		e.array("", false, n, 0)
	default:
		var rootLiteral map[string]bool
		if e.fold {
			// Folded keys must not equal a dotted literal key at the root, so
			// that path expansion on decode cannot merge the two.
			for _, p := range n.obj {
				if strings.Contains(p.key, ".") {
					if rootLiteral == nil {
						rootLiteral = make(map[string]bool)
					}
					rootLiteral[p.key] = true
				}
			}
		}
		e.object(n, 0, foldScope{rootLiteral: rootLiteral, budget: e.flatten})
	}
	return e.b.String(), nil
}

// encoder writes lines into b; every line but the first starts with '\n'.
type encoder struct {
	b       strings.Builder
	indent  int
	delim   byte
	fold    bool
	flatten int // maximum folded segments, math.MaxInt for no limit
}

func newEncoder(opts Options) (*encoder, error) {
	e := &encoder{indent: opts.Indent, delim: ',', flatten: opts.FlattenDepth}
	if e.indent == 0 {
		e.indent = 2
	}
	if e.indent < 0 {
		return nil, fmt.Errorf("toon: indent %d is negative", opts.Indent)
	}
	switch opts.Delimiter {
	case 0, ',':
	case '\t', '|':
		e.delim = byte(opts.Delimiter)
	default:
		return nil, fmt.Errorf("toon: delimiter %q is not ',', '\\t' or '|'", opts.Delimiter)
	}
	switch opts.KeyFolding {
	case "", KeyFoldingOff:
	case KeyFoldingSafe:
		e.fold = true
	default:
		return nil, fmt.Errorf("toon: key folding %q is not %q or %q", opts.KeyFolding, KeyFoldingOff, KeyFoldingSafe)
	}
	if e.flatten <= 0 {
		e.flatten = math.MaxInt
	}
	return e, nil
}

// line starts a new line at depth and writes s.
func (e *encoder) line(depth int, s string) {
	if e.b.Len() > 0 {
		e.b.WriteByte('\n')
	}
	for range depth * e.indent {
		e.b.WriteByte(' ')
	}
	e.b.WriteString(s)
}

// listItem starts a new line at depth holding "- " and s.
func (e *encoder) listItem(depth int, s string) { e.line(depth, "- "+s) }

// foldScope carries the key folding state down nested objects: the dotted
// literal keys of the root object, the folded path from the root, and the
// segments still allowed to fold.
type foldScope struct {
	rootLiteral map[string]bool
	prefix      string
	budget      int
}

func (s foldScope) child(key string, budget int) foldScope {
	p := key
	if s.prefix != "" {
		p = s.prefix + "." + key
	}
	return foldScope{rootLiteral: s.rootLiteral, prefix: p, budget: budget}
}

// object writes the fields of obj at depth.
func (e *encoder) object(obj *node, depth int, scope foldScope) {
	e.fields(obj.obj, obj.obj, depth, scope)
}

// fields writes fields at depth. siblings are all keys of the object the
// fields belong to, for folding collision checks.
func (e *encoder) fields(fields, siblings []pair, depth int, scope foldScope) {
	for _, p := range fields {
		e.field(p.key, p.val, depth, siblings, scope)
	}
}

// field writes one key and its value at depth, folding the key when allowed.
func (e *encoder) field(key string, val *node, depth int, siblings []pair, scope foldScope) {
	if e.fold {
		if f, ok := e.tryFold(key, val, siblings, scope); ok {
			fk := encodeKey(f.key)
			switch {
			case f.rest != nil:
				e.line(depth, fk+":")
				e.object(f.rest, depth+1, scope.child(f.key, scope.budget-f.segments))
			case f.leaf.isPrimitive():
				e.line(depth, fk+": "+e.primitive(f.leaf, e.delim))
			case f.leaf.kind == kindArray:
				e.array(f.key, true, f.leaf, depth)
			default: // an empty object
				e.line(depth, fk+":")
			}
			return
		}
	}
	switch {
	case val.isPrimitive():
		e.line(depth, encodeKey(key)+": "+e.primitive(val, e.delim))
	case val.kind == kindArray:
		e.array(key, true, val, depth)
	default:
		e.line(depth, encodeKey(key)+":")
		e.object(val, depth+1, scope.child(key, scope.budget))
	}
}

// folded is a key chain folded into one dotted key. Either rest is the
// non-empty object still to write below the key, or leaf is the value.
type folded struct {
	key      string
	segments int
	leaf     *node
	rest     *node
}

// tryFold folds a chain of single-key objects starting at key (§13.4, safe
// mode): at least two segments, each an IdentifierSegment, at most
// scope.budget of them, and a result equal to no sibling key and to no dotted
// literal key of the root.
func (e *encoder) tryFold(key string, val *node, siblings []pair, scope foldScope) (folded, bool) {
	if val.kind != kindObject {
		return folded{}, false
	}
	segs := []string{key}
	cur := val
	for len(segs) < scope.budget && cur.kind == kindObject && len(cur.obj) == 1 {
		segs = append(segs, cur.obj[0].key)
		cur = cur.obj[0].val
	}
	if len(segs) < 2 {
		return folded{}, false
	}
	for _, s := range segs {
		if !isIdentifierSegment(s) {
			return folded{}, false
		}
	}
	fk := strings.Join(segs, ".")
	for _, p := range siblings {
		if p.key == fk {
			return folded{}, false
		}
	}
	abs := fk
	if scope.prefix != "" {
		abs = scope.prefix + "." + fk
	}
	if scope.rootLiteral[abs] {
		return folded{}, false
	}
	f := folded{key: fk, segments: len(segs), leaf: cur}
	if cur.kind == kindObject && len(cur.obj) > 0 {
		f.rest, f.leaf = cur, nil
	}
	return f, true
}

// array writes arr under key (hasKey) or as a root array at depth (§9).
func (e *encoder) array(key string, hasKey bool, arr *node, depth int) {
	prefix := ""
	if hasKey {
		prefix = encodeKey(key)
	}
	if len(arr.arr) == 0 {
		if hasKey {
			e.line(depth, prefix+": []")
		} else {
			e.line(depth, "[]")
		}
		return
	}
	if allPrimitive(arr.arr) {
		e.line(depth, prefix+e.inlineArray(arr.arr))
		return
	}
	if allPrimitiveArrays(arr.arr) {
		e.line(depth, prefix+e.header(len(arr.arr), nil))
		for _, inner := range arr.arr {
			e.listItem(depth+1, e.inlineArray(inner.arr))
		}
		return
	}
	if cols, ok := tabularColumns(arr.arr); ok {
		e.line(depth, prefix+e.header(len(arr.arr), cols))
		e.rows(arr.arr, cols, depth+1)
		return
	}
	e.line(depth, prefix+e.header(len(arr.arr), nil))
	for _, item := range arr.arr {
		e.listValue(item, depth+1)
	}
}

// listValue writes one element of an expanded list as a list item at depth.
func (e *encoder) listValue(item *node, depth int) {
	switch {
	case item.isPrimitive():
		e.listItem(depth, e.primitive(item, e.delim))
	case item.kind == kindArray:
		if allPrimitive(item.arr) {
			e.listItem(depth, e.inlineArray(item.arr))
			return
		}
		// Tabular form has no place on a hyphen line (§9.4): nested lists only.
		e.listItem(depth, e.header(len(item.arr), nil))
		for _, sub := range item.arr {
			e.listValue(sub, depth+1)
		}
	default:
		e.listObject(item, depth)
	}
}

// listObject writes an object as a list item at depth (§10): the first field
// goes on the hyphen line and the others at depth+1. The first field's own
// content sits at depth+2, as if the field were at depth+1.
func (e *encoder) listObject(obj *node, depth int) {
	if len(obj.obj) == 0 {
		e.line(depth, "-")
		return
	}
	first := obj.obj[0]
	key, val := encodeKey(first.key), first.val
	switch {
	case val.isPrimitive():
		e.listItem(depth, key+": "+e.primitive(val, e.delim))
	case val.kind == kindArray:
		if len(val.arr) == 0 {
			e.listItem(depth, key+": []")
			break
		}
		if allPrimitive(val.arr) {
			e.listItem(depth, key+e.inlineArray(val.arr))
			break
		}
		if cols, ok := tabularColumns(val.arr); ok {
			e.listItem(depth, key+e.header(len(val.arr), cols))
			e.rows(val.arr, cols, depth+2)
			break
		}
		e.listItem(depth, key+e.header(len(val.arr), nil))
		for _, item := range val.arr {
			e.listValue(item, depth+2)
		}
	default:
		e.listItem(depth, key+":")
		e.object(val, depth+2, foldScope{budget: e.flatten})
	}
	// Sibling checks see every key of the object, the first one included, so a
	// folded key never repeats it.
	e.fields(obj.obj[1:], obj.obj, depth+1, foldScope{budget: e.flatten})
}

// rows writes one tabular row per object at depth.
func (e *encoder) rows(objs []*node, cols []string, depth int) {
	cells := make([]string, len(cols))
	for _, o := range objs {
		for i, v := range columnValues(o, cols) {
			cells[i] = e.primitive(v, e.delim)
		}
		e.line(depth, strings.Join(cells, string(e.delim)))
	}
}

// columnValues returns the values of o's fields named cols, in that order,
// or nil when one is missing. Wide objects use a map to stay linear.
func columnValues(o *node, cols []string) []*node {
	vals := make([]*node, len(cols))
	if len(cols) <= 8 {
		for i, c := range cols {
			for _, p := range o.obj {
				if p.key == c {
					vals[i] = p.val
					break
				}
			}
			if vals[i] == nil {
				return nil
			}
		}
		return vals
	}
	byKey := make(map[string]*node, len(o.obj))
	for _, p := range o.obj {
		byKey[p.key] = p.val
	}
	for i, c := range cols {
		if vals[i] = byKey[c]; vals[i] == nil {
			return nil
		}
	}
	return vals
}

// inlineArray returns "[N]: v1,v2" (or "[0]:" when empty) for primitives.
func (e *encoder) inlineArray(items []*node) string {
	h := e.header(len(items), nil)
	if len(items) == 0 {
		return h
	}
	vals := make([]string, len(items))
	for i, it := range items {
		vals[i] = e.primitive(it, e.delim)
	}
	return h + " " + strings.Join(vals, string(e.delim))
}

// header returns "[N]:" or "[N]{f1,f2}:" with the delimiter symbol for tab
// and pipe (§6).
func (e *encoder) header(n int, fields []string) string {
	var b strings.Builder
	b.WriteByte('[')
	b.WriteString(strconv.Itoa(n))
	if e.delim != ',' {
		b.WriteByte(e.delim)
	}
	b.WriteByte(']')
	if fields != nil {
		b.WriteByte('{')
		for i, f := range fields {
			if i > 0 {
				b.WriteByte(e.delim)
			}
			b.WriteString(encodeKey(f))
		}
		b.WriteByte('}')
	}
	b.WriteByte(':')
	return b.String()
}

// tabularColumns returns the field list when items qualify for tabular form
// (§9.3): all non-empty objects with the same key set and primitive values.
// The columns follow the first object's key order.
func tabularColumns(items []*node) ([]string, bool) {
	first := items[0]
	if first.kind != kindObject || len(first.obj) == 0 {
		return nil, false
	}
	cols := make([]string, len(first.obj))
	for i, p := range first.obj {
		cols[i] = p.key
	}
	for _, it := range items {
		if it.kind != kindObject || len(it.obj) != len(cols) {
			return nil, false
		}
		vals := columnValues(it, cols)
		if vals == nil || !allPrimitive(vals) {
			return nil, false
		}
	}
	return cols, true
}

func allPrimitive(items []*node) bool {
	for _, it := range items {
		if !it.isPrimitive() {
			return false
		}
	}
	return true
}

// allPrimitiveArrays reports whether every item is an array of primitives.
func allPrimitiveArrays(items []*node) bool {
	for _, it := range items {
		if it.kind != kindArray || !allPrimitive(it.arr) {
			return false
		}
	}
	return true
}

// primitive returns the token for a primitive node; delim is the delimiter
// that governs quoting where the token appears (§11.1).
func (e *encoder) primitive(n *node, delim byte) string {
	switch n.kind {
	case kindNull:
		return "null"
	case kindString:
		if isSafeUnquoted(n.text, delim) {
			return n.text
		}
		return quote(n.text)
	default:
		return n.text
	}
}
