package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A project file (./.mcp.json, ./.cursor/mcp.json, ./.vscode/mcp.json,
// ./opencode.json, ./.mcp/*.json, ./mcp-servers/*.json) comes with a
// repository the user may have just cloned, so starting its servers runs a
// stranger's commands on the host. Its servers are listed, but start only
// once approved: by the client's own record (Claude Code's, for
// ./.mcp.json) or by MCP_BRIDGE_PROJECT_SERVERS.

// Values of MCP_BRIDGE_PROJECT_SERVERS.
const (
	// ProjectApproved starts the project servers the client approved (the
	// default); the others are listed with the fix.
	ProjectApproved = "approved"
	// ProjectAll starts every project server.
	ProjectAll = "all"
	// ProjectNone does not read the project files at all.
	ProjectNone = "none"
)

// ParseProjectServers parses MCP_BRIDGE_PROJECT_SERVERS: "" is
// ProjectApproved; any case, blanks trimmed.
func ParseProjectServers(s string) (string, error) {
	switch s = strings.ToLower(strings.TrimSpace(s)); s {
	case "", ProjectApproved:
		return ProjectApproved, nil
	case ProjectAll, ProjectNone:
		return s, nil
	}
	return "", fmt.Errorf("unknown value %q", s)
}

// projectScopes reports whether the project files are read.
func (o Options) projectScopes() bool {
	return o.Project && o.Cwd != "" && o.ProjectServers != ProjectNone
}

// gate decides which servers of one project file may start.
type gate struct {
	approved func(name string) bool
	// reason is the Problem reason of an unapproved server: how to approve it.
	reason string
}

// The reasons of unapproved servers; each names the fix.
const (
	reasonClaude  = "not approved: approve it in Claude Code (/mcp), or set MCP_BRIDGE_PROJECT_SERVERS=all"
	reasonProject = "not approved: set MCP_BRIDGE_PROJECT_SERVERS=all to start the servers of the project files"
)

// gateFor returns the gate of f's servers; nil for the user's own files,
// whose servers always start.
func (l *loader) gateFor(f agentFile) *gate {
	switch {
	case !f.project:
		return nil
	case l.o.ProjectServers == ProjectAll:
		return &gate{approved: func(string) bool { return true }}
	case f.claude:
		a := l.claudeApprovals()
		return &gate{approved: a.approved, reason: reasonClaude}
	}
	// The other clients keep their approvals where the bridge cannot read
	// them (editor state databases).
	return &gate{approved: func(string) bool { return false }, reason: reasonProject}
}

// approvals is Claude Code's record of the ./.mcp.json servers the user
// approved for the project: enableAllProjectMcpServers approves every one,
// enabledMcpjsonServers some, and disabledMcpjsonServers rejects some,
// whatever the others say.
type approvals struct {
	all      bool
	enabled  map[string]bool
	disabled map[string]bool
}

func (a *approvals) approved(name string) bool {
	return !a.disabled[name] && (a.all || a.enabled[name])
}

// merge adds the approval keys of one settings object; a later, more
// specific file's enableAllProjectMcpServers overrides an earlier one's.
func (a *approvals) merge(o *object) {
	if v, ok := o.get("enableAllProjectMcpServers"); ok {
		if b, isBool := v.(bool); isBool {
			a.all = b
		}
	}
	for key, set := range map[string]map[string]bool{"enabledMcpjsonServers": a.enabled, "disabledMcpjsonServers": a.disabled} {
		v, _ := o.get(key)
		list, _ := v.([]any)
		for _, item := range list {
			if s, isStr := item.(string); isStr {
				set[s] = true
			}
		}
	}
}

// approvalFiles are the files where Claude Code keeps its approvals of the
// ./.mcp.json servers, when they matter (the file is read, and
// MCP_BRIDGE_PROJECT_SERVERS is approved): they are watched and stamped
// like the config files, so an approval given in Claude Code is seen by the
// next call. ~/.claude.json, a config file already, is not repeated.
func approvalFiles(o Options) []string {
	for _, f := range agentFiles(o) {
		if f.claude && o.ProjectServers != ProjectAll {
			out := []string{filepath.Join(o.Cwd, ".claude", "settings.json"), filepath.Join(o.Cwd, ".claude", "settings.local.json")}
			if o.Home != "" {
				out = append(out, filepath.Join(o.Home, ".claude", "settings.json"))
			}
			return out
		}
	}
	return nil
}

// claudeApprovals reads Claude Code's approvals for the project in Cwd,
// from the least to the most specific place: the user's
// ~/.claude/settings.json, the project's entry in ~/.claude.json (where
// older releases keep them), then the project's .claude/settings.json and
// .claude/settings.local.json. The project's own files count only when the
// user trusted the folder in Claude Code (hasTrustDialogAccepted on it or
// a parent): a cloned repository cannot approve its own servers, as in
// Claude Code.
func (l *loader) claudeApprovals() *approvals {
	a := &approvals{enabled: map[string]bool{}, disabled: map[string]bool{}}
	cwd := filepath.Clean(l.o.Cwd)
	trusted := false
	var project *object
	if l.o.Home != "" {
		if top := l.settings(filepath.Join(l.o.Home, ".claude", "settings.json")); top != nil {
			a.merge(top)
		}
		if top := l.settings(filepath.Join(l.o.Home, ".claude.json")); top != nil {
			projects, _ := top.get("projects")
			if p, ok := projects.(*object); ok {
				for i, dir := range p.keys {
					entry, ok := p.vals[i].(*object)
					if !ok || !filepath.IsAbs(dir) {
						continue
					}
					dir = filepath.Clean(dir)
					if dir == cwd {
						project = entry
					}
					if t, _ := entry.get("hasTrustDialogAccepted"); t == true && (dir == cwd || strings.HasPrefix(cwd, dir+string(filepath.Separator)) || dir == "/") {
						trusted = true
					}
				}
			}
		}
	}
	if project != nil {
		a.merge(project)
	}
	if trusted {
		for _, name := range []string{"settings.json", "settings.local.json"} {
			if top := l.settings(filepath.Join(cwd, ".claude", name)); top != nil {
				a.merge(top)
			}
		}
	}
	return a
}

// settings reads a JSON object of Claude Code's; nil when the file is
// missing or unusable (a warning then says its approvals are ignored).
func (l *loader) settings(path string) *object {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	data, _, reason := readConfigFile(path)
	if reason != "" {
		l.warn("%s: %s; its approvals of ./.mcp.json servers are ignored", path, reason)
		return nil
	}
	v, err := decodeJSON(data)
	top, ok := v.(*object)
	if err != nil || !ok {
		l.warn("%s: not a JSON object; its approvals of ./.mcp.json servers are ignored", path)
		return nil
	}
	return top
}
