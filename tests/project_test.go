package tests

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// projectDir is a fresh directory standing for the user's project, with
// symlinks resolved: the bridge knows it by os.Getwd, and Claude Code keys
// ~/.claude.json's projects by that path.
func projectDir(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// writeAt writes v as JSON to dir/rel, creating the directories.
func writeAt(t *testing.T, dir, rel string, v any) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	writeJSON(t, p, v)
}

// marked is a server entry that runs command after touching marker, so a
// test can tell whether the bridge ever ran the command.
func marked(marker, command string) map[string]any {
	return map[string]any{"command": "sh", "args": []string{"-c", "touch '" + marker + "' && exec '" + command + "'"}}
}

func assertNotRun(t *testing.T, markers ...string) {
	t.Helper()
	for _, m := range markers {
		if _, err := os.Stat(m); err == nil {
			t.Errorf("the project's command ran (%s exists) although it was not approved", filepath.Base(m))
		}
	}
}

// TestProjectServersNeedApproval checks the project files a repository
// brings (./.mcp.json, ./.cursor/mcp.json, ./.mcp/*.json,
// ./mcp-servers/*.json) and ~/.opencode.json, with the real
// server-everything: a project server is listed with the fix but its command
// never runs (not by discovery, search, a call granting it, or doctor) until
// it is approved, by Claude Code's record in ~/.claude.json (seen by the next
// call) or by MCP_BRIDGE_PROJECT_SERVERS=all; with none the project files
// are not read. Before the change none of these files was read, and
// ./.vscode/mcp.json and ./opencode.json servers started unasked.
func TestProjectServersNeedApproval(t *testing.T) {
	requirePodman(t)
	home, proj := t.TempDir(), projectDir(t)
	everything := npmBin(t, "mcp-server-everything")
	ran := func(name string) string { return filepath.Join(home, "ran-"+name) }
	writeAt(t, proj, ".mcp.json", map[string]any{"mcpServers": map[string]any{"projsrv": marked(ran("projsrv"), everything)}})
	writeAt(t, proj, ".cursor/mcp.json", map[string]any{"mcpServers": map[string]any{"cursorsrv": marked(ran("cursorsrv"), everything)}})
	writeAt(t, proj, ".mcp/a.json", map[string]any{"mcpServers": map[string]any{"dotsrv": marked(ran("dotsrv"), everything)}})
	writeAt(t, proj, "mcp-servers/b.json", map[string]any{"mcpServers": map[string]any{"refsrv": marked(ran("refsrv"), everything)}})
	writeAt(t, proj, ".vscode/mcp.json", map[string]any{"servers": map[string]any{"vssrv": marked(ran("vssrv"), everything)}})
	writeAt(t, home, ".opencode.json", map[string]any{"mcp": map[string]any{"ocuser": map[string]any{"type": "local", "command": []string{everything}}}})
	writeAt(t, home, ".claude.json", map[string]any{"numStartups": 1})
	env := map[string]string{"HOME": home, "MCP_BRIDGE_CONFIG_DIR": filepath.Join(home, "MCPs")}
	all := []string{ran("projsrv"), ran("cursorsrv"), ran("dotsrv"), ran("refsrv"), ran("vssrv")}
	const claudeFix = "not approved: approve it in Claude Code (/mcp), or set MCP_BRIDGE_PROJECT_SERVERS=all"
	const otherFix = "not approved: set MCP_BRIDGE_PROJECT_SERVERS=all to start the servers of the project files"

	// doctor lists every new file, starts the user's server, and runs no
	// project command.
	out, errOut, _ := runCLIIn(t, proj, env, "", "doctor")
	for _, want := range []string{
		"WARN config " + filepath.Join(proj, ".mcp.json") + ": claude-code (project file): 0 servers; listed but not started until approved: projsrv (approve it in Claude Code (/mcp), or set MCP_BRIDGE_PROJECT_SERVERS=all)",
		"WARN config " + filepath.Join(proj, ".cursor", "mcp.json") + ": cursor (project file): 0 servers; listed but not started until approved: cursorsrv",
		"config " + filepath.Join(proj, ".mcp", "a.json") + ": project-dir (project file): 0 servers; listed but not started until approved: dotsrv",
		"config " + filepath.Join(proj, "mcp-servers", "b.json") + ": project-dir (project file)",
		"config " + filepath.Join(proj, ".vscode", "mcp.json") + ": vscode (project file)",
		"OK   config " + filepath.Join(home, ".opencode.json") + ": opencode: 1 servers (ocuser)",
		"OK   server ocuser",
		"reading mcps, env, mcp-dir, project-dir, claude-code,",
		"project servers start once approved (MCP_BRIDGE_PROJECT_SERVERS=approved)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("doctor lacks %q:\n%s%s", want, out, errOut)
		}
	}
	assertNotRun(t, all...)

	b := startBridgeIn(t, proj, env, "run")
	if got, want := b.mustRun("runtime.discovered_servers()", nil), "('ocuser',)"; got != want {
		t.Errorf("discovered_servers() = %s, want %s", got, want)
	}
	got := b.mustRun(`print({d['name']: (d['file'], d['skipped']) for d in runtime.discovered_servers(detailed=True) if 'skipped' in d})`, nil)
	for name, file := range map[string]string{"projsrv": ".mcp.json", "cursorsrv": ".cursor/mcp.json", "dotsrv": ".mcp/a.json", "refsrv": "mcp-servers/b.json", "vssrv": ".vscode/mcp.json"} {
		fix := otherFix
		if name == "projsrv" {
			fix = claudeFix
		}
		if want := "'" + name + "': ('" + filepath.Join(proj, file) + "', '" + fix + "')"; !strings.Contains(got, want) {
			t.Errorf("discovered_servers(detailed=True) lacks %s:\n%s", want, got)
		}
	}
	unapproved := "server 'projsrv' comes from the project file " + filepath.Join(proj, ".mcp.json") + " and is " + claudeFix
	r := b.call(map[string]any{"servers": []string{"projsrv"}, "timeout": 60, "code": `print(await runtime.search_tool_docs('echo'))
for f in (lambda: runtime.describe_server('projsrv'), lambda: mcp_projsrv.echo):
    try:
        f()
    except MCPError as e:
        print('raised:', e)
print('ran')`})
	got = text(t, r)
	if r.IsError || !strings.Contains(got, "ran") {
		t.Fatalf("a call granting an unapproved server must still run: %s", got)
	}
	for _, want := range []string{"note: " + unapproved + "; its tools raise MCPError", "raised: " + unapproved} {
		if !strings.Contains(got, want) {
			t.Errorf("result lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "raised: "+unapproved); n != 2 {
		t.Errorf("describe_server and the proxy raised the fix %d times, want 2:\n%s", n, got)
	}
	assertNotRun(t, all...)

	// Approving it in Claude Code (its record in ~/.claude.json) is seen by
	// the next call; the other project files stay unapproved.
	writeAt(t, home, ".claude.json", map[string]any{"numStartups": 1, "projects": map[string]any{proj: map[string]any{"enabledMcpjsonServers": []string{"projsrv"}}}})
	if got := b.mustRun("print(await mcp_projsrv.get_sum(a=40, b=2))", map[string]any{"servers": []string{"projsrv"}}); !strings.Contains(got, "42") {
		t.Errorf("approved projsrv: %s", got)
	}
	if _, err := os.Stat(ran("projsrv")); err != nil {
		t.Errorf("the approved server did not run its command: %v", err)
	}
	if got := b.mustRun("print(1)", map[string]any{"servers": []string{"cursorsrv"}}); !strings.Contains(got, "note: server 'cursorsrv' comes from the project file "+filepath.Join(proj, ".cursor", "mcp.json")+" and is "+otherFix) {
		t.Errorf("cursorsrv after approving projsrv in Claude Code: %s", got)
	}
	assertNotRun(t, all[1:]...)
	b.Close()

	env["MCP_BRIDGE_PROJECT_SERVERS"] = "all"
	b = startBridgeIn(t, proj, env, "run")
	if got, want := b.mustRun("runtime.discovered_servers()", nil), "('ocuser', 'dotsrv', 'refsrv', 'projsrv', 'cursorsrv', 'vssrv')"; got != want {
		t.Errorf("all: discovered_servers() = %s, want %s", got, want)
	}
	if got := b.mustRun("print(await mcp_cursorsrv.get_sum(a=1, b=2))", map[string]any{"servers": []string{"cursorsrv"}}); !strings.Contains(got, "3") {
		t.Errorf("all: cursorsrv: %s", got)
	}
	b.Close()
	for _, m := range all { // all starts them
		os.Remove(m)
	}

	env["MCP_BRIDGE_PROJECT_SERVERS"] = "none"
	b = startBridgeIn(t, proj, env, "run")
	if got := b.mustRun("print([d.get('file') for d in runtime.discovered_servers(detailed=True)])", nil); strings.Contains(got, proj) || !strings.Contains(got, "None") {
		t.Errorf("none: the project files were read: %s", got)
	}
	if got := text(t, b.call(map[string]any{"code": "print('ran')", "servers": []string{"refsrv"}})); !strings.Contains(got, "Unknown MCP server: refsrv") || strings.Contains(got, "ran") {
		t.Errorf("none: a project server must be unknown: %s", got)
	}
	b.Close()
	out, _, _ = runCLIIn(t, proj, env, "", "doctor")
	if !strings.Contains(out, "project files not read (MCP_BRIDGE_PROJECT_SERVERS=none)") || strings.Contains(out, "config "+proj) {
		t.Errorf("none: doctor:\n%s", out)
	}
	assertNotRun(t, all...)
}

// TestProjectServersWatch checks that bridge run --watch sees a project
// file appear and an approval given in Claude Code's project settings (a
// trusted folder's .claude/settings.local.json, in a directory that did not
// exist at start), without any call. Before the change neither file was
// read or watched.
func TestProjectServersWatch(t *testing.T) {
	requirePodman(t)
	home, proj := t.TempDir(), projectDir(t)
	writeAt(t, home, ".claude.json", map[string]any{"projects": map[string]any{proj: map[string]any{"hasTrustDialogAccepted": true}}})
	b := startBridgeIn(t, proj, map[string]string{"HOME": home, "MCP_BRIDGE_CONFIG_DIR": filepath.Join(home, "MCPs")}, "run", "--watch")
	if got := b.mustRun("runtime.discovered_servers(detailed=True)", nil); got != "()" {
		t.Fatalf("discovered at start: %s", got)
	}
	writeAt(t, proj, ".mcp.json.tmp", map[string]any{"mcpServers": map[string]any{"late": fake()}})
	if err := os.Rename(filepath.Join(proj, ".mcp.json.tmp"), filepath.Join(proj, ".mcp.json")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the reload of ./.mcp.json", func() bool {
		logs := b.stderr.String()
		return strings.Contains(logs, `"entry":"late"`) && strings.Contains(logs, "project server listed but not started")
	})
	if strings.Contains(b.stderr.String(), `"added":["late"]`) {
		t.Fatalf("an unapproved project server was added")
	}
	if err := os.Mkdir(filepath.Join(proj, ".claude"), 0o755); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // the new directory is watched after the debounce
	writeAt(t, proj, ".claude/settings.local.json", map[string]any{"enabledMcpjsonServers": []string{"late"}})
	waitFor(t, 5*time.Second, "the reload after the approval", func() bool { return strings.Contains(b.stderr.String(), `"added":["late"]`) })
	if got := b.mustRun("await mcp_late.echo('hi')", map[string]any{"servers": []string{"late"}}); !strings.Contains(got, "hi") {
		t.Errorf("late server: %s", got)
	}
}
