package image

import (
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// aptDir is where HostMirror looks for apt sources.
const aptDir = "/etc/apt"

// HostMirror returns the Debian mirror configured for the host's apt, read from /etc/apt/sources.list and then
// /etc/apt/sources.list.d/*.list and *.sources, or DefaultMirror when none is found.
func HostMirror() string {
	if m := mirrorFromDir(aptDir); m != "" {
		return m
	}
	return DefaultMirror
}

// mirrorFromDir returns the first Debian mirror found in dir/sources.list and dir/sources.list.d (in apt's order), or
// "".
func mirrorFromDir(dir string) string {
	files := []string{filepath.Join(dir, "sources.list")}
	entries, _ := os.ReadDir(filepath.Join(dir, "sources.list.d"))
	var extra []string
	for _, e := range entries {
		if n := e.Name(); !e.IsDir() && (strings.HasSuffix(n, ".list") || strings.HasSuffix(n, ".sources")) {
			extra = append(extra, filepath.Join(dir, "sources.list.d", n))
		}
	}
	slices.Sort(extra)
	for _, f := range append(files, extra...) {
		data, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		var m string
		if strings.HasSuffix(f, ".sources") {
			m = mirrorFromDeb822(string(data))
		} else {
			m = mirrorFromList(string(data))
		}
		if m != "" {
			return m
		}
	}
	return ""
}

// mirrorFromList returns the first Debian mirror in one-line sources.list content, or "". Lines look like
// `deb [opt=val ...] URI SUITE COMPONENT...`.
func mirrorFromList(content string) string {
	for _, line := range strings.Split(content, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		fields := strings.Fields(line)
		if len(fields) < 3 || fields[0] != "deb" {
			continue
		}
		fields = fields[1:]
		if strings.HasPrefix(fields[0], "[") {
			for len(fields) > 0 && !strings.HasSuffix(fields[0], "]") {
				fields = fields[1:]
			}
			if len(fields) > 0 {
				fields = fields[1:]
			}
		}
		if len(fields) < 2 {
			continue
		}
		if isDebianMirror(fields[0], fields[1:2]) {
			return strings.TrimRight(fields[0], "/")
		}
	}
	return ""
}

// mirrorFromDeb822 returns the first Debian mirror in deb822 .sources content, or "". Stanzas are separated by blank
// lines; the Types, URIs, Suites and Enabled fields are read.
func mirrorFromDeb822(content string) string {
	for _, stanza := range deb822Stanzas(content) {
		if strings.EqualFold(stanza["enabled"], "no") || !slices.Contains(strings.Fields(stanza["types"]), "deb") {
			continue
		}
		suites := strings.Fields(stanza["suites"])
		for _, uri := range strings.Fields(stanza["uris"]) {
			if isDebianMirror(uri, suites) {
				return strings.TrimRight(uri, "/")
			}
		}
	}
	return ""
}

// deb822Stanzas parses deb822 content into stanzas of lower-cased field names to values. Continuation lines are
// appended to the previous field; comment lines are skipped.
func deb822Stanzas(content string) []map[string]string {
	var stanzas []map[string]string
	cur := map[string]string{}
	last := ""
	flush := func() {
		if len(cur) > 0 {
			stanzas = append(stanzas, cur)
		}
		cur, last = map[string]string{}, ""
	}
	for _, line := range strings.Split(content, "\n") {
		line = strings.TrimRight(line, " \t\r")
		switch {
		case line == "":
			flush()
		case strings.HasPrefix(line, "#"):
		case line[0] == ' ' || line[0] == '\t':
			if last != "" {
				cur[last] += " " + strings.TrimSpace(line)
			}
		default:
			name, value, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			last = strings.ToLower(strings.TrimSpace(name))
			cur[last] = strings.TrimSpace(value)
		}
	}
	flush()
	return stanzas
}

// isDebianMirror reports whether uri with suites looks like a Debian main archive: an http(s) URI with a path
// segment "debian" (so also snapshot.debian.org/archive/debian/<date>), and at least one suite that is not a
// security suite. Third-party repositories and debian-security are rejected.
func isDebianMirror(uri string, suites []string) bool {
	u, err := url.Parse(uri)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return false
	}
	if !slices.Contains(strings.Split(u.Path, "/"), "debian") {
		return false
	}
	for _, s := range suites {
		if !strings.Contains(s, "security") && !strings.Contains(s, "/") {
			return true
		}
	}
	return false
}
