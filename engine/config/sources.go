package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// Source names for MCP_BRIDGE_CONFIG_SOURCES, in precedence order: on a name
// clash the first source wins (CFG-2). The user's own files of every source
// come first, in this order; the project files (./..., see projectFiles)
// come after all of them, in this order too, so a server that came with a
// cloned repository never replaces one the user configured.
const (
	SourceMCPs          = "mcps"           // MCP_BRIDGE_CONFIG_DIR/*.json (default ~/MCPs)
	SourceEnv           = "env"            // the file named by MCP_SERVERS_CONFIG
	SourceMCPDir        = "mcp-dir"        // ~/.config/mcp/servers/*.json
	SourceProjectDir    = "project-dir"    // ./.mcp/*.json and ./mcp-servers/*.json (project files only)
	SourceClaudeCode    = "claude-code"    // ~/.claude.json: projects[cwd].mcpServers, then mcpServers; project ./.mcp.json
	SourceClaudeDesktop = "claude-desktop" // claude_desktop_config.json
	SourceCursor        = "cursor"         // ~/.cursor/mcp.json; project ./.cursor/mcp.json
	SourceVSCode        = "vscode"         // the user mcp.json; project ./.vscode/mcp.json (key "servers")
	SourceWindsurf      = "windsurf"       // ~/.codeium/windsurf/mcp_config.json
	SourceOpencode      = "opencode"       // ~/.config/opencode/opencode.json, ~/.opencode.json; project ./opencode.json (key "mcp")
)

// AllSources lists every source in precedence order.
var AllSources = []string{SourceMCPs, SourceEnv, SourceMCPDir, SourceProjectDir, SourceClaudeCode, SourceClaudeDesktop,
	SourceCursor, SourceVSCode, SourceWindsurf, SourceOpencode}

// ParseSources parses MCP_BRIDGE_CONFIG_SOURCES: "" or "all" is every
// source, otherwise a comma list of source names (any case, blanks ignored).
// The result keeps the precedence order of AllSources, whatever the order of
// the list.
func ParseSources(s string) ([]string, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	if s == "" || s == "all" {
		return slices.Clone(AllSources), nil
	}
	want := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !slices.Contains(AllSources, part) {
			return nil, fmt.Errorf("unknown source %q", part)
		}
		want[part] = true
	}
	var out []string
	for _, src := range AllSources {
		if want[src] {
			out = append(out, src)
		}
	}
	return out, nil
}

// format says where a file keeps its servers.
type format int

const (
	formatMCPServers format = iota // {"mcpServers": {name: entry}}
	formatServers                  // VS Code: {"servers": {name: entry}}
	formatClaudeCode               // {"projects": {cwd: {"mcpServers"}}, "mcpServers"}
	formatOpencode                 // {"mcp": {name: entry}} or {"mcp": {"servers": {name: entry}}}
)

// agentFile is one agent config file, or a directory of *.json files.
type agentFile struct {
	source string
	path   string
	dir    bool // every *.json directly inside path
	format format
	// project marks a file that comes with the project in o.Cwd: its
	// servers start only when approved (project.go).
	project bool
	// claude marks Claude Code's ./.mcp.json, whose servers Claude Code's
	// own record approves.
	claude bool
}

// agentFiles lists the agent config files of the enabled sources beyond
// mcps and env, in precedence order: the user's, then the project's (when
// o.Project is on and MCP_BRIDGE_PROJECT_SERVERS is not none). Paths depend
// on o.Home, o.Cwd and the OS only, never on what exists.
func agentFiles(o Options) []agentFile {
	var out []agentFile
	add := func(src string, f agentFile) {
		if f.path != "" && slices.Contains(o.Sources, src) {
			f.source = src
			out = append(out, f)
		}
	}
	home := func(parts ...string) string {
		if o.Home == "" {
			return ""
		}
		return filepath.Join(append([]string{o.Home}, parts...)...)
	}
	cwd := func(parts ...string) string {
		if o.Cwd == "" {
			return ""
		}
		return filepath.Join(append([]string{o.Cwd}, parts...)...)
	}
	appSupport := home(".config")
	if runtime.GOOS == "darwin" {
		appSupport = home("Library", "Application Support")
	}
	add(SourceMCPDir, agentFile{path: home(".config", "mcp", "servers"), dir: true})
	add(SourceClaudeCode, agentFile{path: home(".claude.json"), format: formatClaudeCode})
	if appSupport != "" {
		add(SourceClaudeDesktop, agentFile{path: filepath.Join(appSupport, "Claude", "claude_desktop_config.json")})
	}
	add(SourceCursor, agentFile{path: home(".cursor", "mcp.json")})
	if appSupport != "" {
		add(SourceVSCode, agentFile{path: filepath.Join(appSupport, "Code", "User", "mcp.json"), format: formatServers})
	}
	add(SourceWindsurf, agentFile{path: home(".codeium", "windsurf", "mcp_config.json")})
	add(SourceOpencode, agentFile{path: home(".config", "opencode", "opencode.json"), format: formatOpencode})
	add(SourceOpencode, agentFile{path: home(".opencode.json"), format: formatOpencode})
	if !o.projectScopes() {
		return out
	}
	add(SourceProjectDir, agentFile{path: cwd(".mcp"), dir: true, project: true})
	add(SourceProjectDir, agentFile{path: cwd("mcp-servers"), dir: true, project: true})
	add(SourceClaudeCode, agentFile{path: cwd(".mcp.json"), project: true, claude: true})
	add(SourceCursor, agentFile{path: cwd(".cursor", "mcp.json"), project: true})
	add(SourceVSCode, agentFile{path: cwd(".vscode", "mcp.json"), format: formatServers, project: true})
	add(SourceOpencode, agentFile{path: cwd("opencode.json"), format: formatOpencode, project: true})
	return out
}

// SourcePaths are the agent config files and dirs of o's sources, for
// `bridge doctor`.
func SourcePaths(o Options) []string {
	var out []string
	for _, f := range agentFiles(o) {
		out = append(out, f.path)
	}
	return out
}

// WatchPaths are SourcePaths plus the files where Claude Code keeps its
// approvals of ./.mcp.json servers, for the reload watcher: it watches
// their parent directories.
func WatchPaths(o Options) []string {
	return append(SourcePaths(o), approvalFiles(o)...)
}

// loadAgentFiles reads the agent config files of the enabled sources; a
// missing file or dir is no problem.
func (l *loader) loadAgentFiles() {
	for _, f := range agentFiles(l.o) {
		g := l.gateFor(f)
		if !f.dir {
			if _, err := os.Stat(f.path); errors.Is(err, fs.ErrNotExist) {
				continue
			}
			l.loadFileAs(f.path, f.source, f.format, g)
			continue
		}
		des, err := os.ReadDir(f.path)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				l.problem(f.path, "", "cannot list the directory: "+errText(err))
			}
			continue
		}
		for _, de := range des { // ReadDir sorts by name
			if strings.HasSuffix(de.Name(), ".json") {
				l.loadFileAs(filepath.Join(f.path, de.Name()), f.source, formatMCPServers, g)
			}
		}
	}
}

// agentServers returns the server objects of a decoded agent file, in
// file order, converted to the mcpServers entry format. ok is false when
// the file has none, which is no problem for an agent's file.
func (l *loader) agentServers(path string, top *object, f format) (names []string, entries []any, ok bool) {
	pick := func(key string) {
		raw, found := top.get(key)
		if !found || raw == nil {
			return
		}
		servers, isObj := raw.(*object)
		if !isObj {
			l.problem(path, "", fmt.Sprintf("%q must be an object of servers, not %s", key, kind(raw)))
			return
		}
		ok = true
		names = append(names, servers.keys...)
		entries = append(entries, servers.vals...)
	}
	switch f {
	case formatServers:
		pick("servers")
	case formatClaudeCode:
		// A project's own servers (Claude Code's "local" scope) come before
		// the user's, as Claude Code ranks them, for the bridge's cwd only.
		if projects, found := top.get("projects"); found && l.o.Cwd != "" {
			if p, isObj := projects.(*object); isObj {
				if proj, found := p.get(l.o.Cwd); found {
					if po, isObj := proj.(*object); isObj {
						saved := top
						top = po
						pick("mcpServers")
						top = saved
					}
				}
			}
		}
		pick("mcpServers")
	case formatOpencode:
		raw, found := top.get("mcp")
		mcp, isObj := raw.(*object)
		if !found || !isObj {
			return nil, nil, false
		}
		// opencode v2 nests servers under "servers"; v1 entries always
		// have a "type", so a "servers" key without one is the v2 form.
		if v, found := mcp.get("servers"); found {
			if so, isObj := v.(*object); isObj {
				if _, typed := so.get("type"); !typed {
					mcp = so
				}
			}
		}
		ok = true
		for i, name := range mcp.keys {
			names = append(names, name)
			entries = append(entries, opencodeEntry(mcp.vals[i]))
		}
	default:
		pick("mcpServers")
	}
	return names, entries, ok
}

// opencodeEntry converts an opencode server ({"type": "local", "command":
// [argv...], "environment", "enabled"} or {"type": "remote", "url",
// "headers"}) to the mcpServers entry format; anything else is returned as
// is, for parseEntry to report.
func opencodeEntry(raw any) any {
	o, ok := raw.(*object)
	if !ok {
		return raw
	}
	out := &object{}
	set := func(k string, v any) {
		out.keys = append(out.keys, k)
		out.vals = append(out.vals, v)
	}
	typ, _ := o.get("type")
	for i, k := range o.keys {
		v := o.vals[i]
		switch k {
		case "type":
			switch typ {
			case "local":
				set("type", TypeStdio)
			case "remote":
				set("type", TypeHTTP)
			default:
				set("type", v)
			}
		case "command":
			argv, isList := v.([]any)
			if !isList || len(argv) == 0 {
				set("command", v)
				continue
			}
			set("command", argv[0])
			set("args", argv[1:])
		case "environment":
			set("env", v)
		case "enabled":
			if b, isBool := v.(bool); isBool {
				set("disabled", !b)
			} else {
				set("disabled", v)
			}
		case "url", "headers", "cwd", "disabled", "description":
			set(k, v)
		}
	}
	return out
}
