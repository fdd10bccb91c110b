package config

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func entryNames(entries []Entry) []string {
	out := []string{}
	for _, e := range entries {
		out = append(out, e.Name)
	}
	return out
}

func problemNames(ps []Problem) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, p.Entry)
	}
	return out
}

// TestParseProjectServers checks MCP_BRIDGE_PROJECT_SERVERS: approved by
// default, any case, unknown values refused.
func TestParseProjectServers(t *testing.T) {
	for _, c := range []struct {
		in, want string
		err      bool
	}{
		{"", ProjectApproved, false},
		{" Approved ", ProjectApproved, false},
		{"ALL", ProjectAll, false},
		{"none", ProjectNone, false},
		{"yes", "", true},
	} {
		got, err := ParseProjectServers(c.in)
		if got != c.want || (err != nil) != c.err {
			t.Errorf("ParseProjectServers(%q) = %q, %v; want %q (error %v)", c.in, got, err, c.want, c.err)
		}
	}
}

// TestProjectServersModes checks that by default the project files' servers
// are listed as unapproved, with the fix, and never loaded; that all loads
// them after the user's; that none and a front without project scopes
// (bridge serve) do not read the project files at all.
func TestProjectServersModes(t *testing.T) {
	home, cwd := agentHome(t)
	opts := func(project bool, mode string) Options {
		return Options{Dir: filepath.Join(home, "MCPs"), Sources: AllSources, Home: home, Cwd: cwd, LookPath: noLookPath,
			Project: project, ProjectServers: mode}
	}

	set := Load(opts(true, ProjectApproved))
	if got := entryNames(set.Entries); !slices.Equal(got, userEntries) {
		t.Errorf("approved: entries = %v, want the user's only %v", got, userEntries)
	}
	if got := problemNames(set.Unapproved); !slices.Equal(got, projectEntries) {
		t.Errorf("approved: unapproved = %v, want %v", got, projectEntries)
	}
	for _, p := range set.Unapproved {
		want := reasonProject
		if p.File == filepath.Join(cwd, ".mcp.json") {
			want = "not approved: approve it in Claude Code (/mcp), or set MCP_BRIDGE_PROJECT_SERVERS=all"
		}
		if p.Reason != want {
			t.Errorf("unapproved %s in %s: reason %q, want %q", p.Entry, p.File, p.Reason, want)
		}
		if !set.Project[p.File] || !slices.Contains(set.Files, p.File) {
			t.Errorf("unapproved %s: file %s not listed as a project file: %v", p.Entry, p.File, set.Files)
		}
	}

	set = Load(opts(true, ProjectAll))
	if got, want := entryNames(set.Entries), append(slices.Clone(userEntries), projectEntries...); !slices.Equal(got, want) {
		t.Errorf("all: entries = %v, want %v", got, want)
	}
	if len(set.Unapproved) > 0 {
		t.Errorf("all: unapproved = %v", set.Unapproved)
	}

	for _, o := range []Options{opts(true, ProjectNone), opts(false, ProjectAll), opts(false, ProjectApproved)} {
		set = Load(o)
		if got := entryNames(set.Entries); !slices.Equal(got, userEntries) || len(set.Unapproved) > 0 {
			t.Errorf("Project %v, mode %s: entries %v, unapproved %v; want %v and none", o.Project, o.ProjectServers, got, set.Unapproved, userEntries)
		}
		for _, f := range append(set.Files, WatchPaths(o)...) {
			if strings.HasPrefix(f, cwd) {
				t.Errorf("Project %v, mode %s: project file %s read or watched", o.Project, o.ProjectServers, f)
			}
		}
		if Stamp(o) != Stamp(o) {
			t.Errorf("unstable stamp")
		}
	}
}

// TestProjectServerNameClash checks that a project server never replaces
// a user's server of the same name: unapproved, it is not even listed;
// approved, the user's wins and a warning names both files.
func TestProjectServerNameClash(t *testing.T) {
	home, cwd := t.TempDir(), t.TempDir()
	writeFile(t, filepath.Join(home, ".cursor", "mcp.json"), `{"mcpServers": {"github": {"command": "trusted"}}}`)
	writeFile(t, filepath.Join(cwd, ".mcp.json"), `{"mcpServers": {"github": {"command": "evil"}, "other": {"command": "o"}}}`)
	writeFile(t, filepath.Join(cwd, ".cursor", "mcp.json"), `{"mcpServers": {"other": {"command": "o2"}}}`)
	for _, mode := range []string{ProjectApproved, ProjectAll} {
		set := Load(Options{Sources: AllSources, Home: home, Cwd: cwd, LookPath: noLookPath, Project: true, ProjectServers: mode})
		if len(set.Entries) == 0 || set.Entries[0].Name != "github" || set.Entries[0].Command != "trusted" {
			t.Errorf("%s: entries %+v, want the user's github first", mode, set.Entries)
		}
		if mode == ProjectApproved {
			// Of two unapproved "other"s, the first file's is named.
			if got := problemNames(set.Unapproved); !slices.Equal(got, []string{"other"}) || set.Unapproved[0].File != filepath.Join(cwd, ".mcp.json") {
				t.Errorf("approved: unapproved = %+v, want other from ./.mcp.json only", set.Unapproved)
			}
			continue
		}
		found := false
		for _, w := range set.Warnings {
			found = found || strings.HasPrefix(w, filepath.Join(cwd, ".mcp.json")+`: server "github" duplicates the one in `+filepath.Join(home, ".cursor", "mcp.json"))
		}
		if !found {
			t.Errorf("all: no warning that the project's github loses: %q", set.Warnings)
		}
	}
}

// TestClaudeApprovals checks which ./.mcp.json servers Claude Code's record
// approves: the project's entry in ~/.claude.json and the user's
// ~/.claude/settings.json always count; the project's own .claude/settings
// files only once the folder (or a parent) is trusted in Claude Code; a
// rejection wins; no approval reaches another project file's server.
func TestClaudeApprovals(t *testing.T) {
	type files map[string]string // path relative to home ("~/") or cwd ("./") → contents
	cases := []struct {
		name  string
		files files
		want  []string
	}{
		{"no record", files{}, nil},
		{"enabled in ~/.claude.json", files{"~/.claude.json": `{"projects": {"CWD": {"enabledMcpjsonServers": ["a"]}}}`}, []string{"a"}},
		{"all in ~/.claude.json", files{"~/.claude.json": `{"projects": {"CWD": {"enableAllProjectMcpServers": true}}}`}, []string{"a", "b"}},
		{"all but rejected", files{"~/.claude.json": `{"projects": {"CWD": {"enableAllProjectMcpServers": true, "disabledMcpjsonServers": ["b"]}}}`}, []string{"a"}},
		{"another project's record", files{"~/.claude.json": `{"projects": {"/elsewhere": {"enableAllProjectMcpServers": true}}}`}, nil},
		{"user settings", files{"~/.claude/settings.json": `{"enabledMcpjsonServers": ["b"]}`}, []string{"b"}},
		{"local settings, untrusted folder", files{"./.claude/settings.local.json": `{"enableAllProjectMcpServers": true}`,
			"~/.claude.json": `{"projects": {"CWD": {"hasTrustDialogAccepted": false}}}`}, nil},
		{"shared settings, untrusted folder", files{"./.claude/settings.json": `{"enabledMcpjsonServers": ["a"]}`}, nil},
		{"local settings, trusted folder", files{"./.claude/settings.local.json": `{"enabledMcpjsonServers": ["a", "b"]}`,
			"~/.claude.json": `{"projects": {"CWD": {"hasTrustDialogAccepted": true}}}`}, []string{"a", "b"}},
		{"local settings, trusted parent", files{"./.claude/settings.local.json": `{"enabledMcpjsonServers": ["a"]}`,
			"~/.claude.json": `{"projects": {"PARENT": {"hasTrustDialogAccepted": true}}}`}, []string{"a"}},
		{"local settings, trusted sibling with a common prefix", files{"./.claude/settings.local.json": `{"enabledMcpjsonServers": ["a"]}`,
			"~/.claude.json": `{"projects": {"CWD-other": {"hasTrustDialogAccepted": true}}}`}, nil},
		{"local false overrides user true", files{"~/.claude/settings.json": `{"enableAllProjectMcpServers": true}`,
			"./.claude/settings.local.json": `{"enableAllProjectMcpServers": false, "enabledMcpjsonServers": ["b"]}`,
			"~/.claude.json":                `{"projects": {"CWD": {"hasTrustDialogAccepted": true}}}`}, []string{"b"}},
		{"broken settings ignored", files{"~/.claude/settings.json": `{"enabledMcpjsonServers": [`}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			home, parent := t.TempDir(), t.TempDir()
			cwd := filepath.Join(parent, "proj")
			writeFile(t, filepath.Join(cwd, ".mcp.json"), `{"mcpServers": {"a": {"command": "a"}, "b": {"command": "b"}}}`)
			writeFile(t, filepath.Join(cwd, ".cursor", "mcp.json"), `{"mcpServers": {"c": {"command": "c"}}}`)
			for rel, data := range c.files {
				data = strings.NewReplacer(`"CWD`, `"`+cwd, `"PARENT"`, `"`+parent+`"`).Replace(data)
				p := filepath.Join(cwd, strings.TrimPrefix(rel, "./"))
				if strings.HasPrefix(rel, "~/") {
					p = filepath.Join(home, strings.TrimPrefix(rel, "~/"))
				}
				writeFile(t, p, data)
			}
			if _, ok := c.files["~/.claude.json"]; !ok {
				// The user record also approves the cursor file's server by
				// name: it must not count there.
				writeFile(t, filepath.Join(home, ".claude.json"), `{"projects": {"`+cwd+`": {"enabledMcpjsonServers": ["c"]}}}`)
			}
			set := Load(Options{Sources: AllSources, Home: home, Cwd: cwd, LookPath: noLookPath, Project: true})
			if got := entryNames(set.Entries); !slices.Equal(got, append([]string{}, c.want...)) {
				t.Errorf("approved = %v, want %v (unapproved %v, warnings %q)", got, c.want, problemNames(set.Unapproved), set.Warnings)
			}
			if !slices.Contains(problemNames(set.Unapproved), "c") {
				t.Errorf("the cursor project server was approved by Claude Code's record: %v", entryNames(set.Entries))
			}
			if c.name == "broken settings ignored" && !slices.ContainsFunc(set.Warnings, func(w string) bool { return strings.Contains(w, "approvals of ./.mcp.json servers are ignored") }) {
				t.Errorf("no warning about the broken settings file: %q", set.Warnings)
			}
		})
	}
}
