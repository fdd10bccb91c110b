package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os"
)

// cancelLogReader passes stdin through and appends each
// notifications/cancelled and tasks/cancel it carries to a file, one JSON
// params object a line ({"requestId": ..., "reason": ...} or {"taskId":
// ...}), before mcp-go sees it: mcp-go
// handles cancellation itself and never shows it to a notification handler.
type cancelLogReader struct {
	in   *bufio.Reader
	log  *os.File
	rest []byte // the part of the current line not yet returned
}

func newCancelLogReader(in io.Reader, path string) (*cancelLogReader, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &cancelLogReader{in: bufio.NewReaderSize(in, 1<<16), log: f}, nil
}

func (r *cancelLogReader) Read(p []byte) (int, error) {
	if len(r.rest) == 0 {
		line, err := r.in.ReadBytes('\n')
		if len(line) == 0 {
			return 0, err
		}
		r.note(line)
		r.rest = line
	}
	n := copy(p, r.rest)
	r.rest = r.rest[n:]
	return n, nil
}

func (r *cancelLogReader) note(line []byte) {
	if !bytes.Contains(line, []byte("notifications/cancelled")) && !bytes.Contains(line, []byte("tasks/cancel")) {
		return
	}
	var msg struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if json.Unmarshal(line, &msg) != nil || (msg.Method != "notifications/cancelled" && msg.Method != "tasks/cancel") {
		return
	}
	_, _ = r.log.Write(append(bytes.TrimSpace(msg.Params), '\n'))
}
