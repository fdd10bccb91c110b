package protocol

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/rs/zerolog"
)

// LineStream is a jsonrpc2.ObjectStream that carries one JSON-RPC message per
// '\n'-terminated line. Unlike jsonrpc2.PlainObjectStream it has no line
// length limit below maxFrame, and a bad line never ends the link: lines that
// are not JSON-RPC objects are skipped (debug log of their first 200 bytes),
// and lines longer than maxFrame are discarded with a warning.
type LineStream struct {
	r        *bufio.Reader
	maxFrame int
	log      zerolog.Logger

	wmu    sync.Mutex // guards w and closed
	w      io.Writer
	closer io.Closer
	closed bool
}

// NewLineStream reads frames from r and writes them to w; Close closes c.
func NewLineStream(r io.Reader, w io.Writer, c io.Closer, maxFrame int, log zerolog.Logger) *LineStream {
	return &LineStream{r: bufio.NewReaderSize(r, 64<<10), w: w, closer: c, maxFrame: maxFrame, log: log}
}

// ErrFrameTooLarge is returned by WriteObject for an object whose encoding
// exceeds the frame cap; the link stays usable.
var ErrFrameTooLarge = errors.New("frame too large")

// WriteObject writes obj as one line.
func (s *LineStream) WriteObject(obj any) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("frame: %w", err)
	}
	if len(data) > s.maxFrame {
		return fmt.Errorf("frame of %d bytes exceeds the %d-byte limit: %w", len(data), s.maxFrame, ErrFrameTooLarge)
	}
	data = append(data, '\n')
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return io.ErrClosedPipe
	}
	_, err = s.w.Write(data)
	return err
}

// ReadObject reads the next JSON-RPC line into v, skipping invalid lines.
func (s *LineStream) ReadObject(v any) error {
	for {
		line, err := s.readLine()
		if err != nil {
			return err
		}
		if line == nil {
			continue // oversized, already logged
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if !looksLikeJSONRPC(line) {
			s.log.Debug().Str("line", head(line, 200)).Msg("link: skipped a line that is not a JSON-RPC frame")
			continue
		}
		if err := json.Unmarshal(line, v); err != nil {
			s.log.Debug().Err(err).Str("line", head(line, 200)).Msg("link: skipped an invalid JSON-RPC frame")
			continue
		}
		return nil
	}
}

// readLine returns the next line without its '\n', or nil for a line over
// the cap (whose remainder has been discarded). A final line without '\n'
// at EOF is returned; EOF follows.
func (s *LineStream) readLine() ([]byte, error) {
	var buf []byte
	over := false
	total := 0
	for {
		chunk, err := s.r.ReadSlice('\n')
		total += len(chunk)
		if !over {
			if total > s.maxFrame+1 {
				over = true
				buf = nil
			} else {
				buf = append(buf, chunk...)
			}
		}
		switch {
		case err == nil:
			if over {
				s.log.Warn().Int("bytes", total).Int("limit", s.maxFrame).Msg("link: discarded a frame over MCP_BRIDGE_MAX_FRAME_BYTES")
				return nil, nil
			}
			return buf[:len(buf)-1], nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			// A final line has no '\n': it may hold maxFrame bytes, not one more.
			if len(buf) > 0 && !over && err == io.EOF && len(buf) <= s.maxFrame {
				return buf, nil
			}
			return nil, err
		}
	}
}

// looksLikeJSONRPC is a cheap check that line is an object with a jsonrpc member.
func looksLikeJSONRPC(line []byte) bool {
	return len(line) > 1 && line[0] == '{' && bytes.Contains(line, []byte(`"jsonrpc"`))
}

func head(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return string(b)
}

// Close closes the underlying writer/closer once.
func (s *LineStream) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.closer != nil {
		return s.closer.Close()
	}
	return nil
}
