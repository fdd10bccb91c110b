package config

import (
	"errors"
	"unsafe"

	"golang.org/x/sys/unix"
)

// eventQueue is an inotify instance read without blocking: the Gate's
// caller holds the Gate's lock, so it is never read concurrently.
type eventQueue struct {
	fd      int
	watches map[int32]*watchDir // by watch descriptor: what matters in each watched dir
	buf     [16 << 10]byte
}

// gateMask is every event that changes what a stat or a listing of the
// directory's entries shows, and the directory's own end.
const gateMask = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_MOVED_FROM |
	unix.IN_MOVED_TO | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR

// gateFileMask is every event that changes what a stat of a file shows.
const gateFileMask = unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

// gateLocalFS are the filesystems whose every change, from any process on
// this host, raises an event (statfs f_type). A network or FUSE filesystem
// can change behind the kernel's back; a directory on one keeps the Gate
// open.
var gateLocalFS = map[uint32]bool{
	unix.EXT4_SUPER_MAGIC:      true, // ext2, ext3 and ext4 share it
	unix.XFS_SUPER_MAGIC:       true,
	unix.BTRFS_SUPER_MAGIC:     true,
	unix.TMPFS_MAGIC:           true,
	unix.OVERLAYFS_SUPER_MAGIC: true,
	unix.F2FS_SUPER_MAGIC:      true,
	unix.RAMFS_MAGIC:           true,
	0x2fc12fc1:                 true, // zfs
}

func openEventQueue() (*eventQueue, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, err
	}
	return &eventQueue{fd: fd, watches: map[int32]*watchDir{}}, nil
}

func (q *eventQueue) close() { _ = unix.Close(q.fd) }

// watch makes the watches exactly plan's; false when a directory could not
// be watched or is not on a local filesystem (the queue is then of no use).
func (q *eventQueue) watch(plan map[string]*watchDir) bool {
	next := make(map[int32]*watchDir, len(plan))
	for dir, w := range plan {
		var fs unix.Statfs_t
		if err := unix.Statfs(dir, &fs); err != nil || !gateLocalFS[uint32(fs.Type)] {
			return false
		}
		mask := uint32(gateMask)
		if w.file {
			mask = gateFileMask
		}
		wd, err := unix.InotifyAddWatch(q.fd, dir, mask)
		if err != nil {
			return false
		}
		if prev := next[int32(wd)]; prev != nil { // two paths, one inode (a symlink)
			for n := range w.names {
				prev.names[n] = true
			}
			prev.all = prev.all || w.all
			continue
		}
		next[int32(wd)] = w
	}
	for wd := range q.watches {
		if next[wd] == nil {
			_, _ = unix.InotifyRmWatch(q.fd, uint32(wd))
		}
	}
	q.watches = next
	return true
}

// quiet reads every queued event and reports whether none of them
// matters.
func (q *eventQueue) quiet() bool {
	quiet := true
	for {
		n, err := unix.Read(q.fd, q.buf[:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || n <= 0 {
			return quiet && errors.Is(err, unix.EAGAIN)
		}
		if quiet {
			quiet = !q.matters(q.buf[:n])
		}
	}
}

// matters reports whether any event in b concerns a watched name, a
// watched directory itself, or is an overflow.
func (q *eventQueue) matters(b []byte) bool {
	for len(b) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&b[0]))
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(b) {
			return true // the kernel writes whole events; be safe
		}
		name := b[unix.SizeofInotifyEvent:end]
		for len(name) > 0 && name[len(name)-1] == 0 {
			name = name[:len(name)-1]
		}
		b = b[end:]
		if ev.Mask&unix.IN_Q_OVERFLOW != 0 {
			return true
		}
		w := q.watches[ev.Wd]
		if w == nil { // a watch removed by watch: its IN_IGNORED
			continue
		}
		if len(name) == 0 || w.all || w.names[string(name)] {
			return true
		}
	}
	return false
}
