// Package store is the host side of the sandbox's persistent memory and saved
// tools (SPEC §20): files under <state>/.bridge/memory/ and
// <state>/.bridge/tools/, reached from the sandbox over the link, never
// through a mount. Every write goes to a temporary file that is renamed into
// place (0600 files in 0700 dirs), under an flock on the directory's .lock
// file, so two bridge processes sharing the state dir never interleave a
// read-compare-write: a conditional put (update_memory) either sees the rev
// it read or fails with a conflict.
package store

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"syscall"
	"time"

	"github.com/bridge-mcp/bridge/protocol"
)

// MaxToolBytes bounds one saved tool's source (SAV-1); MaxTools bounds how
// many are kept.
const (
	MaxToolBytes = 256 << 10
	MaxTools     = 256
)

// lockWait bounds how long an operation waits for another process's lock.
const lockWait = 5 * time.Second

// Defaults of the options.
const (
	DefaultMaxKeys   = 10_000
	DefaultListBytes = 8 << 20
)

// Store is the memory and saved-tool store of one state dir. It is safe for
// concurrent use, also by several processes sharing the dir.
type Store struct {
	dir       string // <state>/.bridge
	maxValue  int
	maxTotal  int
	maxKeys   int
	listBytes int
	mu        sync.Mutex // serializes this process's operations; flock covers other processes
	now       func() time.Time
}

// Option sets a store limit beyond the two New takes.
type Option func(*Store)

// WithMaxKeys caps how many memories are kept (DefaultMaxKeys).
func WithMaxKeys(n int) Option { return func(s *Store) { s.maxKeys = n } }

// WithListBytes bounds one page of MemoryList, in JSON bytes
// (DefaultListBytes); the link's frame must hold it with room to spare.
func WithListBytes(n int) Option { return func(s *Store) { s.listBytes = n } }

// New returns the store under stateDir/.bridge; maxValue bounds one memory
// (value plus metadata, in JSON bytes) and maxTotal all of them together,
// each charged in whole disk blocks (see usage.go).
func New(stateDir string, maxValue, maxTotal int, opts ...Option) *Store {
	s := &Store{dir: filepath.Join(stateDir, ".bridge"), maxValue: maxValue, maxTotal: maxTotal,
		maxKeys: DefaultMaxKeys, listBytes: DefaultListBytes, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s
}

// MemoryDir is where memories are kept.
func (s *Store) MemoryDir() string { return filepath.Join(s.dir, "memory") }

// ToolsDir is where saved tools are kept.
func (s *Store) ToolsDir() string { return filepath.Join(s.dir, "tools") }

func invalid(format string, args ...any) error {
	return &protocol.StoreError{Code: protocol.CodeInvalidArguments, Kind: protocol.KindInvalidArguments, Message: fmt.Sprintf(format, args...)}
}

func diskError(err error) error {
	return &protocol.StoreError{Code: protocol.CodeServerError, Kind: protocol.KindServerError, Message: "store: " + err.Error()}
}

// shown shortens a user-supplied name for an error message.
func shown(s string) string {
	if len(s) > 80 {
		return s[:77] + "..."
	}
	return s
}

// locked runs fn holding this process's mutex and an exclusive flock of
// dir/.lock, creating dir (0700) when needed.
func (s *Store) locked(dir string, fn func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return diskError(err)
	}
	var inner error
	if err := Flock(filepath.Join(dir, ".lock"), lockWait, func() error {
		inner = fn()
		return nil
	}); err != nil {
		return diskError(err)
	}
	return inner
}

// Flock runs fn holding an exclusive flock of the lock file at path
// (created 0600), waiting at most wait for another process to release it.
// Lock files stay on disk.
func Flock(path string, wait time.Duration, fn func() error) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	deadline := time.Now().Add(wait)
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return fmt.Errorf("lock %s: %w", path, err)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s is locked by another bridge for over %s", path, wait)
		}
		time.Sleep(2 * time.Millisecond)
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing the file unlocks too
	return fn()
}

// writeFile replaces path atomically with data, mode 0600.
func writeFile(path string, data []byte) error { return WriteFile(path, ".tmp-*", data) }

// WriteFile replaces path atomically with data, mode 0600, through a
// temporary file in its folder named by pattern (os.CreateTemp's): a
// reader sees the old file or the new one, never part of one.
func WriteFile(path, pattern string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), pattern)
	if err != nil {
		return err
	}
	name := tmp.Name()
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(name, 0o600)
	}
	if err == nil {
		err = os.Rename(name, path)
	}
	if err != nil {
		os.Remove(name)
	}
	return err
}

func newRev() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func unixSeconds(t time.Time) float64 {
	return float64(t.UnixNano()) / 1e9
}

// readSmall reads a regular file of at most limit bytes.
func readSmall(path string, limit int64) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", filepath.Base(path))
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%s is %d bytes, over %d", filepath.Base(path), fi.Size(), limit)
	}
	return os.ReadFile(path)
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

var (
	keyRe  = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)
	nameRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
)

// removeLocked removes path under dir's lock and reports whether it existed.
func (s *Store) removeLocked(dir, path string) (bool, error) {
	deleted := false
	err := s.locked(dir, func() error {
		err := os.Remove(path)
		if isNotExist(err) {
			return nil
		}
		if err != nil {
			return diskError(err)
		}
		deleted = true
		return nil
	})
	return deleted, err
}
