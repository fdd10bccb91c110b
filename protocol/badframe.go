package protocol

import (
	"bytes"
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// maxBadFrameReason bounds the decoder's reason quoted in a bad frame's
// error reply.
const maxBadFrameReason = 200

// badFrameReply is the error answer to a frame that could not be decoded.
type badFrameReply struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"` // nil: null
	Error   struct {
		Code    int       `json:"code"`
		Message string    `json:"message"`
		Data    ErrorData `json:"data"`
	} `json:"error"`
}

// answerBadFrame answers a line that could not be decoded, as JSON-RPC
// asks: -32600 with the frame's id when its top-level "id" can still be
// read (a request nested too deep for the decoder, say), else -32700 with
// a null id. Without it, a peer waiting for that id would wait forever. The
// reply is small and within the stream's write bound; a write failure
// already breaks the stream, so it is not reported here.
func (s *LineStream) answerBadFrame(line []byte, reason error) {
	var r badFrameReply
	r.JSONRPC = "2.0"
	r.Error.Data.Kind = KindInvalidArguments
	why := reason.Error()
	if len(why) > maxBadFrameReason {
		why = strings.ToValidUTF8(why[:maxBadFrameReason], "") + "..."
	}
	if id := frameID(line); id != nil {
		r.ID, r.Error.Code = id, CodeInvalidRequest
		r.Error.Message = "Invalid request: the frame could not be decoded: " + why
	} else {
		r.Error.Code = CodeParseError
		r.Error.Message = "Parse error: " + why
	}
	_ = s.WriteObject(r)
}

// frameID returns the string or number value of the top-level "id" member
// of the object in line, or nil when there is none or it cannot be read.
// It scans bytes without recursion, so no nesting depth defeats it.
func frameID(line []byte) json.RawMessage {
	i := skipSpace(line, 0)
	if i >= len(line) || line[i] != '{' {
		return nil
	}
	depth := 0
	for i < len(line) {
		switch line[i] {
		case '"':
			end := stringEnd(line, i)
			if end < 0 {
				return nil
			}
			// At depth 1 a string followed by ':' is a member name.
			if j := skipSpace(line, end); depth == 1 && j < len(line) && line[j] == ':' {
				var key string
				if json.Unmarshal(line[i:end], &key) == nil && key == "id" {
					return scalarID(line[j+1:])
				}
			}
			i = end
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth <= 0 {
				return nil
			}
		}
		i++
	}
	return nil
}

// scalarID decodes the value at the start of b when it is a string or a
// number, the id types JSON-RPC allows besides null.
func scalarID(b []byte) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil
	}
	switch v := tok.(type) {
	case string:
		if !utf8.ValidString(v) {
			return nil
		}
		out, _ := json.Marshal(v)
		return out
	case json.Number:
		return json.RawMessage(v)
	}
	return nil
}

// stringEnd returns the index just past the JSON string starting at
// line[i] (a '"'), or -1 when it is not terminated.
func stringEnd(line []byte, i int) int {
	for j := i + 1; j < len(line); j++ {
		switch line[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

func skipSpace(line []byte, i int) int {
	for i < len(line) && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r' || line[i] == '\n') {
		i++
	}
	return i
}
