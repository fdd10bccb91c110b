// Package config loads the upstream MCP servers the bridge proxies (spec
// §10): every *.json directly inside the config dir, sorted by file name,
// then the file named by MCP_SERVERS_CONFIG, then the agent config files of
// the enabled sources (sources.go), in that precedence. A malformed file or entry is
// skipped with a Problem and everything else loads (CFG-1). The package also
// fingerprints the sources for reload checks (RLD-1), builds a stdio child's
// environment (ENV-1). Server and tool aliases (§9.3) are protocol/alias's.
//
// Load and Stamp only read the file system, so they are safe for concurrent
// use. The package imports only the standard library, so any layer may use
// it.
package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Server types. Every loaded Entry has one of them.
const (
	TypeStdio = "stdio"
	TypeHTTP  = "http"
	TypeSSE   = "sse"
)

// maxFileSize bounds one config file; a bigger one is skipped with a Problem.
const maxFileSize = 16 << 20

// Entry is one normalized server entry (CFG-4). Fields that do not apply to
// its Type are empty: a stdio entry has no URL or Headers, and an http or sse
// entry has no Command, Args, Env or Cwd. Empty lists and maps are nil.
type Entry struct {
	Name    string
	File    string // the config file it came from
	Type    string // TypeStdio, TypeHTTP or TypeSSE
	Command string // non-empty for stdio
	Args    []string
	Env     map[string]string
	Cwd     string
	URL     string // an http or https URL, non-empty for http and sse
	Headers map[string]string
	OAuth   *OAuth // http and sse only; nil without an "oauth" block
	// Identity is whose sign-in the server's requests carry: IdentityShared
	// (the operator's `bridge auth login`, the default) or IdentityPrincipal
	// (each principal of bridge serve signs in as themselves).
	Identity    string // "" for stdio
	Description string // the entry's when non-empty, else the file-level description, else ""
	// Hash is the hex SHA-256 of the normalized entry: type, command, args,
	// env, cwd, url and headers, but not name, file or description. It does
	// not depend on map order, so it keys the disk catalog and the reload diff.
	Hash string
}

// Identities of an http or sse entry ("identity").
const (
	IdentityShared    = "shared"
	IdentityPrincipal = "principal"
)

// Problem is a skipped file or entry, for warnings and `bridge doctor`.
// Entry is "" for a file, and for an entry whose name is empty.
type Problem struct {
	File   string
	Entry  string
	Reason string
}

// String formats p for a log line: "file: reason" or
// "file: server "name": reason".
func (p Problem) String() string {
	switch {
	case p.Entry == "" && p.File == "":
		return p.Reason
	case p.Entry == "":
		return p.File + ": " + p.Reason
	}
	return fmt.Sprintf("%s: server %q: %s", p.File, p.Entry, p.Reason)
}

// Set is the result of one Load.
type Set struct {
	// Entries are the loaded servers in source order: files sorted by name,
	// then MCP_SERVERS_CONFIG; within a file, the order of its "mcpServers"
	// keys. Names are unique and non-empty.
	Entries []Entry
	// Problems are the skipped files and entries that need fixing.
	Problems []Problem
	// Self are the entries skipped because they would launch this bridge
	// (the user registered it in the same agent file). That is expected, not
	// a fault, so it is kept apart from Problems: nobody is asked to fix it.
	Self []Problem
	// Disabled are the entries with "disabled": true whose name no other
	// entry loads, so a call that names one is told it is disabled, and
	// where, rather than that it is unknown.
	Disabled []Problem
	// Unapproved are the entries of project files (project.go) that the
	// user has not approved, whose name no other entry loads. They are
	// listed, never started: Reason says how to approve them.
	Unapproved []Problem
	// Warnings are non-fatal notes: duplicates, disabled entries, a missing
	// cwd, ignored fields, a file without "mcpServers".
	Warnings []string
	// Files are the config files considered, in source order, including
	// those skipped with a Problem.
	Files []string
	// Sources names the source of each file in Files (SourceMCPs, ...).
	Sources map[string]string
	// Project marks the files in Files that came with the project in Cwd
	// rather than from the user's own config.
	Project map[string]bool
}

// Options says where the configuration lives and how the self-server guard
// behaves. The zero value loads nothing.
type Options struct {
	Dir       string // MCP_BRIDGE_CONFIG_DIR; "" means no dir
	Extra     string // MCP_SERVERS_CONFIG, "" when unset
	AllowSelf bool   // MCP_BRIDGE_ALLOW_SELF_SERVER: turns off the §10.3 guard
	// SelfExe is the absolute path of the running bridge executable
	// (os.Executable, symlinks resolved); "" turns off guard rules (b) and (c).
	SelfExe string
	// LookPath resolves a command through PATH; nil means exec.LookPath.
	LookPath func(string) (string, error)
	// Sources are the enabled sources (ParseSources); nil means mcps and
	// env only. Home and Cwd locate the agent config files; "" skips the
	// files under them.
	Sources   []string
	Home, Cwd string
	// Project turns on the project scopes: the config files in Cwd that
	// come with a cloned repository (./.mcp.json, ./.cursor/mcp.json, ...;
	// projectFiles lists them). The stdio front sets it, since its working
	// directory is the client's project. A front that serves other
	// principals (the future `bridge serve`) must leave it off: a project
	// directory is not theirs, and its files must not even be read.
	Project bool
	// ProjectServers is MCP_BRIDGE_PROJECT_SERVERS (ProjectApproved when
	// ""): which servers of the project files may start.
	ProjectServers string
}

// enabled reports whether source src is read.
func (o Options) enabled(src string) bool {
	if o.Sources == nil {
		return src == SourceMCPs || src == SourceEnv
	}
	return slices.Contains(o.Sources, src)
}

// Load reads every config source once and returns what it found. It never
// fails as a whole: a missing Dir gives an empty Set, and each unusable file
// or entry becomes a Problem.
func Load(o Options) Set {
	l := newLoader(o)
	if o.enabled(SourceMCPs) {
		for _, name := range l.listDir() {
			l.loadFileAs(filepath.Join(o.Dir, name), SourceMCPs, formatMCPServers, nil)
		}
	}
	if o.Extra != "" && o.enabled(SourceEnv) {
		l.loadExtra(o.Extra)
	}
	l.loadAgentFiles()
	// A disabled or unapproved entry whose name another entry loads is only
	// a warning; of several unapproved ones, the first names the file.
	loaded := func(p Problem) bool { _, ok := l.owner[p.Entry]; return ok }
	l.set.Disabled = slices.DeleteFunc(l.set.Disabled, loaded)
	seen := map[string]bool{}
	l.set.Unapproved = slices.DeleteFunc(l.set.Unapproved, func(p Problem) bool {
		dup := seen[p.Entry]
		seen[p.Entry] = true
		return dup || loaded(p)
	})
	return l.set
}

// loader accumulates one Load's Set.
type loader struct {
	o        Options
	self     string      // o.SelfExe with symlinks resolved; "" when unknown
	selfInfo os.FileInfo // stat of self, nil when unknown
	set      Set
	owner    map[string]string // name of each loaded entry -> its file
	read     []os.FileInfo     // files already read, to spot Extra among them
}

func newLoader(o Options) *loader {
	if o.LookPath == nil {
		o.LookPath = exec.LookPath
	}
	l := &loader{o: o, owner: map[string]string{}}
	if o.SelfExe != "" && !o.AllowSelf {
		l.self = filepath.Clean(o.SelfExe)
		if p, err := filepath.EvalSymlinks(l.self); err == nil {
			l.self = p
		}
		l.selfInfo, _ = os.Stat(l.self)
	}
	return l
}

// addFile records a file considered and its source.
func (l *loader) addFile(path, src string) {
	l.set.Files = append(l.set.Files, path)
	if l.set.Sources == nil {
		l.set.Sources = map[string]string{}
	}
	l.set.Sources[path] = src
}

func (l *loader) problem(file, entry, reason string) {
	l.set.Problems = append(l.set.Problems, Problem{File: file, Entry: entry, Reason: reason})
}

func (l *loader) warn(format string, args ...any) {
	l.set.Warnings = append(l.set.Warnings, fmt.Sprintf(format, args...))
}

// listDir returns the names of the *.json entries directly inside the config
// dir, sorted in byte order. A missing dir yields none.
func (l *loader) listDir() []string {
	if l.o.Dir == "" {
		return nil
	}
	des, err := os.ReadDir(l.o.Dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			l.problem(l.o.Dir, "", "cannot list the config dir: "+errText(err))
		}
		return nil
	}
	var names []string
	for _, de := range des {
		if strings.HasSuffix(de.Name(), ".json") {
			names = append(names, de.Name())
		}
	}
	slices.Sort(names)
	return names
}

// loadExtra loads the MCP_SERVERS_CONFIG file, unless it is TOML or one of
// the dir's files, which were already read.
func (l *loader) loadExtra(path string) {
	if strings.EqualFold(filepath.Ext(path), ".toml") {
		l.addFile(path, SourceEnv)
		l.problem(path, "", "TOML config files are not supported yet")
		return
	}
	if fi, err := os.Stat(path); err == nil {
		for _, r := range l.read {
			if os.SameFile(fi, r) {
				l.warn("MCP_SERVERS_CONFIG names %s, which the config dir already provides; read once", path)
				return
			}
		}
	}
	l.loadFileAs(path, SourceEnv, formatMCPServers, nil)
}

// loadFileAs reads one config file of source src and loads its entries;
// g gates them when the file came with the project (nil: the user's own
// file). A file an earlier source already read (an agent file also named
// by MCP_SERVERS_CONFIG) is read once.
func (l *loader) loadFileAs(path, src string, ft format, g *gate) {
	if src != SourceMCPs && src != SourceEnv {
		if fi, err := os.Stat(path); err == nil {
			for _, r := range l.read {
				if os.SameFile(fi, r) {
					return
				}
			}
		}
	}
	l.addFile(path, src)
	if g != nil {
		if l.set.Project == nil {
			l.set.Project = map[string]bool{}
		}
		l.set.Project[path] = true
	}
	data, fi, reason := readConfigFile(path)
	if reason != "" {
		l.problem(path, "", reason)
		return
	}
	l.read = append(l.read, fi)
	l.loadBytes(path, data, ft, g)
}

// readConfigFile reads one config file. Only regular files are read, and
// the open never blocks (a FIFO is refused, not waited on). reason is why
// it cannot be used, "" when it can.
func readConfigFile(path string) (data []byte, fi os.FileInfo, reason string) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, "cannot read the file: " + errText(err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, nil, "cannot read the file: " + errText(err)
	}
	if !fi.Mode().IsRegular() {
		return nil, nil, "not a regular file"
	}
	if data, err = io.ReadAll(io.LimitReader(f, maxFileSize+1)); err != nil {
		return nil, nil, "cannot read the file: " + errText(err)
	}
	if len(data) > maxFileSize {
		return nil, nil, fmt.Sprintf("the file is larger than %d MiB", maxFileSize>>20)
	}
	return data, fi, ""
}

// loadBytes loads the entries of one file's contents, named path, kept in
// format f; g gates them as in loadFileAs.
func (l *loader) loadBytes(path string, data []byte, f format, g *gate) {
	v, err := decodeJSON(data)
	if err != nil {
		l.problem(path, "", err.Error())
		return
	}
	top, ok := v.(*object)
	if !ok {
		l.problem(path, "", fmt.Sprintf(`the top level must be an object with "mcpServers", not %s`, kind(v)))
		return
	}
	fileDesc := ""
	if d, ok := top.get("description"); ok && d != nil {
		if s, ok := d.(string); ok {
			fileDesc = s
		} else {
			l.warn(`%s: the file-level "description" must be a string, not %s; ignored`, path, kind(d))
		}
	}
	if f != formatMCPServers {
		// An agent's file: having no servers is normal there.
		names, entries, _ := l.agentServers(path, top, f)
		for i, name := range names {
			l.loadEntry(path, name, entries[i], fileDesc, g)
		}
		return
	}
	raw, ok := top.get("mcpServers")
	if !ok || raw == nil {
		l.warn(`%s: no "mcpServers" object; nothing to load`, path)
		return
	}
	servers, ok := raw.(*object)
	if !ok {
		l.problem(path, "", fmt.Sprintf(`"mcpServers" must be an object of servers, not %s`, kind(raw)))
		return
	}
	for i, name := range servers.keys {
		l.loadEntry(path, name, servers.vals[i], fileDesc, g)
	}
}

// loadEntry parses, guards, gates (g: see loadFileAs) and deduplicates one
// entry. Only an entry that loads claims its name: a skipped one leaves it
// to a later file.
func (l *loader) loadEntry(file, name string, raw any, fileDesc string, g *gate) {
	e, disabled, ignored, err := parseEntry(name, raw, fileDesc)
	if err != nil {
		l.problem(file, name, err.Error())
		return
	}
	if disabled {
		l.warn("%s: server %q is disabled; skipped", file, name)
		l.set.Disabled = append(l.set.Disabled, Problem{File: file, Entry: name, Reason: "disabled"})
		return
	}
	e.File = file
	if l.isSelf(e) {
		l.set.Self = append(l.set.Self, Problem{File: file, Entry: name, Reason: "this bridge's own entry"})
		return
	}
	if g != nil && !g.approved(name) {
		// Never started, so the project's command never runs.
		l.set.Unapproved = append(l.set.Unapproved, Problem{File: file, Entry: name, Reason: g.reason})
		return
	}
	if first, dup := l.owner[name]; dup {
		l.warn("%s: server %q duplicates the one in %s, which wins (first in source order)", file, name, first)
		return
	}
	if len(ignored) > 0 {
		l.warn("%s: server %q: %s ignored for type %q", file, name, strings.Join(ignored, ", "), e.Type)
	}
	if e.Cwd != "" {
		if fi, err := os.Stat(e.Cwd); err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				l.warn("%s: server %q: cwd %s does not exist; starting it will fail", file, name, e.Cwd)
			} else {
				l.warn("%s: server %q: cwd %s cannot be checked: %s", file, name, e.Cwd, errText(err))
			}
		} else if !fi.IsDir() {
			l.warn("%s: server %q: cwd %s is not a directory; starting it will fail", file, name, e.Cwd)
		}
	}
	e.Hash = hashEntry(e)
	l.owner[name] = file
	l.set.Entries = append(l.set.Entries, e)
}

// errText is err's innermost message, without the path a *PathError repeats.
func errText(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
