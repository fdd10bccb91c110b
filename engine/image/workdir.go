package image

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// removeWorkDir deletes the work directory of a build, unless something is still mounted below it (a bootstrap killed
// before it unmounted /proc or /dev of the rootfs): deleting through such a mount would delete host files, so the
// directory is then left in place and reported.
func (b *builder) removeWorkDir(dir string) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err == nil {
		if mounts := mountsUnder(string(data), dir); len(mounts) > 0 {
			b.progress("leaving %s in place: %s still mounted; unmount, then delete it", dir, strings.Join(mounts, ", "))
			return
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		b.progress("cannot delete %s: %v", dir, err)
	}
}

// mountsUnder returns the mount points in mountinfo (the format of /proc/self/mountinfo) that lie below dir.
func mountsUnder(mountinfo, dir string) []string {
	prefix := filepath.Clean(dir) + string(filepath.Separator)
	var out []string
	for _, line := range strings.Split(mountinfo, "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		if mp := unescapeMountinfo(fields[4]); strings.HasPrefix(mp, prefix) {
			out = append(out, mp)
		}
	}
	return out
}

// unescapeMountinfo decodes the octal escapes (\040 for a space, ...) of a mountinfo path.
func unescapeMountinfo(s string) string {
	var sb strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if c, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				sb.WriteByte(byte(c))
				i += 3
				continue
			}
		}
		sb.WriteByte(s[i])
	}
	return sb.String()
}
