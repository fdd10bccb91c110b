package container

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/bridge-mcp/bridge/engine/owner"
)

// idBlockSize is the number of host uids (and gids) one container gets:
// enough for every uid of the image (65534 is the sandbox user).
const idBlockSize = 65536

// IDMap is one container's user-namespace mapping. Rootful podman maps a
// whole block: ids 0..65535 inside are UID.. and GID.. on the host. Rootless
// podman (Single) maps root to the user (as its default map does) and only
// the sandbox user 65534 to UID and GID of the user's own namespace, ids
// from the user's subuid range: a user usually has one block of 65536 to
// share among all sessions.
type IDMap struct {
	UID, GID uint32
	Single   bool
}

// Args are the --uidmap and --gidmap flags of m.
func (m IDMap) Args() []string {
	if m.Single {
		return []string{
			"--uidmap", "0:0:1", "--uidmap", fmt.Sprintf("%d:%d:1", sandboxID, m.UID),
			"--gidmap", "0:0:1", "--gidmap", fmt.Sprintf("%d:%d:1", sandboxID, m.GID),
		}
	}
	return []string{"--uidmap", fmt.Sprintf("0:%d:%d", m.UID, idBlockSize), "--gidmap", fmt.Sprintf("0:%d:%d", m.GID, idBlockSize)}
}

// sandboxID is the uid and gid of the sandbox user inside (the default
// MCP_BRIDGE_CONTAINER_USER, nobody).
const sandboxID = 65534

// idBlocks hands out per-container id maps, so every session runs as its
// own host uid (keyrings, RLIMIT_NPROC and inotify limits are per user):
// on rootful podman blocks of 65536 host uids and gids from the
// "containers" ranges of /etc/subuid and /etc/subgid; on rootless podman
// single ids of the user's own user namespace (1..n are the user's
// subuids).
//
// It replaces podman's --userns auto, which does the same job but
// deadlocks podman 4.3 (Debian 12) when four containers start at once: the
// auto allocation takes the storage locks in an order that other starting
// containers invert.
//
// Invariant: a block is in use exactly while some process holds an flock
// on <dir>/<index>.lock; the kernel drops it when that process dies, so a
// crashed bridge never leaks a block, and bridges running side by side never
// hand out the same one. Blocks are taken lowest first, so the lock files
// number at most the peak count of concurrent containers.
type idBlocks struct {
	dir      string
	uid, gid uint32 // first id of each range
	size     uint32 // ids per block: idBlockSize, or 1 for single maps
	n        int    // blocks that fit in both ranges
	single   bool

	mu   sync.Mutex       // guards held
	held map[int]*os.File // blocks this process holds, by index
}

// errNoIDBlock means every block is held.
var errNoIDBlock = errors.New("id map: every block of the containers range is in use")

// newIDBlocks reads the "containers" ranges of the subuid and subgid
// files (rootful podman); ok is false when either lacks one of at least
// one block.
func newIDBlocks(subuid, subgid, dir string) (b *idBlocks, ok bool) {
	uid, un, uok := SubIDRange(subuid, "containers")
	gid, gn, gok := SubIDRange(subgid, "containers")
	n := int(min(un, gn) / idBlockSize)
	if !uok || !gok || n < 1 {
		return nil, false
	}
	return &idBlocks{dir: dir, uid: uid, gid: gid, size: idBlockSize, n: n, held: map[int]*os.File{}}, true
}

// newSingleIDs reads the current user's ranges of the subuid and subgid
// files (rootless podman, whose namespace maps ids 1..count to them); ok
// is false when either lacks one. users are the names the user's lines may
// have: its name and its uid.
func newSingleIDs(subuid, subgid, dir string, users ...string) (b *idBlocks, ok bool) {
	_, un, uok := SubIDRange(subuid, users...)
	_, gn, gok := SubIDRange(subgid, users...)
	if !uok || !gok {
		return nil, false
	}
	return &idBlocks{dir: dir, uid: 1, gid: 1, size: 1, n: int(min(un, gn)), single: true, held: map[int]*os.File{}}, true
}

// acquire takes the lowest free block; release gives it back.
func (b *idBlocks) acquire() (m IDMap, release func(), err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := os.MkdirAll(b.dir, 0o700); err != nil {
		return IDMap{}, nil, fmt.Errorf("id map: %w", err)
	}
	for i := 0; i < b.n; i++ {
		if b.held[i] != nil {
			continue
		}
		f, err := os.OpenFile(filepath.Join(b.dir, strconv.Itoa(i)+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return IDMap{}, nil, fmt.Errorf("id map: %w", err)
		}
		if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
			f.Close() // another bridge holds it
			continue
		}
		b.held[i] = f
		off := uint32(i) * b.size
		var once sync.Once
		return IDMap{UID: b.uid + off, GID: b.gid + off, Single: b.single}, func() { once.Do(func() { b.release(i) }) }, nil
	}
	return IDMap{}, nil, errNoIDBlock
}

func (b *idBlocks) release(i int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if f := b.held[i]; f != nil {
		f.Close() // drops the flock
		delete(b.held, i)
	}
}

// idBlockDir is where bridges keep their id-block locks, beside the owner
// locks.
func idBlockDir() string { return filepath.Join(filepath.Dir(owner.LockDir()), "idmaps") }

// SubIDRange returns the first id and the size of the first range in a
// subuid/subgid file whose line names one of users; ok is false when there
// is none, or it runs past the last valid id.
func SubIDRange(file string, users ...string) (first, count uint32, ok bool) {
	data, err := os.ReadFile(file)
	if err != nil {
		return 0, 0, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Split(strings.TrimSpace(line), ":")
		if len(f) != 3 || !slices.Contains(users, f[0]) {
			continue
		}
		start, err1 := strconv.ParseUint(f[1], 10, 32)
		n, err2 := strconv.ParseUint(f[2], 10, 32)
		// 2^32-1 is (uid_t)-1, never a valid id.
		if err1 != nil || err2 != nil || n == 0 || start+n > 1<<32-1 {
			continue
		}
		return uint32(start), uint32(n), true
	}
	return 0, 0, false
}
