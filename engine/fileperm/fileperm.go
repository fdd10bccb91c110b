// Package fileperm tells which permissions of a secret file (the tokens
// file, the snapshot key) reach anyone but its owner. One rule for every
// such check: group permissions count as the owner's when the file's group
// is the process's own gid. That is a Kubernetes Secret mounted with
// defaultMode 0440 and fsGroup equal to the pod's runAsGroup (the kubelet
// cannot give the file a non-root owner), or a workstation user's private
// group; a group the process is only a supplementary member of, which
// others may share, still counts as others.
package fileperm

import (
	"io/fs"
	"os"
	"syscall"
)

// Foreign is the permission bits of fi that reach others than the file's
// owner: its group and world bits, less the group bits when the group is
// the process's own gid.
func Foreign(fi fs.FileInfo) fs.FileMode {
	perm := fi.Mode().Perm() & 0o077
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok && int(sys.Gid) == os.Getgid() {
		perm &^= 0o070
	}
	return perm
}
