package protocol

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
)

// LineStream is a jsonrpc2.ObjectStream that carries one JSON-RPC message per
// '\n'-terminated line. Unlike jsonrpc2.PlainObjectStream it has no line
// length limit below maxFrame, and a bad line never ends the link: lines that
// are not JSON-RPC objects are skipped (debug log of their first 200 bytes)
// and answered with a JSON-RPC error, and lines longer than maxFrame are
// discarded with a warning; with OnSkip both are reported to its function
// instead of the log.
type LineStream struct {
	r        *bufio.Reader
	maxFrame int
	log      zerolog.Logger

	wmu     sync.Mutex // guards w and broken; held for at most one bounded write
	w       io.Writer
	broken  error         // the first failed write: the framing is lost, every later write fails
	bound   time.Duration // the longest one write may take; 0: unbounded
	stalled func()        // called once when a write hits its bound

	closeOnce sync.Once
	closer    io.Closer
	closed    atomic.Bool

	// skipped, when set, is told of each skipped or discarded line instead
	// of the log (OnSkip).
	skipped func(reason, detail string)
	// data, when set, takes each data frame (OnData); dataBuf holds the
	// last one's bytes, reused.
	data    func(head, payload []byte)
	dataBuf []byte
}

// DataLinePrefix starts a data frame: bulk bytes (a snapshot's) that cross
// the link outside JSON-RPC, as they are: a header line "#<tag> <fields>
// <n>" and then exactly n raw bytes, n at most the frame cap. No JSON
// parser and no base64 touch them. Tags: W (box→host, snapshot_write's
// data) and R (host→box, snapshot_read's).
const DataLinePrefix = '#'

// dataKeep is the largest data frame buffer a stream keeps for the next
// frame: a snapshot chunk (4 MiB). A larger frame gets a buffer of its own,
// so a sandbox cannot make the host hold a frame cap's worth for good.
const dataKeep = 4 << 20

// DataHeader is the header line of a data frame of n bytes: head ("#W
// <upload> <offset>") with n and the newline added.
func DataHeader(head []byte, n int) []byte {
	out := append(append([]byte(nil), head...), ' ')
	out = strconv.AppendInt(out, int64(n), 10)
	return append(out, '\n')
}

// OnData makes the stream hand each data frame (DataLinePrefix) to f, on
// the reading goroutine, instead of treating it as a bad frame: head is
// its header without the byte count, payload its bytes, valid only until
// f returns. Call it before the stream is used.
func (s *LineStream) OnData(f func(head, payload []byte)) {
	s.data = f
}

// readData reads the payload of the data frame whose header is line and
// hands both to the data function. A header without a usable byte count
// is skipped alone: what follows is then read as frames, and a forger only
// gets its own bytes skipped.
func (s *LineStream) readData(line []byte) error {
	i := bytes.LastIndexByte(line, ' ')
	n, err := strconv.Atoi(string(line[i+1:]))
	if i < 0 || err != nil || n < 0 || n > s.maxFrame {
		if s.skipped != nil {
			s.skipped("invalid data frame header", head(line, 200))
		} else {
			s.log.Debug().Str("line", head(line, 200)).Msg("link: skipped an invalid data frame header")
		}
		return nil
	}
	var payload []byte
	switch {
	case n <= cap(s.dataBuf):
		payload = s.dataBuf[:n]
	case n <= dataKeep:
		s.dataBuf = make([]byte, n)
		payload = s.dataBuf
	default: // a frame over a snapshot chunk: no sandbox's stream keeps that much
		payload = make([]byte, n)
	}
	if _, err := io.ReadFull(s.r, payload); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		return err
	}
	s.data(line[:i], payload)
	return nil
}

// NewLineStream reads frames from r and writes them to w; Close closes c.
func NewLineStream(r io.Reader, w io.Writer, c io.Closer, maxFrame int, log zerolog.Logger) *LineStream {
	// 256 KiB: a line of a few MiB is read in few slices.
	return &LineStream{r: bufio.NewReaderSize(r, 256<<10), w: w, closer: c, maxFrame: maxFrame, log: log}
}

// BoundWrites makes every write give up after d when w supports write
// deadlines (an *os.File pipe does): the write fails, the stream is broken
// for good, and stalled is called once. A peer that stops reading can then
// never hold a writer, or jsonrpc2's send lock, longer than d. Call it
// before the stream is used.
func (s *LineStream) BoundWrites(d time.Duration, stalled func()) {
	s.bound, s.stalled = d, stalled
}

// OnSkip makes the stream report each line it skips or discards to f
// instead of logging it, so that a peer flooding the link with bad lines
// costs the owner a count, not a log line each. reason is one of a few
// fixed strings; detail comes from the peer (at most 200 bytes of the
// line) or states the size of a discarded frame. Call it before the stream
// is used; f runs on the reading goroutine.
func (s *LineStream) OnSkip(f func(reason, detail string)) {
	s.skipped = f
}

// ErrFrameTooLarge is returned by WriteObject for an object whose encoding
// exceeds the frame cap; the link stays usable.
var ErrFrameTooLarge = errors.New("frame too large")

// ErrLinkStalled is returned by every write once one write could not
// complete within the stream's bound: the peer stopped reading.
var ErrLinkStalled = errors.New("link stalled: the peer stopped reading")

// WriteObject writes obj as one line, within the stream's write bound.
func (s *LineStream) WriteObject(obj any) error {
	data, err := json.Marshal(obj)
	if err != nil {
		return fmt.Errorf("frame: %w", err)
	}
	if len(data) > s.maxFrame {
		return fmt.Errorf("frame of %d bytes exceeds the %d-byte limit: %w", len(data), s.maxFrame, ErrFrameTooLarge)
	}
	return s.WriteLine(append(data, '\n'), s.bound)
}

// WriteLine writes one already encoded line (with its '\n') within d (0:
// unbounded). A failed or timed-out write breaks the stream: part of the
// line may have left, so no later frame could be parsed.
func (s *LineStream) WriteLine(line []byte, d time.Duration) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed.Load() {
		return io.ErrClosedPipe
	}
	if s.broken != nil {
		return s.broken
	}
	bounded := false
	if dw, ok := s.w.(interface{ SetWriteDeadline(time.Time) error }); ok {
		var at time.Time // zero: no deadline
		if d > 0 {
			at = time.Now().Add(d)
		}
		bounded = dw.SetWriteDeadline(at) == nil && d > 0
	}
	_, err := s.w.Write(line)
	if err == nil {
		return nil
	}
	if bounded && errors.Is(err, os.ErrDeadlineExceeded) {
		s.broken = fmt.Errorf("%w (no write progress for %s)", ErrLinkStalled, d)
		if s.stalled != nil {
			s.stalled()
		}
		return s.broken
	}
	s.broken = err
	return err
}

// ReadObject reads the next JSON-RPC line into v. An invalid line is
// skipped and answered (answerBadFrame), so a peer waiting on it is told.
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
		if line[0] == DataLinePrefix && s.data != nil {
			if err := s.readData(line); err != nil {
				return err
			}
			continue
		}
		if !looksLikeJSONRPC(line) {
			if s.skipped != nil {
				s.skipped("line that is not a JSON-RPC frame", head(line, 200))
			} else {
				s.log.Debug().Str("line", head(line, 200)).Msg("link: skipped a line that is not a JSON-RPC frame")
			}
			s.answerBadFrame(line, errors.New("not a JSON-RPC object"))
			continue
		}
		if err := json.Unmarshal(line, v); err != nil {
			if s.skipped != nil {
				s.skipped("invalid JSON-RPC frame", head(line, 200))
			} else {
				s.log.Debug().Err(err).Str("line", head(line, 200)).Msg("link: skipped an invalid JSON-RPC frame")
			}
			s.answerBadFrame(line, err)
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
				if s.skipped != nil {
					s.skipped("frame over MCP_BRIDGE_MAX_FRAME_BYTES", fmt.Sprintf("%d bytes, limit %d", total, s.maxFrame))
				} else {
					s.log.Warn().Int("bytes", total).Int("limit", s.maxFrame).Msg("link: discarded a frame over MCP_BRIDGE_MAX_FRAME_BYTES")
				}
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

// Close closes the underlying writer/closer once. It never waits for a
// write in progress: closing an *os.File pipe ends a blocked write at once.
func (s *LineStream) Close() error {
	var err error
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		if s.closer != nil {
			err = s.closer.Close()
		}
	})
	return err
}
