package mcpwire

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
)

// frameReader reads a server's frames: '\n'-terminated lines, each kept
// only up to max bytes. A longer line is read to its end but not kept, so
// no line costs more memory than the cap.
type frameReader struct {
	r   *bufio.Reader
	max int
}

func newFrameReader(r io.Reader, max int) *frameReader {
	return &frameReader{r: bufio.NewReaderSize(r, 64<<10), max: max}
}

// frame is one line a server sent.
type frame struct {
	line []byte // without its '\n'; nil when over the cap
	size int    // its length, '\n' included
	scan scan
}

// next reads the next frame. overCap is called once for a frame over the
// cap whose id could be read, as soon as both are known: the request it
// answers fails then, without waiting for the end of an endless line. A
// last line without its '\n' at the end of the stream is returned when it
// is whole JSON within the cap (a server that exits right after its last
// reply may omit the '\n'); a line cut off by an exit is not, so its
// request fails with the exit. The error comes with the next call.
func (f *frameReader) next(overCap func(*scan)) (*frame, error) {
	fr := &frame{}
	var buf []byte
	over, told := false, false
	tell := func() {
		if over && !told && fr.scan.id != nil {
			told = true
			overCap(&fr.scan)
		}
	}
	for {
		chunk, err := f.r.ReadSlice('\n')
		fr.size += len(chunk)
		fr.scan.feed(chunk)
		if !over && fr.size > f.max+1 {
			over, buf = true, nil
		}
		if !over {
			buf = append(buf, chunk...)
		}
		tell()
		switch {
		case err == nil:
			fr.scan.finish()
			tell()
			if !over {
				fr.line = buf[:len(buf)-1]
			}
			return fr, nil
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF) && !over && len(buf) <= f.max && json.Valid(buf):
			fr.scan.finish()
			fr.line = buf
			return fr, nil
		default:
			return nil, err
		}
	}
}

// whole reads all of the reader as one frame (a JSON body, where newlines
// are only whitespace). It stops at the cap: the frame is then over it,
// and its id is what the scan read up to there.
func (f *frameReader) whole() (*frame, error) {
	fr := &frame{}
	var buf []byte
	chunk := make([]byte, 32<<10)
	for {
		n, err := f.r.Read(chunk)
		fr.size += n
		fr.scan.feed(chunk[:n])
		if fr.size > f.max {
			return fr, nil
		}
		buf = append(buf, chunk[:n]...)
		if errors.Is(err, io.EOF) {
			fr.scan.finish()
			fr.line = buf
			return fr, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
