package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"os"
	"path/filepath"
	"strings"
)

// Stamp is a cheap fingerprint of the config sources (RLD-1): the dir's own
// mtime, and the name, size, mode and mtime of each *.json in it, of
// Extra and of the enabled agent config files, without reading any file. Equal stamps mean Load would read the
// same files; take the stamp before calling Load, so a change that races
// the load shows up at the next check.
func Stamp(o Options) string {
	h := sha256.New()
	fmt.Fprintf(h, "dir %q\n", o.Dir)
	if o.Dir != "" {
		stampPath(h, o.Dir)
		if des, err := os.ReadDir(o.Dir); err != nil {
			fmt.Fprintf(h, "list error %q\n", errText(err))
		} else {
			for _, de := range des { // ReadDir sorts by name
				if strings.HasSuffix(de.Name(), ".json") {
					fmt.Fprintf(h, "file %q ", de.Name())
					stampPath(h, filepath.Join(o.Dir, de.Name()))
				}
			}
		}
	}
	fmt.Fprintf(h, "extra %q ", o.Extra)
	if o.Extra != "" {
		stampPath(h, o.Extra)
	}
	stampAgentFiles(o, func(format string, a ...any) { fmt.Fprintf(h, format, a...) }, func(p string) { stampPath(h, p) })
	return hex.EncodeToString(h.Sum(nil))
}

// stampPath writes what a stat of path (symlinks followed) shows.
func stampPath(h hash.Hash, path string) {
	fi, err := os.Stat(path)
	if err != nil {
		fmt.Fprintf(h, "error %q\n", errText(err))
		return
	}
	fmt.Fprintf(h, "%d %d %v\n", fi.Size(), fi.ModTime().UnixNano(), fi.Mode())
}
