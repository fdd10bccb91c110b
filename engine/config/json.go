package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// maxDepth bounds JSON nesting so a hostile file cannot exhaust the stack.
const maxDepth = 512

// object is a decoded JSON object that keeps its keys in document order,
// duplicates included: keys[i] maps to vals[i]. Config entries are read from
// it so their order follows the file, never a Go map's iteration order.
type object struct {
	keys []string
	vals []any
}

// get returns the value of the last occurrence of key, as encoding/json and
// Python's json module do for a duplicated key.
func (o *object) get(key string) (any, bool) {
	for i := len(o.keys) - 1; i >= 0; i-- {
		if o.keys[i] == key {
			return o.vals[i], true
		}
	}
	return nil, false
}

// decodeJSON decodes exactly one JSON value from data. Objects become
// *object, arrays []any, numbers json.Number, and strings, booleans and null
// their Go values. The error names the line and column of a syntax error.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := readValue(dec, 0)
	if err == nil {
		if _, err = dec.Token(); errors.Is(err, io.EOF) {
			return v, nil
		} else if err == nil {
			err = errors.New("unexpected data after the top-level value")
		}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		if len(bytes.TrimSpace(data)) == 0 {
			return nil, errors.New("invalid JSON: the file is empty")
		}
		err = errors.New("unexpected end of input")
	}
	off := dec.InputOffset()
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = se.Offset
	}
	line, col := position(data, off)
	return nil, fmt.Errorf("invalid JSON at line %d, column %d: %w", line, col, err)
}

// readValue reads one value from dec; depth is the nesting level of that
// value's container.
func readValue(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	if depth >= maxDepth {
		return nil, fmt.Errorf("nesting deeper than %d levels", maxDepth)
	}
	switch d {
	case '{':
		o := &object{}
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return nil, err
			}
			key, ok := k.(string)
			if !ok { // the decoder reports this itself; kept as a guard
				return nil, errors.New("object key is not a string")
			}
			v, err := readValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			o.keys = append(o.keys, key)
			o.vals = append(o.vals, v)
		}
		if _, err := dec.Token(); err != nil { // the closing '}'
			return nil, err
		}
		return o, nil
	case '[':
		a := []any{}
		for dec.More() {
			v, err := readValue(dec, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		if _, err := dec.Token(); err != nil { // the closing ']'
			return nil, err
		}
		return a, nil
	}
	return nil, fmt.Errorf("unexpected %q", rune(d))
}

// position converts a byte offset in data to a 1-based line and column.
func position(data []byte, off int64) (line, col int) {
	if off > int64(len(data)) {
		off = int64(len(data))
	}
	if off < 0 {
		off = 0
	}
	before := data[:off]
	line = bytes.Count(before, []byte{'\n'}) + 1
	col = int(off) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return line, col
}

// kind names the JSON type of v for error messages.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "a list"
	case *object:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
