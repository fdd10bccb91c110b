// Package owner names this bridge process on the host and tells whether
// another bridge, or a process it left, still lives: the bridge.owner
// label on containers and children (CTR-4), its lock file, and what /proc
// says about processes. The container backend's sweep and the children
// registry use it.
package owner

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// lockMark separates the host/pid/start part of a bridge.owner label from
// the path of the owner's lock file.
const lockMark = "/lock="

// owner is this process's label and the lock file that proves it alive.
var owner struct {
	once  sync.Once
	label string
	lock  *os.File // held open, with an exclusive flock, until the process exits
}

// Label returns this process's bridge.owner label (CTR-4):
// host/pid/start ms/lock=<path>. The path names a file this process holds an
// exclusive flock on for its whole life, in a directory every bridge of the
// user shares (LockDir); the kernel drops the lock however the process
// ends, so any bridge on any OS, whatever its state dir, can tell whether
// the owner lives without /proc. Bridges from before the lock read the label
// as another host's (it has more than three '/'-separated parts) and never
// touch it. When no lock can be taken the label is host/pid/start ms, the
// old form, which only Linux can check.
func Label() string {
	owner.once.Do(func() {
		host, _ := os.Hostname()
		owner.label = fmt.Sprintf("%s/%d/%d", host, os.Getpid(), StartMs(os.Getpid()))
		if path, f, err := takeOwnerLock(LockDir()); err == nil {
			owner.lock = f
			owner.label += lockMark + path
		}
	})
	return owner.label
}

// LockDir is where bridges keep their owner locks: the user's cache
// directory (~/.cache/bridge/owners, ~/Library/Caches/bridge/owners), or a
// per-uid directory under the temp dir when there is no home.
func LockDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "bridge", "owners")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("bridge-owners-%d", os.Getuid()))
}

// takeOwnerLock creates a lock file in dir, holds an exclusive flock on it
// and returns its final path. The file is locked under a temporary name and
// then renamed, so no other bridge ever sees the final name unlocked. Lock
// files of dead bridges are removed first.
func takeOwnerLock(dir string) (string, *os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	pruneOwnerLocks(dir)
	f, err := os.CreateTemp(dir, ".new-*")
	if err != nil {
		return "", nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", nil, err
	}
	id := make([]byte, 6)
	_, _ = rand.Read(id)
	final := filepath.Join(dir, fmt.Sprintf("%d-%s.lock", os.Getpid(), hex.EncodeToString(id)))
	if err := os.Rename(f.Name(), final); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", nil, err
	}
	return final, f, nil
}

// pruneOwnerLocks removes the lock files in dir that no process holds.
func pruneOwnerLocks(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".lock") {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if !ownerLockHeld(path) {
			_ = os.Remove(path)
		}
	}
}

// ownerLockHeld reports whether some process holds the lock at path. A
// missing file means its owner is gone (it is removed only once unheld);
// anything that cannot be checked counts as held, so a living owner is
// never taken for dead.
func ownerLockHeld(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return !errors.Is(err, fs.ErrNotExist)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return true // EWOULDBLOCK: held; any other error: cannot tell
	}
	return false
}

func bootTimeMs() int64 {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			s, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return s * 1000
		}
	}
	return 0
}

// Alive reports whether a bridge.owner label names a living bridge on
// this host. Labels of other hosts count as alive: they are never touched.
// A label with a lock path is alive while its lock is held. A label in the
// old form host/pid/start ms is checked against /proc on Linux and counts
// as alive elsewhere; an unparseable label counts as alive.
func Alive(label string) bool {
	base, lock, hasLock := strings.Cut(label, lockMark)
	parts := strings.Split(base, "/")
	if len(parts) != 3 {
		return true
	}
	host, _ := os.Hostname()
	if parts[0] != host {
		return true
	}
	if hasLock {
		return lock == "" || ownerLockHeld(lock)
	}
	if runtime.GOOS != "linux" {
		return true
	}
	pid, err1 := strconv.Atoi(parts[1])
	start, err2 := strconv.ParseInt(parts[2], 10, 64)
	if err1 != nil || err2 != nil {
		return true
	}
	got := StartMs(pid)
	return got != 0 && got == start
}
