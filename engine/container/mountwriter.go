package container

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Writer is the host identity a sandbox writes a read-write mount's files
// as, which differs by runtime (README "Host folders").
type Writer struct {
	// Self: the user running the bridge; rootless podman maps it to the
	// sandbox user (keep-id).
	Self bool
	// AnyUID: each session runs as its own host uid (rootful podman's id
	// maps), so only a folder that everyone may write is writable.
	AnyUID bool
	// UID and GID are the one host identity otherwise: Docker, rootful
	// podman without id maps, gVisor.
	UID, GID uint32
	// Why says which of the three applies, for messages.
	Why string
}

// MountWriter returns who this launcher's sandboxes write mounts as, by
// the rules the sandbox's own flags follow (MountArgs, confinement).
func (l *Launcher) MountWriter() Writer {
	l.settle()
	_, podman, oci, _ := l.resolve()
	switch {
	case podman && os.Geteuid() != 0:
		return Writer{Self: true, Why: "rootless podman maps the sandbox user to you (keep-id)"}
	case podman && filepath.Base(oci) != "runsc" && ContainersRangeProblem("/etc/subuid", "/etc/subgid") == "":
		return Writer{AnyUID: true, Why: "rootful podman runs each session as its own host uid"}
	}
	uid, gid := uint32(sandboxID), uint32(sandboxID)
	u, g, _ := strings.Cut(l.cfg.ContainerUser, ":")
	if n, err := strconv.ParseUint(u, 10, 32); err == nil {
		uid, gid = uint32(n), uint32(n)
	}
	if n, err := strconv.ParseUint(g, 10, 32); err == nil {
		gid = uint32(n)
	}
	return Writer{UID: uid, GID: gid, Why: fmt.Sprintf("the sandbox user is host uid %d", uid)}
}

// Writable reports whether w may create files in dir: the kernel's answer
// for Self, else dir's mode bits (ACLs are not read).
func (w Writer) Writable(dir string) bool {
	if w.Self {
		return unix.Access(dir, unix.W_OK|unix.X_OK) == nil
	}
	st, err := os.Stat(dir)
	if err != nil {
		return false
	}
	sys, ok := st.Sys().(*syscall.Stat_t)
	if !ok {
		return false
	}
	const wx = 0o3
	mode := uint32(st.Mode().Perm())
	switch {
	case w.AnyUID:
		return mode&wx == wx
	case sys.Uid == w.UID:
		return mode>>6&wx == wx
	case sys.Gid == w.GID:
		return mode>>3&wx == wx
	}
	return mode&wx == wx
}

// Fix is the command that makes dir writable for w.
func (w Writer) Fix(dir string) string {
	switch {
	case w.Self:
		return fmt.Sprintf("`chmod u+rwx %s` (as its owner)", dir)
	case w.AnyUID:
		return fmt.Sprintf("`chmod 1777 %s`, or mount it without :rw", dir)
	}
	return fmt.Sprintf("`chown %d:%d %s`, or `chmod 1777 %s`", w.UID, w.GID, dir, dir)
}
