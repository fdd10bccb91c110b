// Package audit keeps the bridge's audit trail: one JSON line per
// run_python call in <state>/.bridge/audit/, chained so that an edit, a
// removal or a reordering is detected.
//
// Contract:
//   - Each line is a Record whose body (the JSON object without its "mac")
//     ends with "seq" and "prev"; its MAC is HMAC-SHA256 over the previous
//     record's MAC, a newline and that body, under a key derived from the
//     bridge's key file. The line is the body with ,"mac":"…" spliced in
//     before its closing brace, so a verifier recovers the exact bytes that
//     were signed without re-encoding anything.
//   - Appends, and the reading of the chain's last MAC they need, happen
//     under an exclusive flock on the directory's .lock file, so several
//     processes (two serves, run and exec) share one chain. Verify takes
//     the lock shared, so it never sees a line half-written.
//   - A file is closed when it reaches MaxFileBytes, or when its last line
//     is incomplete (a crash while writing it, which Verify reports as
//     such). Every file but the first opens with a checkpoint record that
//     carries the sequence number and MAC of the chain so far, so files
//     dropped by retention leave a chain that still verifies from the
//     oldest file kept.
//   - Files are 0600 in a 0700 directory.
package audit

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options configure a Log.
type Options struct {
	// MaxFileBytes closes a file once it holds this many bytes; 0 is
	// DefaultMaxFileBytes.
	MaxFileBytes int64
	// Retention removes files whose last record is older than this when a
	// file is closed; 0 keeps every file.
	Retention time.Duration
	// Sync fsyncs each record before Append returns (bridge serve); without
	// it the kernel writes records back on its own.
	Sync bool
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// DefaultMaxFileBytes is the size at which a file is closed by default.
const DefaultMaxFileBytes = 64 << 20

// Log appends records to the audit directory of one state dir.
type Log struct {
	dir  string
	key  []byte
	opts Options

	mu    sync.Mutex // one append at a time in this process; the flock orders processes
	lockf *os.File   // .lock, held open: flocked for each append
	// last is where this Log's last append left the chain. The lock file
	// holds the sequence number of the chain's last record (8 bytes, big
	// endian), written by every append under the lock: when it still says
	// last's, no other process appended since, and the next append skips
	// reading the directory and the file's tail.
	last *position
}

// position is the newest file, held open for appends, its size, and the
// chain's end.
type position struct {
	path string
	f    *os.File
	size int64
	t    tail
}

// Open prepares dir (created 0700) for appends, with the MAC key derived
// from key (the bridge's key file).
func Open(dir string, key []byte, opts Options) (*Log, error) {
	if len(key) == 0 {
		return nil, errors.New("audit: no key")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = DefaultMaxFileBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	lf, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	return &Log{dir: dir, key: MACKey(key), opts: opts, lockf: lf}, nil
}

// Close releases the Log's files.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forget()
	return l.lockf.Close()
}

// forget drops the cached position.
func (l *Log) forget() {
	if l.last != nil {
		l.last.f.Close()
		l.last = nil
	}
}

// MACKey is the audit chain's key, derived from the bridge's key so that a
// record's MAC can never stand for a snapshot's signature or the reverse.
func MACKey(key []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("bridge audit chain v1"))
	return m.Sum(nil)
}

// filePrefix and fileSuffix name the audit files: audit-<seq>.jsonl, the
// sequence number of the file's first record, so that names sort in chain
// order.
const (
	filePrefix = "audit-"
	fileSuffix = ".jsonl"
)

// Files are the audit files of dir, oldest first.
func Files(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, filePrefix) && strings.HasSuffix(n, fileSuffix) && e.Type().IsRegular() {
			out = append(out, filepath.Join(dir, n))
		}
	}
	slices.Sort(out)
	return out, nil
}

// readLocked takes the directory's flock shared, as every reader does (an
// Append holds it exclusive), and lists the files under it; unlock
// releases it.
func readLocked(dir string) (files []string, unlock func(), err error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("audit: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		f.Close()
		return nil, nil, fmt.Errorf("audit: lock: %w", err)
	}
	unlock = func() { f.Close() } // closing drops the lock
	if files, err = Files(dir); err != nil {
		unlock()
		return nil, nil, err
	}
	return files, unlock, nil
}

// Append assigns r its id (when empty), sequence number and previous MAC,
// and appends it to the chain.
func (l *Log) Append(r *Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := syscall.Flock(int(l.lockf.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("audit: lock: %w", err)
	}
	defer func() { _ = syscall.Flock(int(l.lockf.Fd()), syscall.LOCK_UN) }()
	var gen [8]byte
	n, _ := l.lockf.ReadAt(gen[:], 0)
	if l.last == nil || n != 8 || int64(binary.BigEndian.Uint64(gen[:])) != l.last.t.seq || l.last.size >= l.opts.MaxFileBytes {
		if err := l.locate(); err != nil {
			l.forget()
			return err
		}
	}
	p := l.last
	if r.ID == "" {
		r.ID = NewID()
	}
	if r.Time.IsZero() {
		r.Time = l.opts.Now().UTC()
	}
	r.Seq, r.Prev = p.t.seq+1, p.t.mac
	line, mac, err := l.seal(r)
	if err != nil {
		return err
	}
	if err := l.write(p, line); err != nil {
		l.forget()
		return err
	}
	p.t = tail{seq: r.Seq, mac: mac, complete: true}
	binary.BigEndian.PutUint64(gen[:], uint64(r.Seq))
	if _, err := l.lockf.WriteAt(gen[:], 0); err != nil {
		l.forget()
		return fmt.Errorf("audit: %w", err)
	}
	return nil
}

// locate finds the chain's end from the files (another process appended,
// or this Log has not yet), opening a new file when the newest is full or
// ends in an incomplete line, and caches it in l.last.
func (l *Log) locate() error {
	l.forget()
	files, err := Files(l.dir)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	var cur string
	var t tail
	if len(files) > 0 {
		cur = files[len(files)-1]
		if t, err = readTail(cur); err != nil {
			return err
		}
		if !t.complete {
			// A crash left the last line incomplete: a later file's
			// checkpoint follows the last whole record of one before it.
			if t, err = lastWhole(files); err != nil {
				return err
			}
			cur = ""
		}
	}
	var size int64
	if cur != "" {
		st, err := os.Stat(cur)
		if err != nil {
			return fmt.Errorf("audit: %w", err)
		}
		if size = st.Size(); size >= l.opts.MaxFileBytes {
			cur = ""
		}
	}
	if cur == "" {
		return l.openFile(t, len(files) > 0)
	}
	f, err := os.OpenFile(cur, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	l.last = &position{path: cur, f: f, size: size, t: t}
	return nil
}

// openFile creates the next file and caches it in l.last; when a chain
// came before (more), the file opens with a checkpoint record that
// continues it.
func (l *Log) openFile(t tail, more bool) error {
	now := l.opts.Now()
	path := filepath.Join(l.dir, fmt.Sprintf("%s%020d%s", filePrefix, t.seq+1, fileSuffix))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	l.last = &position{path: path, f: f, t: t}
	l.expire(path)
	if !more {
		return nil
	}
	cp := &Record{ID: NewID(), Time: now.UTC(), Kind: KindCheckpoint, Before: t.seq, Seq: t.seq + 1, Prev: t.mac}
	line, mac, err := l.seal(cp)
	if err != nil {
		return err
	}
	if err := l.write(l.last, line); err != nil {
		return err
	}
	l.last.t = tail{seq: cp.Seq, mac: mac, complete: true}
	return nil
}

// seal encodes r and returns its line and MAC.
func (l *Log) seal(r *Record) ([]byte, string, error) {
	body, err := json.Marshal(r)
	if err != nil {
		return nil, "", fmt.Errorf("audit: %w", err)
	}
	mac := sum(l.key, r.Prev, body)
	line := make([]byte, 0, len(body)+80)
	line = append(line, body[:len(body)-1]...)
	line = append(line, `,"mac":"`...)
	line = append(line, mac...)
	line = append(line, "\"}\n"...)
	return line, mac, nil
}

// sum is the MAC of body after prev.
func sum(key []byte, prev string, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(prev))
	m.Write([]byte{'\n'})
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// write appends line to p's file in one write, synced when the options
// say.
func (l *Log) write(p *position, line []byte) error {
	if _, err := p.f.Write(line); err != nil {
		return fmt.Errorf("audit: %w", err)
	}
	p.size += int64(len(line))
	if l.opts.Sync {
		if err := p.f.Sync(); err != nil {
			return fmt.Errorf("audit: %w", err)
		}
	}
	return nil
}

// expire removes the files, other than keep, last written before the
// retention period: the oldest kept file opens with a checkpoint, from
// which the chain verifies.
func (l *Log) expire(keep string) {
	if l.opts.Retention <= 0 {
		return
	}
	files, err := Files(l.dir)
	if err != nil {
		return
	}
	cutoff := l.opts.Now().Add(-l.opts.Retention)
	for _, f := range files {
		if f == keep {
			break
		}
		st, err := os.Stat(f)
		if err != nil || !st.ModTime().Before(cutoff) {
			break // files are dropped oldest first, so the kept ones stay a contiguous chain
		}
		_ = os.Remove(f)
	}
}

// tail is where a chain ends: its last sequence number and MAC, and
// whether the file's last line was complete.
type tail struct {
	seq      int64
	mac      string
	complete bool
}

// tailRe matches the end of a record line.
var tailRe = regexp.MustCompile(`,"seq":([0-9]+),"prev":"([0-9a-f]*)","mac":"([0-9a-f]{64})"\}$`)

// readTail reads the last record of path from its end: its fields "seq"
// and "prev" come last, so a few hundred bytes hold what the next record
// needs, whatever the record's size.
func readTail(path string) (tail, error) {
	f, err := os.Open(path)
	if err != nil {
		return tail{}, fmt.Errorf("audit: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return tail{}, fmt.Errorf("audit: %w", err)
	}
	if st.Size() == 0 {
		return tail{complete: true}, nil
	}
	n := min(st.Size(), 512)
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, st.Size()-n); err != nil && !errors.Is(err, io.EOF) {
		return tail{}, fmt.Errorf("audit: %w", err)
	}
	if buf[len(buf)-1] != '\n' {
		return tail{}, nil
	}
	m := tailRe.FindSubmatch(bytes.TrimSuffix(buf, []byte{'\n'}))
	if m == nil {
		return tail{}, nil // not a record's end: treated as incomplete, Verify says what it is
	}
	seq, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return tail{seq: seq, mac: string(m[3]), complete: true}, nil
}

// lastWhole is the end of the chain when the newest file's last line is
// incomplete: the last whole record of the newest file that has one.
func lastWhole(files []string) (tail, error) {
	for i := len(files) - 1; i >= 0; i-- {
		data, err := os.ReadFile(files[i])
		if err != nil {
			return tail{}, fmt.Errorf("audit: %w", err)
		}
		end := bytes.LastIndexByte(data, '\n')
		if end < 0 {
			continue
		}
		data = data[:end]
		start := bytes.LastIndexByte(data, '\n') + 1
		if m := tailRe.FindSubmatch(data[start:]); m != nil {
			seq, _ := strconv.ParseInt(string(m[1]), 10, 64)
			return tail{seq: seq, mac: string(m[3]), complete: true}, nil
		}
	}
	return tail{complete: true}, nil
}

// NewID is a random record id: 16 hex digits.
func NewID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
