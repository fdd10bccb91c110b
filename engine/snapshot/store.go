package snapshot

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/engine/store"
)

// ErrOverCap is wrapped by the error of a Writer that went over
// Caps.PerSession.
var ErrOverCap = errors.New("snapshot: larger than MCP_BRIDGE_SNAPSHOT_MAX")

// ErrTampered is wrapped by the error of Store.Open when the data or the
// sidecar does not verify (edited, truncated, moved); the pair is removed.
var ErrTampered = errors.New("snapshot: does not verify")

// ErrFenced is the error of every write after Fence.
var ErrFenced = errors.New("fenced: this replica no longer holds the leader lease, so another one writes the snapshots")

// Defaults for the caps left at zero (see Open).
const (
	defaultPerSession = 1 << 30
	defaultTotal      = 8 << 30
)

const (
	idDomain  = "bridge-session\x00"
	macDomain = "bridge-snapshot-v1\x00"

	extSnap = ".snap"
	extMeta = ".json"
	extLock = ".lock"

	// tempMaxAge is how long Sweep leaves a temp file untouched; a live
	// Writer touches its file on every Write.
	tempMaxAge = time.Hour
	// lockWait bounds the wait for another process's lock of one pair; the
	// sections it guards are short (renames and small writes).
	lockWait = 10 * time.Second
	// maxSidecar bounds what is read of a sidecar, so that a corrupt one
	// cannot exhaust memory.
	maxSidecar = 4 << 20
)

var (
	pairRe = regexp.MustCompile(`^([0-9a-f]{32})\.(snap|json)$`)
	tempRe = regexp.MustCompile(`^[0-9a-f]{32}\.(snap|json)(\.next-[0-9]+)?\.tmp-[0-9A-Za-z]+$`)
	nextRe = regexp.MustCompile(`^([0-9a-f]{32})\.json\.next-[0-9]+$`)

	errClosed = errors.New("snapshot: writer already committed or aborted")
)

// Caps bound the store. PerSession: one snapshot's bytes
// (MCP_BRIDGE_SNAPSHOT_MAX, default 1 GiB); Total: all snapshots in the
// directory (MCP_BRIDGE_SNAPSHOT_TOTAL, default 8 GiB), the least recently
// used dropped first across principals; Retention: a snapshot not used
// (committed or opened) for this long is dropped
// (MCP_BRIDGE_SNAPSHOT_RETENTION, default 7 days; 0 = keep forever).
//
// Open replaces a PerSession or Total of zero or less by its default; a
// Retention of zero or less keeps snapshots forever.
type Caps struct {
	PerSession, Total int64
	Retention         time.Duration
}

// Meta describes one stored snapshot. It is kept in a JSON sidecar beside
// the data.
type Meta struct {
	Principal string    `json:"principal"` // "" under stdio
	Session   string    `json:"session"`
	Call      int64     `json:"call"`           // the call whose state it holds
	LastCall  int64     `json:"lastCall"`       // the last call the session started (SetLastCall); not covered by the MAC
	Cell      int       `json:"cell,omitempty"` // the last cell number it holds, as the sandbox reported it; not covered by the MAC
	Taken     time.Time `json:"taken"`          // when the sandbox took it
	Bytes     int64     `json:"bytes"`
	Names     int       `json:"names"` // as the sandbox reported them
	Files     int       `json:"files"`
	Left      []string  `json:"left,omitempty"`  // names left out, as the sandbox reported them (e.g. "fh (open file)")
	Image     string    `json:"image,omitempty"` // the image/python identity the sandbox reported
	Used      time.Time `json:"used"`            // last commit or Open: the LRU and retention clock; not covered by the MAC
	MAC       string    `json:"mac"`             // hex HMAC-SHA256, see the package doc
}

// Store is the snapshot store of one directory. It is safe for concurrent
// use, also by several processes sharing the directory.
type Store struct {
	dir  string
	key  []byte
	caps Caps
	log  zerolog.Logger
	now  func() time.Time // the clock of Meta.Used; tests replace it

	// mu serializes this process's locked sections; the flock of each
	// pair's lock file covers other processes.
	mu sync.Mutex
	// fenced refuses every write from Fence on.
	fenced atomic.Bool
}

// Fence refuses every later write (Create, Commit, SetLastCall, Delete,
// Sweep) with ErrFenced, and returns once no locked section of this
// process is running: a replica that lost the leader Lease calls it before
// another replica may take the Lease, so two replicas never write one
// session's snapshot.
func (s *Store) Fence() {
	s.fenced.Store(true)
	s.mu.Lock() // waits out the locked section running, if any
	s.mu.Unlock()
}

// Open returns the store in dir, creating dir (0700) when needed, and sweeps
// it once (see Sweep). key is the MAC key (LoadKey); it must hold at least 32
// bytes.
func Open(dir string, key []byte, caps Caps, log zerolog.Logger) (*Store, error) {
	if len(key) < 32 {
		return nil, fmt.Errorf("snapshot: key holds %d bytes, want at least 32", len(key))
	}
	if caps.PerSession <= 0 {
		caps.PerSession = defaultPerSession
	}
	if caps.Total <= 0 {
		caps.Total = defaultTotal
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	s := &Store{dir: dir, key: slices.Clone(key), caps: caps, log: log, now: time.Now}
	s.Sweep(time.Now())
	return s, nil
}

// idOf names the files of one (principal, session); see the package doc.
func idOf(principal, session string) string {
	h := sha256.New()
	io.WriteString(h, idDomain)
	io.WriteString(h, principal)
	h.Write([]byte{0})
	io.WriteString(h, session)
	return hex.EncodeToString(h.Sum(nil))[:32]
}

// checkPrincipal refuses a principal holding NUL, which would make ids
// ambiguous (see the package doc).
func checkPrincipal(principal string) error {
	if strings.IndexByte(principal, 0) >= 0 {
		return errors.New("snapshot: principal holds a NUL byte")
	}
	return nil
}

func (s *Store) path(id, ext string) string { return filepath.Join(s.dir, id+ext) }

// newMAC starts the MAC of a snapshot of (principal, session); the data is
// written to it next, and sealMAC adds the trailer.
func newMAC(key []byte, principal, session string) hash.Hash {
	h := hmac.New(sha256.New, key)
	io.WriteString(h, macDomain)
	io.WriteString(h, principal)
	h.Write([]byte{0})
	io.WriteString(h, session)
	h.Write([]byte{0})
	return h
}

// sealMAC adds the trailer (size, call, taken) to a MAC that has seen all
// the data, and returns the sum.
func sealMAC(h hash.Hash, n, call int64, taken time.Time) []byte {
	var b []byte
	b = append(b, 0)
	b = strconv.AppendInt(b, n, 10)
	b = append(b, 0)
	b = strconv.AppendInt(b, call, 10)
	b = append(b, 0)
	b = strconv.AppendInt(b, taken.UnixNano(), 10)
	h.Write(b)
	return h.Sum(nil)
}

// Writer streams one snapshot into a temp file until Commit or Abort. Its
// methods may be called from several goroutines, but the bytes of
// concurrent Writes interleave in no defined order.
type Writer struct {
	s                  *Store
	principal, session string
	id                 string

	mu   sync.Mutex
	f    *os.File
	tmp  string
	mac  hash.Hash
	n    int64
	err  error // the first failure; every later Write and Commit returns it
	done bool  // committed, aborted or failed: the temp file is gone or renamed
}

// Create starts a snapshot of (principal, session). Nothing replaces the
// stored one until Commit.
func (s *Store) Create(principal, session string) (*Writer, error) {
	if err := checkPrincipal(principal); err != nil {
		return nil, err
	}
	if s.fenced.Load() {
		return nil, fmt.Errorf("snapshot: %w", ErrFenced)
	}
	id := idOf(principal, session)
	f, err := os.CreateTemp(s.dir, id+extSnap+".tmp-*") // 0600
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return &Writer{s: s, principal: principal, session: session, id: id,
		f: f, tmp: f.Name(), mac: newMAC(s.key, principal, session)}, nil
}

// fail records err, removes the temp file and ends the Writer.
func (w *Writer) fail(err error) error {
	w.err = err
	if !w.done {
		w.done = true
		w.f.Close()
		os.Remove(w.tmp)
	}
	return err
}

// Write appends p to the snapshot. A Write that would take the snapshot
// over Caps.PerSession writes nothing, removes the temp file and fails with
// an error wrapping ErrOverCap, as does every later call.
func (w *Writer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return 0, w.err
	}
	if w.done {
		return 0, errClosed
	}
	if limit := w.s.caps.PerSession; int64(len(p)) > limit-w.n {
		return 0, w.fail(fmt.Errorf("%w (%d bytes)", ErrOverCap, limit))
	}
	n, err := w.f.Write(p)
	w.mac.Write(p[:n])
	w.n += int64(n)
	if err != nil {
		return n, w.fail(fmt.Errorf("snapshot: %w", err))
	}
	return n, nil
}

// Size is how many bytes have been written.
func (w *Writer) Size() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

// Commit stores the snapshot in place of the session's previous one, then
// drops the least recently used others while Caps.Total is exceeded. From m
// it keeps Call, Cell, Taken, Names, Files, Left, Image and LastCall (raised to the
// stored one's and to at
// least Call); it fills Principal, Session, Bytes, Used and MAC. It returns
// the stored Meta. The Writer is finished afterwards, whatever the outcome.
func (w *Writer) Commit(m Meta) (Meta, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return Meta{}, w.err
	}
	if w.done {
		return Meta{}, errClosed
	}
	s := w.s
	m.Principal, m.Session, m.Bytes = w.principal, w.session, w.n
	m.LastCall = max(m.LastCall, m.Call)
	m.Left = slices.Clone(m.Left)
	m.MAC = hex.EncodeToString(sealMAC(w.mac, w.n, m.Call, m.Taken))
	// No fsync: a snapshot must survive the bridge's or the sandbox's death,
	// which the page cache does. After a power loss the file may be short
	// or empty; its MAC then fails, and it is refused, never loaded.
	err := w.f.Close()
	if err != nil {
		return Meta{}, w.fail(fmt.Errorf("snapshot: %w", err))
	}
	snap, side := s.path(w.id, extSnap), s.path(w.id, extMeta)
	fi, err := os.Lstat(w.tmp)
	if err != nil {
		return Meta{}, w.fail(fmt.Errorf("snapshot: %w", err))
	}
	next := s.path(w.id, extMeta) + extNext + strconv.FormatUint(inode(fi), 10)
	superseded := false
	err = s.locked(w.id, func() error {
		s.recover(w.id)
		if old, _, err := s.readMeta(w.id); err == nil && old.Principal == m.Principal && old.Session == m.Session {
			// Uploads run in the background and may finish out of
			// order: a snapshot of an earlier call, taken earlier, must
			// not replace a later one (it would restore older state).
			// Both must hold: a session started afresh counts its calls
			// from 1 again, and its snapshots are taken later.
			if old.Call > m.Call && old.Taken.After(m.Taken) {
				superseded = true
				m = old
				return nil
			}
			// A SetLastCall since this upload began (the next call's
			// snapshot started) must not move back.
			m.LastCall = max(m.LastCall, old.LastCall)
		}
		m.Used = s.now().Round(0)
		raw, err := json.Marshal(m)
		if err != nil {
			return err
		}
		// Three steps, each atomic, so that a process killed between
		// any two leaves a pair that verifies: the new sidecar is staged
		// under a name that holds the new data file's inode, the data is
		// renamed into place, then the sidecar. recover finishes or undoes
		// a commit cut short, by whether the data file is that inode.
		if err := writeAtomic(next, raw); err != nil {
			return err
		}
		if err := os.Rename(w.tmp, snap); err != nil {
			os.Remove(next)
			return err
		}
		if commitCut != nil && commitCut() {
			return errCommitCut
		}
		if err := os.Rename(next, side); err != nil {
			// The old sidecar, if any, does not describe the new data:
			// leave no pair rather than a broken one.
			os.Remove(next)
			os.Remove(side)
			os.Remove(snap)
			return err
		}
		return nil
	})
	if err != nil {
		return Meta{}, w.fail(fmt.Errorf("snapshot: %w", err))
	}
	w.done = true
	if superseded {
		os.Remove(w.tmp)
		s.log.Debug().Str("id", w.id).Int64("kept", m.Call).Msg("snapshot superseded: a later call's was stored first")
		return m, nil
	}
	s.log.Debug().Str("id", w.id).Int64("bytes", m.Bytes).Int64("call", m.Call).Msg("snapshot committed")
	live, _ := s.scan()
	s.evict(live, w.id)
	return m, nil
}

// Abort drops the snapshot being written. It is a no-op after Commit, after
// a failure and when called again.
func (w *Writer) Abort() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return
	}
	w.done = true
	w.f.Close()
	os.Remove(w.tmp)
}

// Reader reads one verified snapshot. It holds the file descriptor that was
// verified, so later commits and deletes do not change what it reads.
type Reader struct {
	f     *os.File
	size  int64
	meta  Meta
	close sync.Once
	err   error
}

// ReadAt reads the snapshot's bytes at off, never past Size.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("snapshot: negative offset")
	}
	if off >= r.size {
		return 0, io.EOF
	}
	if rest := r.size - off; int64(len(p)) > rest {
		n, err := r.f.ReadAt(p[:rest], off)
		if err == nil {
			err = io.EOF
		}
		return n, err
	}
	return r.f.ReadAt(p, off)
}

// Size is the snapshot's length in bytes.
func (r *Reader) Size() int64 { return r.size }

// Meta is the snapshot's verified sidecar, with Used set by the Open.
func (r *Reader) Meta() Meta {
	m := r.meta
	m.Left = slices.Clone(m.Left)
	return m
}

// Close releases the file; later calls return nil.
func (r *Reader) Close() error {
	r.close.Do(func() { r.err = r.f.Close() })
	return r.err
}

// Open returns a Reader of the session's snapshot after verifying all of
// it, or (nil, nil) when there is none. A pair that does not verify is
// removed and reported with an error wrapping ErrTampered. Half a pair (a
// crash between the two renames of a Commit, or a file removed by hand)
// counts as none and is removed. On success the sidecar's Used is set to
// now.
func (s *Store) Open(principal, session string) (*Reader, error) {
	if err := checkPrincipal(principal); err != nil {
		return nil, err
	}
	id := idOf(principal, session)
	snap, side := s.path(id, extSnap), s.path(id, extMeta)

	// Take the pair under the lock, so that it is never half of a Commit.
	var (
		f       *os.File
		raw     []byte
		refused string // why the pair is refused before reading the data
	)
	err := s.locked(id, func() error {
		s.recover(id)
		var ferr, rerr error
		f, ferr = openNoFollow(snap)
		if ferr == nil {
			if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
				ferr = errNotRegular
			}
		}
		raw, rerr = readSmall(side)
		fgone, rgone := errors.Is(ferr, fs.ErrNotExist), errors.Is(rerr, fs.ErrNotExist)
		switch {
		case fgone && rgone:
			return nil
		case fgone || rgone:
			if f != nil {
				f.Close()
				f = nil
			}
			os.Remove(snap)
			os.Remove(side)
			s.log.Warn().Str("id", id).Msg("snapshot: removed half of a pair")
			return nil
		case errors.Is(ferr, syscall.ELOOP) || errors.Is(ferr, errNotRegular):
			refused = "data is not a regular file"
		case errors.Is(rerr, errTooLarge) || errors.Is(rerr, errNotRegular) || errors.Is(rerr, syscall.ELOOP):
			refused = "sidecar is not a small regular file"
		case ferr != nil:
			if f != nil {
				f.Close()
				f = nil
			}
			return ferr
		case rerr != nil:
			f.Close()
			f = nil
			return rerr
		}
		if refused != "" {
			if f != nil {
				f.Close()
				f = nil
			}
			os.Remove(snap)
			os.Remove(side)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if refused != "" {
		s.log.Warn().Str("id", id).Str("reason", refused).Msg("snapshot: removed a pair that does not verify")
		return nil, fmt.Errorf("%w: %s", ErrTampered, refused)
	}
	if f == nil {
		return nil, nil
	}

	// Verify outside the lock: reading a large file takes a while, and the
	// descriptor keeps reading the file taken above whatever is renamed
	// over it meanwhile.
	m, reason, err := s.verify(f, raw, principal, session)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	if reason != "" {
		// Remove the pair only if it is still the one that failed: a Commit
		// may have replaced it meanwhile.
		err := s.locked(id, func() error {
			if s.unchanged(id, f, raw) {
				os.Remove(snap)
				os.Remove(side)
			}
			return nil
		})
		f.Close()
		if err != nil {
			s.log.Warn().Err(err).Str("id", id).Msg("snapshot: could not remove a pair that does not verify")
		}
		s.log.Warn().Str("id", id).Str("reason", reason).Msg("snapshot: removed a pair that does not verify")
		return nil, fmt.Errorf("%w: %s", ErrTampered, reason)
	}

	// Mark it used, unless a Commit replaced it meanwhile (that one has its
	// own Used). A failure here costs only LRU order, so Open still succeeds.
	err = s.locked(id, func() error {
		if !s.unchanged(id, f, raw) {
			return nil
		}
		m.Used = s.now().Round(0)
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		return writeAtomic(side, b)
	})
	if err != nil {
		s.log.Warn().Err(err).Str("id", id).Msg("snapshot: could not update the time of last use")
	}
	return &Reader{f: f, size: m.Bytes, meta: m}, nil
}

// verify checks the data in f against the sidecar raw for (principal,
// session). It returns why they do not verify, or an error when f could not
// be read (which says nothing about tampering).
func (s *Store) verify(f *os.File, raw []byte, principal, session string) (Meta, string, error) {
	var m Meta
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, "sidecar is not valid JSON", nil
	}
	if m.Principal != principal || m.Session != session {
		return m, "sidecar names another session", nil
	}
	want, err := hex.DecodeString(m.MAC)
	if err != nil || len(want) != sha256.Size {
		return m, "sidecar MAC is malformed", nil
	}
	fi, err := f.Stat()
	if err != nil {
		return m, "", err
	}
	if !fi.Mode().IsRegular() {
		return m, "data is not a regular file", nil
	}
	if fi.Size() != m.Bytes {
		return m, fmt.Sprintf("data holds %d bytes, sidecar says %d", fi.Size(), m.Bytes), nil
	}
	h := newMAC(s.key, principal, session)
	// One byte past Bytes catches a file that grew since the Stat.
	n, err := io.Copy(h, io.NewSectionReader(f, 0, m.Bytes+1))
	if err != nil {
		return m, "", err
	}
	if n != m.Bytes {
		return m, "data changed size while being read", nil
	}
	if !hmac.Equal(sealMAC(h, n, m.Call, m.Taken), want) {
		return m, "MAC does not match", nil
	}
	return m, "", nil
}

// extNext names a staged sidecar: <id>.json.next-<inode of its data file>.
const extNext = ".next-"

// commitCut, set by tests, ends a Commit after its data file is in place
// and before its sidecar is, as a kill there would.
var (
	commitCut    func() bool
	errCommitCut = errors.New("commit cut short (test)")
)

// inode is fi's inode number.
func inode(fi os.FileInfo) uint64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Ino)
	}
	return 0
}

// recover finishes or undoes a Commit of id that was cut short: a staged
// sidecar whose inode is the data file's describes it and takes the
// sidecar's place; any other is removed (the data rename never happened).
// The caller holds id's lock.
func (s *Store) recover(id string) {
	side := s.path(id, extMeta)
	staged, _ := filepath.Glob(side + extNext + "*")
	if len(staged) == 0 {
		return
	}
	var data uint64
	if fi, err := os.Lstat(s.path(id, extSnap)); err == nil && fi.Mode().IsRegular() {
		data = inode(fi)
	}
	for _, p := range staged {
		if n, err := strconv.ParseUint(strings.TrimPrefix(p, side+extNext), 10, 64); err == nil && n != 0 && n == data {
			if os.Rename(p, side) == nil {
				s.log.Info().Str("id", id).Msg("snapshot: finished a commit that was cut short")
				continue
			}
		}
		os.Remove(p)
	}
}

// unchanged reports whether id's pair on disk is still the data file f and
// the sidecar raw. The caller holds id's lock.
func (s *Store) unchanged(id string, f *os.File, raw []byte) bool {
	cur, err := readSmall(s.path(id, extMeta))
	if err != nil || !bytes.Equal(cur, raw) {
		return false
	}
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Lstat(s.path(id, extSnap))
	return err == nil && os.SameFile(a, b)
}

// Stat returns the session's sidecar, unverified (for LastCall and notes);
// false when there is none, it does not parse or it names another session.
func (s *Store) Stat(principal, session string) (Meta, bool) {
	if checkPrincipal(principal) != nil {
		return Meta{}, false
	}
	m, _, err := s.readMeta(idOf(principal, session))
	if err != nil || m.Principal != principal || m.Session != session {
		return Meta{}, false
	}
	return m, true
}

// SetLastCall raises the sidecar's LastCall to n when the session has a
// snapshot and n is higher; otherwise it does nothing.
func (s *Store) SetLastCall(principal, session string, n int64) error {
	if err := checkPrincipal(principal); err != nil {
		return err
	}
	id := idOf(principal, session)
	err := s.locked(id, func() error {
		m, _, err := s.readMeta(id)
		if err != nil || m.Principal != principal || m.Session != session || n <= m.LastCall {
			return nil // no readable snapshot of this session, or nothing to raise
		}
		m.LastCall = n
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		return writeAtomic(s.path(id, extMeta), b)
	})
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	return nil
}

// Delete removes the session's snapshot; nil when there is none.
func (s *Store) Delete(principal, session string) error {
	if err := checkPrincipal(principal); err != nil {
		return err
	}
	id := idOf(principal, session)
	err := s.locked(id, func() error { return s.removePair(id) })
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	s.log.Debug().Str("id", id).Msg("snapshot deleted")
	return nil
}

// removePair removes id's data and sidecar; absent files are no error. The
// caller holds id's lock.
func (s *Store) removePair(id string) error {
	var errs []error
	for _, ext := range []string{extMeta, extSnap} {
		if err := os.Remove(s.path(id, ext)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Sweep drops the snapshots whose Used is more than Caps.Retention before
// now, temp files untouched for an hour and broken pairs, then the least
// recently used snapshots while Caps.Total is exceeded. Files that do not
// match the store's names are left alone. Errors are logged, not returned:
// a sweep is housekeeping, and the next one retries.
func (s *Store) Sweep(now time.Time) {
	if s.fenced.Load() {
		return
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		s.log.Warn().Err(err).Msg("snapshot: sweep")
		return
	}
	for _, e := range entries {
		if m := nextRe.FindStringSubmatch(e.Name()); m != nil {
			_ = s.locked(m[1], func() error { s.recover(m[1]); return nil })
			continue
		}
		if !tempRe.MatchString(e.Name()) {
			continue
		}
		fi, err := e.Info()
		if err != nil || !fi.Mode().IsRegular() || now.Sub(fi.ModTime()) <= tempMaxAge {
			continue
		}
		if err := os.Remove(filepath.Join(s.dir, e.Name())); err == nil {
			s.log.Debug().Str("file", e.Name()).Msg("snapshot: removed a stale temp file")
		}
	}
	live, broken := s.scan()
	for _, id := range broken {
		s.dropBroken(id)
	}
	if r := s.caps.Retention; r > 0 {
		kept := live[:0]
		for _, e := range live {
			if now.Sub(e.meta.Used) > r && s.dropIfSame(e, "retention") {
				continue
			}
			kept = append(kept, e)
		}
		live = kept
	}
	s.evict(live, "")
}

// Usage counts the stored snapshots and sums their sidecars' Bytes.
func (s *Store) Usage() (count int, bytes int64) {
	live, _ := s.scan()
	for _, e := range live {
		count++
		bytes += e.meta.Bytes
	}
	return count, bytes
}

// entry is one pair as scan saw it, without the lock.
type entry struct {
	id   string
	raw  []byte // the sidecar's bytes, to tell later whether it changed
	meta Meta
}

// scan lists the pairs in the directory without taking locks. live are the
// sound ones; broken are the ids whose pair looked broken (see brokenPair),
// which may just be a Commit in flight: check again under the lock.
func (s *Store) scan() (live []entry, broken []string) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		s.log.Warn().Err(err).Msg("snapshot: scan")
		return nil, nil
	}
	ids := map[string]bool{}
	for _, e := range entries {
		if m := pairRe.FindStringSubmatch(e.Name()); m != nil {
			ids[m[1]] = true
		}
	}
	for id := range ids {
		m, raw, err := s.readMeta(id)
		if err != nil || s.brokenPair(id, m) {
			broken = append(broken, id)
			continue
		}
		live = append(live, entry{id: id, raw: raw, meta: m})
	}
	sort.Strings(broken)
	return live, broken
}

// brokenPair reports whether the parsed sidecar m of id disagrees with its
// name or with the data file.
func (s *Store) brokenPair(id string, m Meta) bool {
	if idOf(m.Principal, m.Session) != id || checkPrincipal(m.Principal) != nil {
		return true
	}
	fi, err := os.Lstat(s.path(id, extSnap))
	return err != nil || !fi.Mode().IsRegular() || fi.Size() != m.Bytes
}

// dropBroken removes id's pair if, under the lock, it is still broken.
func (s *Store) dropBroken(id string) {
	dropped := false
	err := s.locked(id, func() error {
		s.recover(id)
		m, _, err := s.readMeta(id)
		if errors.Is(err, fs.ErrNotExist) {
			if _, serr := os.Lstat(s.path(id, extSnap)); errors.Is(serr, fs.ErrNotExist) {
				return nil // gone meanwhile
			}
		} else if err == nil && !s.brokenPair(id, m) {
			return nil // a Commit completed meanwhile
		}
		dropped = true
		return s.removePair(id)
	})
	if err != nil {
		s.log.Warn().Err(err).Str("id", id).Msg("snapshot: could not drop a broken pair")
	} else if dropped {
		s.log.Info().Str("id", id).Str("reason", "broken").Msg("snapshot dropped")
	}
}

// dropIfSame removes e's pair if its sidecar is still the one e saw, and
// reports whether the pair is gone: dropped here or meanwhile.
func (s *Store) dropIfSame(e entry, reason string) bool {
	gone, dropped := false, false
	err := s.locked(e.id, func() error {
		cur, err := readSmall(s.path(e.id, extMeta))
		if errors.Is(err, fs.ErrNotExist) {
			gone = true
			return nil
		}
		if err != nil || !bytes.Equal(cur, e.raw) {
			return nil // replaced or used meanwhile: not the pair we judged
		}
		if err := s.removePair(e.id); err != nil {
			return err
		}
		gone, dropped = true, true
		return nil
	})
	if err != nil {
		s.log.Warn().Err(err).Str("id", e.id).Msg("snapshot: could not drop")
		return false
	}
	if dropped {
		s.log.Info().Str("id", e.id).Str("reason", reason).Int64("bytes", e.meta.Bytes).
			Time("used", e.meta.Used).Msg("snapshot dropped")
		s.log.Debug().Str("id", e.id).Str("principal", e.meta.Principal).Str("session", e.meta.Session).
			Msg("snapshot dropped: names")
	}
	return gone
}

// evict drops the least recently used of live, never keep, until the sum of
// their Bytes fits Caps.Total. A pair used or replaced since scan is spared
// this time; the next Commit or Sweep looks again.
func (s *Store) evict(live []entry, keep string) {
	var sum int64
	for _, e := range live {
		sum += e.meta.Bytes
	}
	if sum <= s.caps.Total {
		return
	}
	sort.Slice(live, func(i, j int) bool {
		a, b := live[i].meta.Used, live[j].meta.Used
		if !a.Equal(b) {
			return a.Before(b)
		}
		return live[i].id < live[j].id
	})
	for _, e := range live {
		if sum <= s.caps.Total {
			return
		}
		if e.id != keep && s.dropIfSame(e, "total") {
			sum -= e.meta.Bytes
		}
	}
}

// readMeta reads and parses id's sidecar.
func (s *Store) readMeta(id string) (Meta, []byte, error) {
	var m Meta
	raw, err := readSmall(s.path(id, extMeta))
	if err != nil {
		return m, nil, err
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return m, raw, err
	}
	return m, raw, nil
}

var (
	errTooLarge   = errors.New("file too large")
	errNotRegular = errors.New("not a regular file")
)

// openNoFollow opens path for reading without following a symbolic link
// and without blocking on a FIFO planted in its place (O_NONBLOCK does not
// change reads of a regular file).
func openNoFollow(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
}

// readSmall reads a regular file of at most maxSidecar bytes, not following
// a symbolic link.
func readSmall(path string) ([]byte, error) {
	f, err := openNoFollow(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, errNotRegular
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSidecar+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxSidecar {
		return nil, errTooLarge
	}
	return b, nil
}

// writeAtomic replaces path with data (0600) through a temp file and a
// rename, so a reader sees the old file or the new one, never part of one.
// Its temp file is <name>.tmp-*, which Sweep removes when left behind.
func writeAtomic(path string, data []byte) error {
	return store.WriteFile(path, filepath.Base(path)+".tmp-*", data)
}

// locked runs fn holding this process's mutex and an exclusive flock of
// id's lock file.
func (s *Store) locked(id string, fn func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fenced.Load() {
		return ErrFenced
	}
	return store.Flock(s.path(id, extLock), lockWait, fn)
}
