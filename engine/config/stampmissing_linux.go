package config

import (
	"io/fs"
	"syscall"
)

// dirStatOf is fi's identity and times; ok is false when fi carries no
// raw stat.
func dirStatOf(fi fs.FileInfo) (dirStat, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return dirStat{}, false
	}
	return dirStat{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mode: fi.Mode(),
		mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}, true
}
