package audit

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"slices"
	"time"
)

// Filter selects records for Read; zero fields select everything.
type Filter struct {
	Principal, Session, Server, Tool string
	Since                            time.Time
	// ExactPrincipal matches Principal even when it is "" (bridge run's
	// records have none).
	ExactPrincipal bool
}

// match reports whether call record r passes f.
func (f Filter) match(r *Record) bool {
	if r.Kind != KindCall || (f.Principal != "" || f.ExactPrincipal) && r.Principal != f.Principal || f.Session != "" && r.Session != f.Session ||
		!f.Since.IsZero() && r.Time.Before(f.Since) {
		return false
	}
	if f.Server == "" && f.Tool == "" {
		return true
	}
	return slices.ContainsFunc(r.Inner, func(in Inner) bool {
		return (f.Server == "" || in.Server == f.Server) && (f.Tool == "" || in.Tool == f.Tool)
	})
}

// Read calls each with the call records of dir that pass f, oldest first,
// until each returns false. Lines that are not records (an incomplete
// last line) are skipped: bridge audit verify reports them.
func Read(dir string, f Filter, each func(*Record) bool) error {
	files, unlock, err := readLocked(dir)
	if err != nil {
		return err
	}
	defer unlock()
	for _, path := range files {
		more, err := readFile(path, f, each)
		if err != nil || !more {
			return err
		}
	}
	return nil
}

// Last is the last n call records of dir that pass f, oldest first; it
// reads files from the newest back until it has n.
func Last(dir string, f Filter, n int) ([]*Record, error) {
	files, unlock, err := readLocked(dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	var out []*Record
	for i := len(files) - 1; i >= 0 && len(out) < n; i-- {
		var these []*Record
		if _, err := readFile(files[i], f, func(r *Record) bool { these = append(these, r); return true }); err != nil {
			return nil, err
		}
		out = append(these, out...)
	}
	return out[max(len(out)-n, 0):], nil
}

func readFile(path string, f Filter, each func(*Record) bool) (bool, error) {
	fh, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer fh.Close()
	r := bufio.NewReaderSize(fh, 64<<10)
	for {
		line, err := r.ReadBytes('\n')
		if errors.Is(err, io.EOF) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		var rec Record
		if json.Unmarshal(line, &rec) != nil || !f.match(&rec) {
			continue
		}
		if !each(&rec) {
			return false, nil
		}
	}
}
