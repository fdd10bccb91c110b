package config

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestParseSources checks MCP_BRIDGE_CONFIG_SOURCES: all by default, a list
// kept in precedence order, unknown names refused.
func TestParseSources(t *testing.T) {
	cases := []struct {
		in   string
		want []string
		err  bool
	}{
		{"", AllSources, false},
		{"ALL", AllSources, false},
		{"env, mcps", []string{SourceMCPs, SourceEnv}, false},
		{"cursor,,claude-code", []string{SourceClaudeCode, SourceCursor}, false},
		{"project-dir, mcp-dir", []string{SourceMCPDir, SourceProjectDir}, false},
		{"cursor,nope", nil, true},
	}
	for _, c := range cases {
		got, err := ParseSources(c.in)
		if (err != nil) != c.err || !slices.Equal(got, c.want) {
			t.Errorf("ParseSources(%q) = %v, %v; want %v (error %v)", c.in, got, err, c.want, c.err)
		}
	}
}

// agentHome writes one file per agent source under a fresh home and cwd.
func agentHome(t *testing.T) (home, cwd string) {
	home, cwd = t.TempDir(), t.TempDir()
	appSupport := filepath.Join(home, ".config")
	if runtime.GOOS == "darwin" {
		appSupport = filepath.Join(home, "Library", "Application Support")
	}
	writeFile(t, filepath.Join(home, "MCPs", "a.json"), `{"mcpServers": {"shared": {"command": "from-mcps"}}}`)
	writeFile(t, filepath.Join(home, ".config", "mcp", "servers", "x.json"), `{"mcpServers": {"dir1": {"command": "d"}}}`)
	writeFile(t, filepath.Join(home, ".claude.json"), `{"numStartups": 3,
		"projects": {"`+cwd+`": {"mcpServers": {"proj": {"command": "p"}}}, "/elsewhere": {"mcpServers": {"other": {"command": "o"}}}},
		"mcpServers": {"claude": {"command": "c", "args": ["--x"]}, "shared": {"command": "from-claude"},
			"self": {"command": "bridge", "args": ["run"]},
			"ref": {"command": "uvx", "args": ["mcp-server-code-execution-mode", "run"]}}}`)
	writeFile(t, filepath.Join(appSupport, "Claude", "claude_desktop_config.json"), `{"mcpServers": {"desktop": {"command": "dt"}}}`)
	writeFile(t, filepath.Join(home, ".cursor", "mcp.json"), `{"mcpServers": {"cursor": {"url": "https://c.example/mcp"}}}`)
	writeFile(t, filepath.Join(cwd, ".vscode", "mcp.json"), `{"inputs": [], "servers": {"vsws": {"type": "stdio", "command": "vw"}}}`)
	writeFile(t, filepath.Join(appSupport, "Code", "User", "mcp.json"), `{"servers": {"vsuser": {"type": "sse", "url": "https://v.example/sse"}}}`)
	writeFile(t, filepath.Join(home, ".codeium", "windsurf", "mcp_config.json"), `{"mcpServers": {"wind": {"command": "w"}}}`)
	writeFile(t, filepath.Join(home, ".config", "opencode", "opencode.json"), `{"$schema": "https://opencode.ai/config.json",
		"mcp": {"oc": {"type": "local", "command": ["npx", "-y", "srv"], "environment": {"K": "v"}, "enabled": true},
			"ocr": {"type": "remote", "url": "https://o.example/mcp", "headers": {"A": "b"}},
			"off": {"type": "local", "command": ["z"], "enabled": false}}}`)
	writeFile(t, filepath.Join(cwd, "opencode.json"), `{"mcp": {"servers": {"oc2": {"type": "local", "command": ["y"]}}}}`)
	writeFile(t, filepath.Join(home, ".opencode.json"), `{"mcp": {"oclegacy": {"type": "local", "command": ["l"]}}}`)
	writeFile(t, filepath.Join(cwd, ".mcp.json"), `{"mcpServers": {"mcpjson": {"command": "m"}, "self2": {"command": "bridge", "args": ["run"]}}}`)
	writeFile(t, filepath.Join(cwd, ".cursor", "mcp.json"), `{"mcpServers": {"cursorproj": {"command": "cp"}}}`)
	writeFile(t, filepath.Join(cwd, ".mcp", "x.json"), `{"mcpServers": {"dotmcp": {"command": "dm"}}}`)
	writeFile(t, filepath.Join(cwd, "mcp-servers", "y.json"), `{"mcpServers": {"refdir": {"command": "rd"}}}`)
	return home, cwd
}

// userEntries and projectEntries are the servers agentHome writes, in
// precedence order: every user file first, then the project files.
var (
	userEntries    = []string{"shared", "dir1", "proj", "claude", "desktop", "cursor", "vsuser", "wind", "oc", "ocr", "oclegacy"}
	projectEntries = []string{"dotmcp", "refdir", "mcpjson", "cursorproj", "vsws", "oc2"}
)

// TestLoadAgentSources checks every agent source, the precedence order, the
// duplicate warning, the project entry of ~/.claude.json, the opencode and
// VS Code formats, and the self guard on `bridge run` and the reference.
func TestLoadAgentSources(t *testing.T) {
	home, cwd := agentHome(t)
	set := Load(Options{Dir: filepath.Join(home, "MCPs"), Sources: AllSources, Home: home, Cwd: cwd, LookPath: noLookPath,
		Project: true, ProjectServers: ProjectAll})
	var names []string
	byName := map[string]Entry{}
	for _, e := range set.Entries {
		names = append(names, e.Name)
		byName[e.Name] = e
	}
	want := append(slices.Clone(userEntries), projectEntries...)
	if !slices.Equal(names, want) {
		t.Errorf("entries = %v\nwant      %v", names, want)
	}
	if e := byName["shared"]; e.Command != "from-mcps" {
		t.Errorf("shared = %+v, want the ~/MCPs one (first source wins)", e)
	}
	dup := false
	for _, w := range set.Warnings {
		if strings.Contains(w, `"shared" duplicates the one in `+filepath.Join(home, "MCPs", "a.json")) && strings.HasPrefix(w, filepath.Join(home, ".claude.json")) {
			dup = true
		}
	}
	if !dup {
		t.Errorf("no duplicate warning naming both files: %q", set.Warnings)
	}
	if e := byName["oc"]; e.Type != TypeStdio || e.Command != "npx" || !slices.Equal(e.Args, []string{"-y", "srv"}) || e.Env["K"] != "v" {
		t.Errorf("opencode local = %+v", e)
	}
	if e := byName["ocr"]; e.Type != TypeHTTP || e.URL != "https://o.example/mcp" || e.Headers["A"] != "b" {
		t.Errorf("opencode remote = %+v", e)
	}
	if e := byName["vsuser"]; e.Type != TypeSSE {
		t.Errorf("vscode sse = %+v", e)
	}
	var self []string
	for _, p := range set.Self {
		self = append(self, p.Entry)
	}
	if !slices.Equal(self, []string{"self", "ref", "self2"}) {
		t.Errorf("self-referential entries skipped = %v, want [self ref self2]; problems %q", self, set.Problems)
	}
	for path, want := range map[string]string{
		filepath.Join(home, ".cursor", "mcp.json"):                 SourceCursor,
		filepath.Join(cwd, ".cursor", "mcp.json"):                  SourceCursor,
		filepath.Join(cwd, ".mcp.json"):                            SourceClaudeCode,
		filepath.Join(cwd, ".mcp", "x.json"):                       SourceProjectDir,
		filepath.Join(cwd, "mcp-servers", "y.json"):                SourceProjectDir,
		filepath.Join(home, ".opencode.json"):                      SourceOpencode,
		filepath.Join(cwd, "opencode.json"):                        SourceOpencode,
		filepath.Join(home, ".config", "mcp", "servers", "x.json"): SourceMCPDir,
	} {
		if got := set.Sources[path]; got != want {
			t.Errorf("source of %s = %q, want %q", path, got, want)
		}
		if got, want := set.Project[path], strings.HasPrefix(path, cwd); got != want {
			t.Errorf("Project[%s] = %v, want %v", path, got, want)
		}
	}
	for _, w := range set.Warnings {
		if strings.Contains(w, "no \"mcpServers\"") {
			t.Errorf("an agent file without servers warned: %s", w)
		}
	}
}

// TestLoadSourcesLimit checks that MCP_BRIDGE_CONFIG_SOURCES limits what
// is read, and that nil Sources reads only mcps and env.
func TestLoadSourcesLimit(t *testing.T) {
	home, cwd := agentHome(t)
	for _, c := range []struct {
		sources []string
		want    []string
	}{
		{nil, []string{"shared"}},
		{[]string{SourceCursor}, []string{"cursor", "cursorproj"}},
		{[]string{SourceMCPs, SourceWindsurf}, []string{"shared", "wind"}},
		{[]string{SourceProjectDir}, []string{"dotmcp", "refdir"}},
	} {
		set := Load(Options{Dir: filepath.Join(home, "MCPs"), Sources: c.sources, Home: home, Cwd: cwd, LookPath: noLookPath,
			Project: true, ProjectServers: ProjectAll})
		var names []string
		for _, e := range set.Entries {
			names = append(names, e.Name)
		}
		if !slices.Equal(names, c.want) {
			t.Errorf("Sources %v: entries %v, want %v", c.sources, names, c.want)
		}
	}
}

// TestStampAgentFiles checks that a change to an agent file changes the
// stamp (RLD-1), and that WatchPaths names it.
func TestStampAgentFiles(t *testing.T) {
	home, cwd := agentHome(t)
	o := Options{Sources: AllSources, Home: home, Cwd: cwd, Project: true}
	before := Stamp(o)
	writeFile(t, filepath.Join(home, ".cursor", "mcp.json"), `{"mcpServers": {"cursor2": {"command": "c"}}}`)
	if Stamp(o) == before {
		t.Errorf("the stamp did not change with ~/.cursor/mcp.json")
	}
	before = Stamp(o)
	writeFile(t, filepath.Join(home, ".config", "mcp", "servers", "y.json"), `{}`)
	if Stamp(o) == before {
		t.Errorf("the stamp did not change with a new file in ~/.config/mcp/servers")
	}
	for _, rel := range []string{".mcp.json", filepath.Join(".cursor", "mcp.json"), ".mcp", "mcp-servers", filepath.Join(".claude", "settings.local.json")} {
		before = Stamp(o)
		p := filepath.Join(cwd, rel)
		if rel == ".mcp" || rel == "mcp-servers" {
			p = filepath.Join(p, "new.json")
		}
		writeFile(t, p, `{"mcpServers": {}, "enabledMcpjsonServers": ["mcpjson"]}`)
		if Stamp(o) == before {
			t.Errorf("the stamp did not change with ./%s", rel)
		}
	}
	paths := WatchPaths(o)
	for _, p := range []string{filepath.Join(home, ".claude.json"), filepath.Join(home, ".opencode.json"), filepath.Join(cwd, ".mcp.json"),
		filepath.Join(cwd, ".cursor", "mcp.json"), filepath.Join(cwd, ".mcp"), filepath.Join(cwd, "mcp-servers"),
		filepath.Join(cwd, ".claude", "settings.local.json"), filepath.Join(cwd, ".claude", "settings.json"), filepath.Join(home, ".claude", "settings.json")} {
		if !slices.Contains(paths, p) {
			t.Errorf("WatchPaths lacks %s: %v", p, paths)
		}
	}
}
