package mcpwire

import (
	"encoding/json"
)

// maxIDBytes bounds the id a frame may name: a longer one is not an id the
// bridge sent (its ids are short), so it is not kept.
const maxIDBytes = 256

// scan reads, byte by byte across the chunks of one frame, the two facts
// the reader needs before (or without) decoding it: its deepest nesting and
// the value of its top-level "id" member. It keeps no more of the frame
// than that value, and never recurses, so no size or depth defeats it: a
// reply over the frame cap, or nested too deep to decode, still names the
// request it answers.
type scan struct {
	depth, maxDepth int
	topObject       bool // the frame is an object: depth-1 strings are its keys and values
	inString, esc   bool
	expectKey       bool // at depth 1, the next string is a member name
	state           scanState
	// capture holds the string or scalar being kept (a depth-1 member name,
	// or id's value) while capturing; over says it outgrew maxIDBytes.
	capturing, over bool
	capture         []byte
	// id is the top-level id's raw value, once read: a JSON string or
	// number. idSeen is set by the first "id" member, whatever its value.
	id     json.RawMessage
	idSeen bool
	// methodSeen: the frame has a top-level "method": a request or a
	// notification, which no request of the bridge waits for.
	methodSeen bool
}

type scanState uint8

const (
	scanIdle   scanState = iota
	scanIDKey            // the member name just read is "id": ':' comes next
	scanIDVal            // id's value comes next
	scanScalar           // inside id's value, a number (or a literal, which is no id)
)

// Depth is how deep raw nests: 0 for a scalar, 1 for [] or {}. It reads
// bytes without recursion, so no depth defeats it.
func Depth(raw []byte) int {
	var s scan
	s.feed(raw)
	return s.maxDepth
}

// feed scans the next chunk of the frame.
func (s *scan) feed(b []byte) {
	for _, c := range b {
		s.step(c)
	}
}

func (s *scan) step(c byte) {
	if s.inString {
		s.stringByte(c)
		return
	}
	if s.state == scanScalar {
		if scalarByte(c) {
			s.keep(c)
			return
		}
		s.endScalar()
	}
	switch c {
	case ' ', '\t', '\r', '\n':
	case '"':
		s.inString = true
		if s.depth == 1 && s.topObject && (s.expectKey || s.state == scanIDVal) {
			s.capturing, s.over, s.capture = true, false, append(s.capture[:0], c)
		}
	case '{', '[':
		if s.depth == 0 {
			s.topObject = c == '{'
		}
		s.depth++
		s.maxDepth = max(s.maxDepth, s.depth)
		s.expectKey = s.depth == 1 && c == '{'
		s.valueNotID()
	case '}', ']':
		s.depth--
	case ':':
		if s.depth == 1 {
			s.expectKey = false
			if s.state == scanIDKey {
				s.state = scanIDVal
			}
		}
	case ',':
		if s.depth == 1 {
			s.expectKey = s.topObject
			if s.state == scanIDKey {
				s.state = scanIdle // "id" was not a member name after all
			}
		}
	default:
		if s.depth == 1 && s.state == scanIDVal {
			s.state = scanScalar
			s.capturing, s.over, s.capture = true, false, append(s.capture[:0], c)
			return
		}
		s.valueNotID()
	}
}

// stringByte is c inside a string.
func (s *scan) stringByte(c byte) {
	if s.capturing {
		s.keep(c)
	}
	switch {
	case s.esc:
		s.esc = false
	case c == '\\':
		s.esc = true
	case c == '"':
		s.inString = false
		if s.capturing {
			s.endString()
		}
	}
}

// endString ends a captured string: a member name, or id's value.
func (s *scan) endString() {
	s.capturing = false
	if s.state == scanIDVal {
		s.setID()
		return
	}
	var name string
	if s.over || json.Unmarshal(s.capture, &name) != nil {
		return
	}
	switch {
	case name == "id" && !s.idSeen:
		s.idSeen = true
		s.state = scanIDKey
	case name == "method":
		s.methodSeen = true
	}
}

// endScalar ends id's value when it is not a string.
func (s *scan) endScalar() {
	s.capturing = false
	if c := s.capture[0]; c == '-' || (c >= '0' && c <= '9') {
		s.setID()
		return
	}
	s.state = scanIdle // true, false, null: no id to answer
}

// setID keeps the captured value as the id when it is a whole JSON value.
func (s *scan) setID() {
	s.state = scanIdle
	if !s.over && json.Valid(s.capture) {
		s.id = append(json.RawMessage(nil), s.capture...)
	}
}

// valueNotID drops an id whose value turned out to be an object or array.
func (s *scan) valueNotID() {
	if s.state == scanIDVal {
		s.state = scanIdle
	}
}

// finish ends the frame: a number at its very end is complete.
func (s *scan) finish() {
	if s.state == scanScalar {
		s.endScalar()
	}
}

func (s *scan) keep(c byte) {
	if len(s.capture) >= maxIDBytes {
		s.over = true
		return
	}
	s.capture = append(s.capture, c)
}

// scalarByte says whether c can continue a JSON number or literal.
func scalarByte(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c == '-' || c == '+' || c == '.' || c == 'E'
}
