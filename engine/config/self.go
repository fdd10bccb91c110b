package config

import (
	"os"
	"path/filepath"
	"strings"
)

// selfToken reports whether s, already lower-cased, names the reference
// bridge (§10.3 rule a).
func selfToken(s string) bool {
	return s == "mcp-server-code-execution-mode" || s == "mcp_server_code_execution_mode" ||
		strings.HasSuffix(s, "mcp_server_code_execution_mode.py")
}

// isSelf reports whether e would launch a bridge (§10.3), unless the guard is
// off. The rules, in order: (a) the lower-cased name, command basename, an
// arg or an arg's basename is a self token; (b) the command basename equals
// the running executable's, or is "bridge" with first arg "run"; (c) the
// command resolves, through LookPath and symlinks, to the running executable.
func (l *loader) isSelf(e Entry) bool {
	if l.o.AllowSelf {
		return false
	}
	if selfToken(strings.ToLower(e.Name)) {
		return true
	}
	if e.Type != TypeStdio {
		return false
	}
	base := filepath.Base(e.Command)
	if selfToken(strings.ToLower(base)) {
		return true
	}
	for _, a := range e.Args {
		a = strings.ToLower(a)
		if selfToken(a) || selfToken(filepath.Base(a)) {
			return true
		}
	}
	// `bridge run` is this program however it was installed.
	if base == "bridge" && len(e.Args) > 0 && e.Args[0] == "run" {
		return true
	}
	if l.self == "" {
		return false
	}
	if base == filepath.Base(l.self) {
		return true
	}
	p := l.resolve(e)
	if p == "" {
		return false
	}
	if p == l.self {
		return true
	}
	fi, err := os.Stat(p)
	return err == nil && l.selfInfo != nil && os.SameFile(fi, l.selfInfo)
}

// resolve returns the absolute, symlink-free path that e's command runs, or
// "" when it cannot be found. A relative command with a slash is taken
// relative to the entry's cwd, as os/exec does with Cmd.Dir.
func (l *loader) resolve(e Entry) string {
	cmd := e.Command
	if strings.Contains(cmd, "/") && !filepath.IsAbs(cmd) && e.Cwd != "" {
		cmd = filepath.Join(e.Cwd, cmd)
	}
	p, err := l.o.LookPath(cmd)
	if err != nil || p == "" {
		return ""
	}
	if p, err = filepath.Abs(p); err != nil {
		return ""
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		p = r
	}
	return p
}
