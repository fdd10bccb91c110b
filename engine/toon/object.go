// Package toon holds an ordered JSON tree and an encoder for TOON
// (Token-Oriented Object Notation), spec version 3.3 (@toon-format/spec 3.3.2).
//
// The ordered tree is Object for objects, []any for arrays, json.Number for
// numbers, string, bool and nil. DecodeJSON builds it from JSON bytes, Object
// marshals back to JSON in key order, and Encode renders any tree as TOON.
package toon

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"unicode/utf8"
)

// maxJSONDepth bounds the nesting DecodeJSON accepts, as encoding/json does.
const maxJSONDepth = 10000

// errTooDeep reports a tree nested deeper than the encoder or decoder accepts.
var errTooDeep = errors.New("nesting too deep")

// Field is one key and its value in an Object.
type Field struct {
	Key   string
	Value any
}

// Object is a JSON object that keeps its key order. Keys should be unique;
// Encode resolves duplicates like JavaScript does (the last value wins, at the
// position of the first occurrence), while MarshalJSON writes fields as given.
type Object []Field

// MarshalJSON writes o as compact JSON with its fields in order. Strings are
// escaped like encoding/json with HTML escaping off, numbers are in their
// canonical TOON form, and NaN or ±Inf become null. A nil Object is "{}".
func (o Object) MarshalJSON() ([]byte, error) {
	b, err := appendJSON(nil, o, 0)
	if err != nil {
		return nil, fmt.Errorf("toon: marshal object: %w", err)
	}
	return b, nil
}

// appendJSON appends the compact JSON form of v. It accepts the same types as
// Encode; depth counts the containers around v.
func appendJSON(b []byte, v any, depth int) ([]byte, error) {
	if depth > maxJSONDepth {
		return nil, errTooDeep
	}
	switch x := v.(type) {
	case Object:
		b = append(b, '{')
		for i, f := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, f.Key)
			b = append(b, ':')
			var err error
			if b, err = appendJSON(b, f.Value, depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case map[string]any:
		keys := sortedKeys(x)
		b = append(b, '{')
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, k)
			b = append(b, ':')
			var err error
			if b, err = appendJSON(b, x[k], depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, '}'), nil
	case []any:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			var err error
			if b, err = appendJSON(b, e, depth+1); err != nil {
				return nil, err
			}
		}
		return append(b, ']'), nil
	case []string:
		b = append(b, '[')
		for i, e := range x {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, e)
		}
		return append(b, ']'), nil
	case string:
		return appendJSONString(b, x), nil
	}
	n, err := normalizeScalar(v)
	if err != nil {
		return nil, err
	}
	switch n.kind {
	case kindNull:
		return append(b, "null"...), nil
	default: // kindBool, kindNumber: the token is valid JSON as is
		return append(b, n.text...), nil
	}
}

// appendJSONString appends s as a JSON string, escaped exactly like
// encoding/json with SetEscapeHTML(false): invalid UTF-8 becomes U+FFFD.
func appendJSONString(b []byte, s string) []byte {
	plain := true // printable ASCII other than '"' and '\\' needs no escape
	for i := 0; i < len(s) && plain; i++ {
		plain = s[i] >= 0x20 && s[i] < 0x7f && s[i] != '"' && s[i] != '\\'
	}
	if plain {
		b = append(b, '"')
		b = append(b, s...)
		return append(b, '"')
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	out := buf.Bytes()
	return append(b, out[:len(out)-1]...) // drop Encode's trailing newline
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// DecodeJSON decodes one JSON value into the ordered tree: objects become
// Object, arrays []any, numbers json.Number, and strings, booleans and null
// their Go forms. Duplicate keys keep the position of the first occurrence and
// the value of the last, as JavaScript does. Anything after the value other
// than white space is an error.
func DecodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeJSONValue(dec, 0)
	if err != nil {
		return nil, fmt.Errorf("toon: decode json: %w", err)
	}
	if tok, err := dec.Token(); !errors.Is(err, io.EOF) {
		if err == nil {
			err = fmt.Errorf("unexpected %v after the value", tok)
		}
		return nil, fmt.Errorf("toon: decode json: trailing data: %w", err)
	}
	return v, nil
}

func decodeJSONValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxJSONDepth {
		return nil, errTooDeep
	}
	tok, err := dec.Token()
	if err != nil {
		if err == io.EOF {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			obj := Object{}
			var index map[string]int // key → position in obj
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, ok := kt.(string)
				if !ok {
					return nil, fmt.Errorf("object key is %v, not a string", kt)
				}
				val, err := decodeJSONValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				if index == nil {
					index = make(map[string]int)
				}
				if i, dup := index[key]; dup {
					obj[i].Value = val
					continue
				}
				index[key] = len(obj)
				obj = append(obj, Field{Key: key, Value: val})
			}
			if _, err := dec.Token(); err != nil { // the closing '}'
				return nil, err
			}
			return obj, nil
		case '[':
			arr := []any{}
			for dec.More() {
				e, err := decodeJSONValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				arr = append(arr, e)
			}
			if _, err := dec.Token(); err != nil { // the closing ']'
				return nil, err
			}
			return arr, nil
		default:
			return nil, fmt.Errorf("unexpected %v", t)
		}
	default: // string, json.Number, bool, nil
		return t, nil
	}
}

// kind is the JSON type of a normalized value.
type kind uint8

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

// node is a value normalized to the JSON data model. For kindBool and
// kindNumber, text is the literal token; for kindString it is valid UTF-8.
// Object keys in obj are unique and valid UTF-8.
type node struct {
	kind kind
	text string
	arr  []*node
	obj  []pair
}

type pair struct {
	key string
	val *node
}

var nullNode = &node{kind: kindNull}

func (n *node) isPrimitive() bool { return n.kind < kindArray }

// normalize converts v into a node tree; depth counts the containers around v.
func normalize(v any, depth int) (*node, error) {
	if depth > maxEncodeDepth {
		return nil, errTooDeep
	}
	switch x := v.(type) {
	case Object:
		n := &node{kind: kindObject, obj: make([]pair, 0, len(x))}
		var index map[string]int
		for _, f := range x {
			val, err := normalize(f.Value, depth+1)
			if err != nil {
				return nil, err
			}
			key := validUTF8(f.Key)
			if len(x) > 1 {
				if index == nil {
					index = make(map[string]int, len(x))
				}
				if i, dup := index[key]; dup {
					n.obj[i].val = val
					continue
				}
				index[key] = len(n.obj)
			}
			n.obj = append(n.obj, pair{key: key, val: val})
		}
		return n, nil
	case map[string]any:
		keys := sortedKeys(x)
		n := &node{kind: kindObject, obj: make([]pair, 0, len(x))}
		for _, k := range keys {
			val, err := normalize(x[k], depth+1)
			if err != nil {
				return nil, err
			}
			n.obj = append(n.obj, pair{key: validUTF8(k), val: val})
		}
		return n, nil
	case []any:
		n := &node{kind: kindArray, arr: make([]*node, len(x))}
		for i, e := range x {
			en, err := normalize(e, depth+1)
			if err != nil {
				return nil, err
			}
			n.arr[i] = en
		}
		return n, nil
	case []string:
		n := &node{kind: kindArray, arr: make([]*node, len(x))}
		for i, e := range x {
			n.arr[i] = &node{kind: kindString, text: validUTF8(e)}
		}
		return n, nil
	}
	return normalizeScalar(v)
}

// normalizeScalar converts a primitive Go value into a node.
func normalizeScalar(v any) (*node, error) {
	switch x := v.(type) {
	case nil:
		return nullNode, nil
	case bool:
		if x {
			return &node{kind: kindBool, text: "true"}, nil
		}
		return &node{kind: kindBool, text: "false"}, nil
	case string:
		return &node{kind: kindString, text: validUTF8(x)}, nil
	case json.Number:
		s, ok := canonicalNumber(string(x))
		if !ok {
			return nil, fmt.Errorf("invalid number %q", string(x))
		}
		return &node{kind: kindNumber, text: s}, nil
	case float64:
		return floatNode(x, 64), nil
	case float32:
		return floatNode(float64(x), 32), nil
	case int:
		return intNode(int64(x)), nil
	case int8:
		return intNode(int64(x)), nil
	case int16:
		return intNode(int64(x)), nil
	case int32:
		return intNode(int64(x)), nil
	case int64:
		return intNode(x), nil
	case uint:
		return uintNode(uint64(x)), nil
	case uint8:
		return uintNode(uint64(x)), nil
	case uint16:
		return uintNode(uint64(x)), nil
	case uint32:
		return uintNode(uint64(x)), nil
	case uint64:
		return uintNode(x), nil
	case uintptr:
		return uintNode(uint64(x)), nil
	}
	return nil, fmt.Errorf("unsupported type %T", v)
}

func intNode(i int64) *node { return &node{kind: kindNumber, text: strconv.FormatInt(i, 10)} }

func uintNode(u uint64) *node { return &node{kind: kindNumber, text: strconv.FormatUint(u, 10)} }

// floatNode maps NaN and ±Inf to null (TOON §3) and other values to their
// shortest round-tripping digits in canonical form.
func floatNode(f float64, bits int) *node {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nullNode
	}
	s, _ := canonicalNumber(strconv.FormatFloat(f, 'e', -1, bits)) // always valid
	return &node{kind: kindNumber, text: s}
}

// validUTF8 replaces each invalid byte of s with U+FFFD, as encoding/json does.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return string(b)
}
