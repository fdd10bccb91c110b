package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestSelfGuardTokens checks §10.3 rule (a): a self token as the
// lower-cased name, command basename, arg or arg basename skips the entry
// with the kept log string; AllowSelf loads them all.
func TestSelfGuardTokens(t *testing.T) {
	path := filepath.Join("testdata", "cfg", "self.json")
	got := Load(Options{Extra: path, LookPath: noLookPath})
	if want := []string{"by_name_remote", "unrelated"}; !slices.Equal(names(got), want) {
		t.Errorf("Entries = %q, want %q", names(got), want)
	}
	skipped := []string{
		"MCP-Server-Code-Execution-Mode", "by_command", "by_command_py", "by_arg", "by_arg_module",
		"by_arg_basename", "by_arg_py", "mcp_server_code_execution_mode",
	}
	var want []Problem
	for _, name := range skipped {
		want = append(want, Problem{File: path, Entry: name,
			Reason: "this bridge's own entry"})
	}
	if !slices.Equal(got.Self, want) || len(got.Problems) != 0 {
		t.Errorf("Self = %q, Problems = %q\nwant Self %q and no Problems", got.Self, got.Problems, want)
	}

	all := Load(Options{Extra: path, AllowSelf: true, LookPath: noLookPath})
	if len(all.Entries) != 10 || len(all.Problems) != 0 || len(all.Self) != 0 {
		t.Errorf("AllowSelf: Entries = %q, Problems = %q, Self = %q; want all 10 and none", names(all), all.Problems, all.Self)
	}
}

// fakeBin makes a directory with a fake bridge executable and returns the
// executable's path.
func fakeBin(t *testing.T, dir, name string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// pathLookup is a LookPath over the given dirs, in order; a name with a
// slash is checked as is, as exec.LookPath does.
func pathLookup(dirs ...string) func(string) (string, error) {
	return func(name string) (string, error) {
		if strings.Contains(name, "/") {
			if _, err := os.Stat(name); err != nil {
				return "", err
			}
			return name, nil
		}
		for _, d := range dirs {
			p := filepath.Join(d, name)
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
				return p, nil
			}
		}
		return "", errors.New("executable file not found in $PATH")
	}
}

// TestSelfGuardExecutable checks §10.3 rules (b), the command basename is
// the running executable's, and (c), the command resolves through PATH and
// symlinks (or a hard link) to it.
func TestSelfGuardExecutable(t *testing.T) {
	tmp := t.TempDir()
	self := fakeBin(t, filepath.Join(tmp, "opt"), "bridge-real")
	bin := filepath.Join(tmp, "bin")
	other := fakeBin(t, bin, "other-server")
	if err := os.Symlink(self, filepath.Join(bin, "mcp-proxy")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(self, filepath.Join(bin, "hard-proxy")); err != nil {
		t.Fatal(err)
	}
	// A decoy later on PATH with the symlink's name must not matter: the
	// first match wins.
	fakeBin(t, filepath.Join(tmp, "later"), "other-server")

	cases := []struct {
		name, command string
		cwd           string
		self          bool
	}{
		{"basename", "bridge-real", "", true},
		{"basename_elsewhere", "/usr/local/bin/bridge-real", "", true},
		{"symlink_on_path", "mcp-proxy", "", true},
		{"symlink_by_path", filepath.Join(bin, "mcp-proxy"), "", true},
		{"relative_to_cwd", "./bin/mcp-proxy", tmp, true},
		{"hard_link", "hard-proxy", "", true},
		{"other", "other-server", "", false},
		{"other_by_path", other, "", false},
		{"not_found", "nowhere", "", false},
	}
	var b strings.Builder
	b.WriteString(`{"mcpServers":{`)
	for i, c := range cases {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(quote(c.name) + `:{"command":` + quote(c.command))
		if c.cwd != "" {
			b.WriteString(`,"cwd":` + quote(c.cwd))
		}
		b.WriteString("}")
	}
	b.WriteString("}}")
	cfg := t.TempDir()
	writeFiles(t, cfg, map[string]string{"servers.json": b.String()})
	file := filepath.Join(cfg, "servers.json")

	// SelfExe may be given through a symlink too; Load resolves it.
	selfLink := filepath.Join(tmp, "self-link")
	if err := os.Symlink(self, selfLink); err != nil {
		t.Fatal(err)
	}
	lookPath := pathLookup(bin, filepath.Join(tmp, "later"))
	got := Load(Options{Dir: cfg, SelfExe: self, LookPath: lookPath})
	for _, c := range cases {
		var problem bool
		for _, p := range got.Self {
			if p.Entry == c.name {
				problem = true
				if want := "this bridge's own entry"; p.Reason != want || p.File != file {
					t.Errorf("%s: Reason = %q, want %q", c.name, p.Reason, want)
				}
			}
		}
		if problem != c.self {
			t.Errorf("%s (command %q): skipped = %v, want %v", c.name, c.command, problem, c.self)
		}
	}
	if again := Load(Options{Dir: cfg, SelfExe: selfLink, LookPath: lookPath}); !slices.Equal(again.Self, got.Self) {
		t.Errorf("SelfExe via a symlink: Self = %q, want %q", again.Self, got.Self)
	}
	if all := Load(Options{Dir: cfg, SelfExe: self, AllowSelf: true, LookPath: lookPath}); len(all.Self) != 0 {
		t.Errorf("AllowSelf: Self = %q, want none", all.Self)
	}
	if none := Load(Options{Dir: cfg, LookPath: lookPath}); len(none.Problems) != 0 {
		t.Errorf("no SelfExe: Problems = %q, want none", none.Problems)
	}
}
