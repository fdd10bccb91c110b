package container

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Mount is one opt-in host folder of MCP_BRIDGE_MOUNTS.
type Mount struct {
	Host      string // absolute, symlinks resolved
	Container string // absolute, clean, under MountRoots
	RW        bool   // read-only unless the entry ends in :rw
}

// MountRoots are the container directories a mount may go under: user
// space, never the image's system directories and never /workspace itself.
var MountRoots = []string{"/data", "/mnt", "/media", "/srv", "/home", "/workspace/"}

// ParseMounts parses MCP_BRIDGE_MOUNTS: HOST:CONTAINER[:ro|rw] entries,
// comma-separated, read-only by default. Each host path must exist and
// neither be nor contain the state or config dir (nor lie in the bridge's
// own <state>/.bridge); each container path must be absolute, clean, under
// MountRoots, and used once. The error is the reason for the first bad
// entry, phrased to follow "want ".
func ParseMounts(spec, stateDir, configDir string) ([]Mount, error) {
	if strings.TrimSpace(spec) == "" {
		return nil, nil
	}
	var out []Mount
	seen := map[string]bool{}
	for _, entry := range strings.Split(spec, ",") {
		entry = strings.TrimSpace(entry)
		m, err := parseMount(entry, stateDir, configDir)
		if err == nil && seen[m.Container] {
			err = fmt.Errorf("each container path once: %s is mounted twice", m.Container)
		}
		if err != nil {
			return nil, fmt.Errorf("%w (entry %q)", err, entry)
		}
		seen[m.Container] = true
		out = append(out, m)
	}
	return out, nil
}

func parseMount(entry, stateDir, configDir string) (Mount, error) {
	parts := strings.Split(entry, ":")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return Mount{}, errors.New("HOST:CONTAINER[:ro|rw] entries, comma-separated")
	}
	m := Mount{Container: parts[1]}
	if len(parts) == 3 {
		switch parts[2] {
		case "ro":
		case "rw":
			m.RW = true
		default:
			return Mount{}, fmt.Errorf("mode ro or rw, not %q", parts[2])
		}
	}
	host := parts[0]
	for _, p := range []string{host, m.Container} {
		if strings.ContainsAny(p, "\"'\n\r\t=") {
			return Mount{}, fmt.Errorf("paths without quotes, '=' or control characters, not %q", p)
		}
	}
	if !filepath.IsAbs(host) {
		return Mount{}, fmt.Errorf("an absolute host path, not %q", host)
	}
	if _, err := os.Stat(host); err != nil {
		return Mount{}, fmt.Errorf("an existing host path: %s does not exist or cannot be read", host)
	}
	resolved, err := filepath.EvalSymlinks(host)
	if err != nil {
		return Mount{}, fmt.Errorf("an existing host path: %s: %v", host, err)
	}
	m.Host = resolved
	for _, dir := range []string{stateDir, configDir} {
		d := resolveDir(dir)
		if d == "" {
			continue
		}
		if within(d, m.Host) || within(m.Host, filepath.Join(d, ".bridge")) {
			return Mount{}, fmt.Errorf("a host path that neither is nor contains the bridge's state or config dir (%s)", d)
		}
	}
	if !strings.HasPrefix(m.Container, "/") || path.Clean(m.Container) != m.Container {
		return Mount{}, fmt.Errorf("an absolute, clean container path, not %q", m.Container)
	}
	if !underRoots(m.Container) {
		return Mount{}, fmt.Errorf("a container path under /data, /mnt, /media, /srv, /home or /workspace/<dir>, not %s", m.Container)
	}
	return m, nil
}

// resolveDir is dir absolute with symlinks resolved when it exists, "" for "".
func resolveDir(dir string) string {
	if dir == "" {
		return ""
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	if r, err := filepath.EvalSymlinks(dir); err == nil {
		return r
	}
	return filepath.Clean(dir)
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, dir+string(filepath.Separator))
}

func isDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

func underRoots(c string) bool {
	if within(c, "/workspace/.bridge") {
		return false // the bridge's own spill and image files
	}
	for _, root := range MountRoots {
		if strings.HasSuffix(root, "/") {
			if strings.HasPrefix(c, root) {
				return true
			}
		} else if within(c, root) {
			return true
		}
	}
	return false
}

// MountArgs are the container flags of the configured mounts: each a bind
// mount, read-only unless rw, with nosuid, nodev and noexec like the
// tmpfs mounts (podman; docker's bind mounts cannot take them, see
// docs/SECURITY.md). keepID maps the user's own uid and gid to the
// container user 65534 (rootless podman), so rw mounts are writable
// without chmod and new files belong to the user on the host.
func MountArgs(mounts []Mount, podman, keepID bool, user string) []string {
	if len(mounts) == 0 {
		return nil
	}
	var a []string
	if podman && keepID {
		uid, gid, _ := strings.Cut(user, ":")
		if gid == "" {
			gid = uid
		}
		if isDigits(uid) && isDigits(gid) {
			a = append(a, "--userns=keep-id:uid="+uid+",gid="+gid)
		} else {
			a = append(a, "--userns=keep-id")
		}
	}
	for _, m := range mounts {
		if podman {
			mode := "ro"
			if m.RW {
				mode = "rw"
			}
			a = append(a, "--volume", m.Host+":"+m.Container+":"+mode+",nosuid,nodev,noexec")
			continue
		}
		v := "type=bind,source=" + m.Host + ",target=" + m.Container
		if !m.RW {
			v += ",readonly"
		}
		a = append(a, "--mount", v)
	}
	return a
}
