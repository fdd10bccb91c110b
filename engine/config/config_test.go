package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// noLookPath finds nothing, so guard rule (c) never consults the real PATH.
func noLookPath(string) (string, error) { return "", errors.New("not found") }

// names returns the entry names of s, in order.
func names(s Set) []string {
	var out []string
	for _, e := range s.Entries {
		out = append(out, e.Name)
	}
	return out
}

// entry returns the entry called name, failing the test if s lacks it.
func entry(t *testing.T, s Set, name string) Entry {
	t.Helper()
	for _, e := range s.Entries {
		if e.Name == name {
			return e
		}
	}
	t.Fatalf("no entry %q in %v", name, names(s))
	return Entry{}
}

// writeFiles creates each name => content under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLoadFileProblems checks CFG-1 at the file level: each malformed file is
// skipped with a Problem naming it and the reason.
func TestLoadFileProblems(t *testing.T) {
	cases := []struct {
		file, reason string
	}{
		{"invalid.json", "invalid JSON at line 1, column 39: invalid character '}' looking for beginning of object key string"},
		{"array.json", `the top level must be an object with "mcpServers", not a list`},
		{"servers_list.json", `"mcpServers" must be an object of servers, not a list`},
		{"empty.json", "invalid JSON: the file is empty"},
		{"trailing.json", "invalid JSON at line 2, column 2: unexpected data after the top-level value"},
		{"servers.toml", "TOML config files are not supported yet"},
		{"missing.json", "cannot read the file: no such file or directory"},
	}
	for _, c := range cases {
		t.Run(c.file, func(t *testing.T) {
			path := filepath.Join("testdata", "cfg", c.file)
			got := Load(Options{Extra: path, LookPath: noLookPath})
			want := []Problem{{File: path, Reason: c.reason}}
			if !reflect.DeepEqual(got.Problems, want) {
				t.Errorf("Problems = %q, want %q", got.Problems, want)
			}
			if len(got.Entries) != 0 {
				t.Errorf("Entries = %v, want none", names(got))
			}
			if !reflect.DeepEqual(got.Files, []string{path}) {
				t.Errorf("Files = %q, want %q", got.Files, []string{path})
			}
		})
	}
}

// TestLoadEntryProblems checks CFG-1 at the entry level: each malformed entry
// is skipped with a Problem naming file, entry and reason, and the rest of
// the file loads.
func TestLoadEntryProblems(t *testing.T) {
	path := filepath.Join("testdata", "cfg", "entries.json")
	got := Load(Options{Extra: path, LookPath: noLookPath})
	wantNames := []string{"good", "enabled", "last"}
	if !slices.Equal(names(got), wantNames) {
		t.Errorf("Entries = %q, want %q", names(got), wantNames)
	}
	want := map[string]string{
		"not_object":       "the entry must be an object, not a string",
		"null_entry":       "the entry must be an object, not null",
		"args_not_list":    `"args" must be a list of strings, not a string`,
		"args_item":        `"args" must be a list of strings; args[1] is a number`,
		"env_value":        `"env" must be an object of strings; env["TOKEN"] is a number`,
		"env_not_object":   `"env" must be an object of strings, not a list`,
		"env_bad_name":     `"env" name "A=B" must be non-empty, without "=" or NUL`,
		"command_type":     `"command" must be a string, not a list`,
		"missing_command":  `missing "command", required for a stdio server`,
		"empty_command":    `missing "command", required for a stdio server`,
		"cwd_type":         `"cwd" must be a string, not a number`,
		"description_type": `"description" must be a string, not a boolean`,
		"http_no_url":      `missing "url", required for an http server`,
		"sse_no_url":       `missing "url", required for an sse server`,
		"bad_url":          `"url" must be an http:// or https:// URL, not "ftp://example.com/x"`,
		"headers_value":    `"headers" must be an object of strings; headers["Authorization"] is null`,
		"bad_type":         `"type" must be "stdio", "http" or "sse", not "websocket"`,
		"type_type":        `"type" must be a string, not a number`,
		"disabled_type":    `"disabled" must be true or false, not a string`,
		"nul_arg":          `"args" must not contain NUL bytes; args[0] does`,
		"":                 "the server name must not be empty",
	}
	if len(got.Problems) != len(want) {
		t.Errorf("got %d problems, want %d: %q", len(got.Problems), len(want), got.Problems)
	}
	for _, p := range got.Problems {
		if p.File != path {
			t.Errorf("%q: File = %q, want %q", p.Entry, p.File, path)
		}
		if w, ok := want[p.Entry]; !ok {
			t.Errorf("unexpected problem %v", p)
		} else if p.Reason != w {
			t.Errorf("%q: Reason = %q, want %q", p.Entry, p.Reason, w)
		}
	}
}

// TestLoadEntryFields checks normalization (CFG-4) and the description
// fallback: the entry's own, else the file's, else "".
func TestLoadEntryFields(t *testing.T) {
	got := Load(Options{Extra: filepath.Join("testdata", "cfg", "entries.json"), LookPath: noLookPath})
	cases := []struct {
		name string
		want Entry
	}{
		{"good", Entry{Name: "good", Type: TypeStdio, Command: "echo", Args: []string{"hi"}, Description: "own description"}},
		{"enabled", Entry{Name: "enabled", Type: TypeStdio, Command: "echo", Description: "file-level description"}},
	}
	for _, c := range cases {
		e := entry(t, got, c.name)
		c.want.File, c.want.Hash = filepath.Join("testdata", "cfg", "entries.json"), e.Hash
		if !reflect.DeepEqual(e, c.want) {
			t.Errorf("%s = %+v, want %+v", c.name, e, c.want)
		}
	}
	types := Load(Options{Extra: filepath.Join("testdata", "cfg", "types.json"), LookPath: noLookPath})
	if d := entry(t, types, "plain").Description; d != "" {
		t.Errorf("Description without any = %q, want empty", d)
	}
}

// TestLoadDisabled checks that "disabled": true skips the entry without a
// Problem, even when the rest of it is malformed, and says so in Warnings.
func TestLoadDisabled(t *testing.T) {
	path := filepath.Join("testdata", "cfg", "entries.json")
	got := Load(Options{Extra: path, LookPath: noLookPath})
	for _, p := range got.Problems {
		if p.Entry == "disabled" {
			t.Errorf("disabled entry gave a problem: %v", p)
		}
	}
	want := []string{path + `: server "disabled" is disabled; skipped`}
	if !slices.Equal(got.Warnings, want) {
		t.Errorf("Warnings = %q, want %q", got.Warnings, want)
	}
}

// TestLoadTypes checks the type default (http with a url, else stdio), the
// streamable-http synonyms, and that fields of the other transport are
// dropped with a warning.
func TestLoadTypes(t *testing.T) {
	path := filepath.Join("testdata", "cfg", "types.json")
	got := Load(Options{Extra: path, LookPath: noLookPath})
	cases := []struct {
		name, typ, command, url string
		headers                 map[string]string
	}{
		{"plain", TypeStdio, "srv", "", nil},
		{"url_only", TypeHTTP, "", "https://example.com/mcp", map[string]string{"Authorization": "Bearer t"}},
		{"explicit_stdio", TypeStdio, "srv", "", nil},
		{"explicit_http", TypeHTTP, "", "http://localhost:8080/mcp", nil},
		{"sse", TypeSSE, "", "https://example.com/sse", nil},
		{"streamable_dash", TypeHTTP, "", "https://example.com/a", nil},
		{"streamable_camel", TypeHTTP, "", "https://example.com/b", nil},
	}
	if len(got.Entries) != len(cases) || len(got.Problems) != 0 {
		t.Fatalf("Entries = %q, Problems = %q", names(got), got.Problems)
	}
	for i, c := range cases {
		e := got.Entries[i]
		if e.Name != c.name || e.Type != c.typ || e.Command != c.command || e.URL != c.url ||
			!reflect.DeepEqual(e.Headers, c.headers) || e.Cwd != "" {
			t.Errorf("entry %d = %+v, want name %q type %q command %q url %q headers %v",
				i, e, c.name, c.typ, c.command, c.url, c.headers)
		}
	}
	want := []string{
		path + `: server "explicit_stdio": "url" ignored for type "stdio"`,
		path + `: server "streamable_camel": "command", "cwd" ignored for type "http"`,
	}
	if !slices.Equal(got.Warnings, want) {
		t.Errorf("Warnings = %q, want %q", got.Warnings, want)
	}
}

// TestLoadOrder checks §10.1: only *.json directly inside the dir, files in
// byte order of their names, entries in the file's key order, then the
// MCP_SERVERS_CONFIG file.
func TestLoadOrder(t *testing.T) {
	dir := filepath.Join("testdata", "dir")
	extra := filepath.Join("testdata", "extra", "servers.json")
	got := Load(Options{Dir: dir, Extra: extra, LookPath: noLookPath})
	wantNames := []string{"from_B", "zeta", "alpha", "mid", "from_b", "extra_server"}
	if !slices.Equal(names(got), wantNames) {
		t.Errorf("Entries = %q, want %q", names(got), wantNames)
	}
	wantFiles := []string{
		filepath.Join(dir, "B.json"), filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json"), extra,
	}
	if !slices.Equal(got.Files, wantFiles) {
		t.Errorf("Files = %q, want %q", got.Files, wantFiles)
	}
	if len(got.Problems) != 0 {
		t.Errorf("Problems = %q, want none", got.Problems)
	}
	wantWarn := []string{extra + `: server "alpha" duplicates the one in ` + filepath.Join(dir, "a.json") +
		`, which wins (first in source order)`}
	if !slices.Equal(got.Warnings, wantWarn) {
		t.Errorf("Warnings = %q, want %q", got.Warnings, wantWarn)
	}
	if again := Load(Options{Dir: dir, Extra: extra, LookPath: noLookPath}); !reflect.DeepEqual(again, got) {
		t.Errorf("a second Load differs: %+v vs %+v", again, got)
	}
}

// TestLoadDuplicates checks CFG-2: the first loaded entry of a name wins
// across files and within one, a warning names both files, and a skipped
// entry claims no name.
func TestLoadDuplicates(t *testing.T) {
	dir := filepath.Join("testdata", "dup")
	a, b := filepath.Join(dir, "a.json"), filepath.Join(dir, "b.json")
	got := Load(Options{Dir: dir, LookPath: noLookPath})
	if !slices.Equal(names(got), []string{"x", "y"}) {
		t.Fatalf("Entries = %q, want [x y]", names(got))
	}
	if e := entry(t, got, "x"); e.Command != "first" || e.File != a {
		t.Errorf("x = %+v, want command first from %s", e, a)
	}
	if e := entry(t, got, "y"); e.Command != "y-from-b" || e.File != b {
		t.Errorf("y = %+v, want command y-from-b from %s", e, b)
	}
	want := []string{
		a + `: server "x" duplicates the one in ` + a + `, which wins (first in source order)`,
		b + `: server "x" duplicates the one in ` + a + `, which wins (first in source order)`,
	}
	if !slices.Equal(got.Warnings, want) {
		t.Errorf("Warnings = %q, want %q", got.Warnings, want)
	}
	if len(got.Problems) != 1 || got.Problems[0].Entry != "y" || got.Problems[0].File != a {
		t.Errorf("Problems = %q, want one for y in %s", got.Problems, a)
	}
}

// TestLoadMissingDir checks that a missing config dir is an empty set, not a
// problem.
func TestLoadMissingDir(t *testing.T) {
	got := Load(Options{Dir: filepath.Join(t.TempDir(), "nope"), LookPath: noLookPath})
	if !reflect.DeepEqual(got, Set{}) {
		t.Errorf("Load = %+v, want an empty Set", got)
	}
	if got := Load(Options{}); !reflect.DeepEqual(got, Set{}) {
		t.Errorf("Load(zero Options) = %+v, want an empty Set", got)
	}
}

// TestLoadDirProblems checks that a config dir path that is a file, and a
// *.json that is a directory, are problems, and the rest still loads.
func TestLoadDirProblems(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"b.json": `{"mcpServers":{"ok":{"command":"x"}}}`})
	if err := os.Mkdir(filepath.Join(dir, "a.json"), 0o700); err != nil {
		t.Fatal(err)
	}
	got := Load(Options{Dir: dir, LookPath: noLookPath})
	want := []Problem{{File: filepath.Join(dir, "a.json"), Reason: "not a regular file"}}
	if !reflect.DeepEqual(got.Problems, want) || !slices.Equal(names(got), []string{"ok"}) {
		t.Errorf("Problems = %q, Entries = %q; want %q, [ok]", got.Problems, names(got), want)
	}

	file := filepath.Join(dir, "b.json")
	got = Load(Options{Dir: file, LookPath: noLookPath})
	want = []Problem{{File: file, Reason: "cannot list the config dir: not a directory"}}
	if !reflect.DeepEqual(got.Problems, want) {
		t.Errorf("Problems = %q, want %q", got.Problems, want)
	}
}

// TestLoadUnreadable checks that a file without read permission is a
// problem.
func TestLoadUnreadable(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads any file")
	}
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.json": `{"mcpServers":{}}`})
	path := filepath.Join(dir, "a.json")
	if err := os.Chmod(path, 0); err != nil {
		t.Fatal(err)
	}
	got := Load(Options{Dir: dir, LookPath: noLookPath})
	want := []Problem{{File: path, Reason: "cannot read the file: permission denied"}}
	if !reflect.DeepEqual(got.Problems, want) {
		t.Errorf("Problems = %q, want %q", got.Problems, want)
	}
}

// TestLoadExtraInDir checks that MCP_SERVERS_CONFIG naming a file of the
// config dir reads it once, without duplicate warnings.
func TestLoadExtraInDir(t *testing.T) {
	dir := filepath.Join("testdata", "dir")
	extra := filepath.Join(dir, "a.json")
	got := Load(Options{Dir: dir, Extra: extra, LookPath: noLookPath})
	if !slices.Equal(names(got), []string{"from_B", "zeta", "alpha", "mid", "from_b"}) {
		t.Errorf("Entries = %q", names(got))
	}
	want := []string{"MCP_SERVERS_CONFIG names " + extra + ", which the config dir already provides; read once"}
	if !slices.Equal(got.Warnings, want) {
		t.Errorf("Warnings = %q, want %q", got.Warnings, want)
	}
}

// TestLoadCwd checks that a missing or non-directory cwd still loads the
// entry, with a warning naming the path.
func TestLoadCwd(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "missing")
	file := filepath.Join(dir, "a.json")
	writeFiles(t, dir, map[string]string{"a.json": `{"mcpServers":{
		"here": {"command": "x", "cwd": ` + quote(dir) + `},
		"gone": {"command": "x", "cwd": ` + quote(missing) + `},
		"file": {"command": "x", "cwd": ` + quote(file) + `}}}`})
	got := Load(Options{Dir: dir, LookPath: noLookPath})
	if !slices.Equal(names(got), []string{"here", "gone", "file"}) {
		t.Errorf("Entries = %q, want [here gone file]", names(got))
	}
	if e := entry(t, got, "gone"); e.Cwd != missing {
		t.Errorf("gone.Cwd = %q, want %q", e.Cwd, missing)
	}
	want := []string{
		file + `: server "gone": cwd ` + missing + ` does not exist; starting it will fail`,
		file + `: server "file": cwd ` + file + ` is not a directory; starting it will fail`,
	}
	if !slices.Equal(got.Warnings, want) {
		t.Errorf("Warnings = %q, want %q", got.Warnings, want)
	}
}

// quote returns s as a JSON string literal.
func quote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// TestProblemString checks the log form of a Problem.
func TestProblemString(t *testing.T) {
	cases := []struct {
		p    Problem
		want string
	}{
		{Problem{File: "a.json", Reason: "bad"}, "a.json: bad"},
		{Problem{File: "a.json", Entry: "x", Reason: "bad"}, `a.json: server "x": bad`},
	}
	for _, c := range cases {
		if got := c.p.String(); got != c.want {
			t.Errorf("%#v.String() = %q, want %q", c.p, got, c.want)
		}
	}
}
