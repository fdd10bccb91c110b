package audit

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Report is what Verify found of an intact chain.
type Report struct {
	Records int64 // records verified, checkpoints included
	// From is the sequence number verification started at: 1, or the
	// checkpoint's of the oldest file kept (files before it were dropped
	// by retention).
	From int64
	// Incomplete names each file whose last line is incomplete (a crash
	// while writing it): reported, not tampering.
	Incomplete []string
}

// Broken is a chain that does not verify: the first record that was
// edited, removed or reordered.
type Broken struct {
	File string
	Line int
	ID   string // "" when the line is not a record
	Why  string
}

func (b *Broken) Error() string {
	id := ""
	if b.ID != "" {
		id = " (record " + b.ID + ")"
	}
	return fmt.Sprintf("%s line %d%s: %s", filepath.Base(b.File), b.Line, id, b.Why)
}

// Verify checks the chain in dir under key (the bridge's key file, as
// Open takes it), under the shared lock, so no append is half-seen.
func Verify(dir string, key []byte) (Report, error) {
	files, unlock, err := readLocked(dir)
	if err != nil {
		return Report{}, err
	}
	defer unlock()
	v := verifier{key: MACKey(key)}
	for i, f := range files {
		if err := v.file(f, i == 0); err != nil {
			return v.rep, err
		}
	}
	return v.rep, nil
}

type verifier struct {
	key     []byte
	rep     Report
	seq     int64
	mac     string
	started bool
}

func (v *verifier) file(path string, first bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 64<<10)
	for n := 1; ; n++ {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			if len(line) > 0 {
				v.rep.Incomplete = append(v.rep.Incomplete, path)
			}
			return nil
		}
		if err != nil {
			return &Broken{File: path, Line: n, Why: err.Error()}
		}
		if err := v.record(path, n, first && n == 1, bytes.TrimSuffix(line, []byte{'\n'})); err != nil {
			return err
		}
	}
}

// record checks one line: its MAC, then its place in the chain.
func (v *verifier) record(path string, n int, opening bool, line []byte) error {
	m := tailRe.FindSubmatchIndex(line)
	if m == nil {
		return &Broken{File: path, Line: n, Why: "not a record line (edited, or written by something else)"}
	}
	// The signed body: the line without its ,"mac":"…".
	macAt := bytes.LastIndex(line, []byte(`,"mac":"`))
	body := append(bytes.Clone(line[:macAt]), '}')
	var rec Record
	if err := json.Unmarshal(body, &rec); err != nil {
		return &Broken{File: path, Line: n, Why: "not a record: " + err.Error()}
	}
	mac := string(line[m[6]:m[7]])
	if want := sum(v.key, rec.Prev, body); !hmac.Equal([]byte(want), []byte(mac)) {
		return &Broken{File: path, Line: n, ID: rec.ID, Why: "its MAC does not match: the record was edited (or the key is not the one that wrote it)"}
	}
	switch {
	case !v.started && opening && rec.Seq == 1 && rec.Prev == "":
	case !v.started && rec.Kind == KindCheckpoint:
		// The oldest file kept opens with a checkpoint: what came before
		// was dropped by retention.
	case !v.started:
		return &Broken{File: path, Line: n, ID: rec.ID, Why: fmt.Sprintf("the chain starts at record %d, which is not a checkpoint: the records before it were removed", rec.Seq)}
	case rec.Prev != v.mac || rec.Seq != v.seq+1:
		return &Broken{File: path, Line: n, ID: rec.ID, Why: fmt.Sprintf("record %d does not follow record %d: a record between them was removed, or records were reordered", rec.Seq, v.seq)}
	}
	if !v.started {
		v.rep.From = rec.Seq
		v.started = true
	}
	v.seq, v.mac = rec.Seq, mac
	v.rep.Records++
	return nil
}
