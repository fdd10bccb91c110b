//go:build !linux

package config

import "io/fs"

// dirStatOf reports !ok: missing paths are stat'ed at every stamp here.
func dirStatOf(fs.FileInfo) (dirStat, bool) { return dirStat{}, false }
