package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/bridge-mcp/bridge/actors"
	"github.com/bridge-mcp/bridge/engine/config"
	"github.com/bridge-mcp/bridge/engine/httpd"
	"github.com/bridge-mcp/bridge/protocol/search"
)

// Check is one line of `bridge doctor`.
type Check struct {
	Status string `json:"status"` // OK, WARN or FAIL
	Name   string `json:"check"`
	Detail string `json:"detail"`
}

// Doctor runs every check: the runtime with a timed throwaway container,
// rootless limits, the image, the state dir, each config file and each
// server (started for real, which also fills the catalog cache). only, when
// set, limits the server checks to one server.
func (e *Engine) Doctor(ctx context.Context, only string) []Check {
	var out []Check
	add := func(status, name, format string, a ...any) {
		out = append(out, Check{status, name, fmt.Sprintf(format, a...)})
	}
	e.doctorRuntime(ctx, add)
	if err := os.MkdirAll(filepath.Join(e.Env.StateDir, ".bridge"), 0o700); err != nil {
		add("FAIL", "state dir", "%s is not writable: %v (MCP_BRIDGE_STATE_DIR)", e.Env.StateDir, err)
	} else if f, err := os.CreateTemp(filepath.Join(e.Env.StateDir, ".bridge"), ".doctor-*"); err != nil {
		add("FAIL", "state dir", "%s is not writable: %v (MCP_BRIDGE_STATE_DIR)", e.Env.StateDir, err)
	} else {
		f.Close()
		os.Remove(f.Name())
		dir := filepath.Join(e.Env.StateDir, ".bridge")
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			add("OK", "state dir", "%s is writable", dir)
		} else if free := int64(st.Bavail) * int64(st.Bsize); free < minStateFree {
			add("WARN", "state dir", "%s is writable, but only %s is free: session snapshots, memory and saved tools need room (grow the volume, or lower MCP_BRIDGE_SNAPSHOT_TOTAL)", dir, freeText(free))
		} else {
			add("OK", "state dir", "%s is writable, %s free", dir, freeText(free))
		}
	}

	e.doctorSessions(add)
	e.doctorAudit(add)
	e.doctorTokens(add)

	set := config.Load(e.configOptions())
	var absent []string
	for _, p := range config.SourcePaths(e.configOptions()) {
		if _, err := os.Stat(p); err != nil {
			absent = append(absent, p)
		}
	}
	detail := "reading " + strings.Join(e.Env.ConfigSources, ", ") + " (MCP_BRIDGE_CONFIG_SOURCES)"
	switch e.Env.ProjectServers {
	case config.ProjectNone:
		detail += "; project files not read (MCP_BRIDGE_PROJECT_SERVERS=none)"
	case config.ProjectAll:
		detail += "; every project server may start (MCP_BRIDGE_PROJECT_SERVERS=all)"
	default:
		detail += "; project servers start once approved (MCP_BRIDGE_PROJECT_SERVERS=approved)"
	}
	if n := len(absent); n > 0 {
		// Counted, not listed: most sources are other agents' files that
		// this machine does not have, and the paths are in the README.
		detail += fmt.Sprintf("; %d of their %d files absent (the README's sources table lists where each is read)", n, len(config.SourcePaths(e.configOptions())))
	}
	add("OK", "config sources", "%s", detail)
	doctorConfig(set, e.Env, add)

	switch pol := LoadPolicy(e.Env.ConfigDir); {
	case pol == nil:
		add("OK", "policy", "no %s in %s: every tool of the servers a call names may be called", PolicyFile, e.Env.ConfigDir)
	case pol.Err != nil:
		add("FAIL", "policy", "%s: %v; every tool call is refused until it is fixed", pol.Source, pol.Err)
	default:
		add("OK", "policy", "%s: %s", pol.Source, pol.Summary())
	}

	specs := e.withAuth(set, specsFrom(set, e.getenv))
	found := only == ""
	var mu sync.Mutex
	results := make([]Check, len(specs))
	var wg sync.WaitGroup
	for i, spec := range specs {
		if only != "" && spec.Name != only {
			continue
		}
		found = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := e.doctorServer(ctx, spec)
			mu.Lock()
			results[i] = c
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, c := range results {
		if c.Name != "" {
			out = append(out, c)
		}
	}
	out = append(out, e.doctorAuth(ctx, only)...)
	if !found {
		found = doctorNotLoaded(set, only, add)
	}
	if !found {
		names := make([]string, len(specs))
		for i, sp := range specs {
			names[i] = sp.Name
		}
		msg := "not found in the configuration"
		if sugg := search.Suggest(only, names, 1); len(sugg) > 0 {
			msg += fmt.Sprintf("; did you mean %q?", sugg[0])
		}
		if len(names) == 0 {
			msg += "; no servers are configured"
		} else {
			msg += " (servers: " + strings.Join(names, ", ") + ")"
		}
		add("FAIL", "server "+only, "%s", msg)
	}
	return out
}

// doctorNotLoaded reports a server that is configured but not loaded
// (unapproved, disabled, or skipped for a problem) with its file and the
// fix, and whether name was one of them: "not found" would send the user
// looking for an entry that is there.
func doctorNotLoaded(set config.Set, name string, add func(string, string, string, ...any)) bool {
	for _, g := range []struct {
		level, fix string
		problems   []config.Problem
	}{
		{"FAIL", "; fix the entry", set.Problems},
		{"WARN", "", set.Unapproved}, // the reason names the fix
		{"WARN", `; remove "disabled": true to serve it`, set.Disabled},
	} {
		for _, p := range g.problems {
			if p.Entry == name {
				add(g.level, "server "+name, "%s: %s%s", p.File, p.Reason, g.fix)
				return true
			}
		}
	}
	return false
}

// doctorConfig reports the config dir and each config file. A file or
// entry that was skipped is a FAIL (the rest still loads, but what the user
// wrote is not served); an unreadable dir is a FAIL with its cause; a
// missing dir or one without *.json files is a WARN, since a bridge without
// servers still runs code.
func doctorConfig(set config.Set, env Env, add func(string, string, string, ...any)) {
	perFile := map[string][]string{}
	for _, en := range set.Entries {
		perFile[en.File] = append(perFile[en.File], en.Name)
	}
	problems := map[string][]string{}
	self := map[string][]string{}
	for _, p := range set.Self {
		self[p.File] = append(self[p.File], p.Entry)
	}
	unapproved := map[string][]string{}
	fix := map[string]string{}
	for _, p := range set.Unapproved {
		unapproved[p.File] = append(unapproved[p.File], p.Entry)
		fix[p.File] = strings.TrimPrefix(p.Reason, "not approved: ")
	}
	dirFailed := false
	for _, p := range set.Problems {
		if p.File == env.ConfigDir && p.Entry == "" {
			add("FAIL", "config", "config dir %s: %s; make it a directory you can read, or set MCP_BRIDGE_CONFIG_DIR", env.ConfigDir, p.Reason)
			dirFailed = true
			continue
		}
		problems[p.File] = append(problems[p.File], strings.TrimSpace(p.Entry+" "+p.Reason))
	}
	if len(set.Files) == 0 && !dirFailed {
		if st, err := os.Stat(env.ConfigDir); errors.Is(err, fs.ErrNotExist) {
			add("WARN", "config", "config dir %s does not exist: create it with a *.json server file (README, \"Proxied MCP servers\") or set MCP_BRIDGE_CONFIG_DIR; no servers are proxied", env.ConfigDir)
		} else if err == nil && !st.IsDir() {
			add("FAIL", "config", "config dir %s is not a directory; set MCP_BRIDGE_CONFIG_DIR to a directory", env.ConfigDir)
		} else if err == nil {
			add("WARN", "config", "no *.json files in %s (MCP_BRIDGE_CONFIG_DIR), no MCP_SERVERS_CONFIG and no agent config files (MCP_BRIDGE_CONFIG_SOURCES=%s); no servers are proxied",
				env.ConfigDir, strings.Join(env.ConfigSources, ","))
		}
	}
	for _, f := range set.Files {
		contrib := fmt.Sprintf("%d servers", len(perFile[f]))
		if src := set.Sources[f]; src != "" && set.Project[f] {
			contrib = src + " (project file): " + contrib
		} else if src != "" {
			contrib = src + ": " + contrib
		}
		if len(perFile[f]) > 0 {
			contrib += " (" + strings.Join(perFile[f], ", ") + ")"
		}
		if len(self[f]) > 0 {
			contrib += "; this bridge's own entry not proxied: " + strings.Join(self[f], ", ")
		}
		if len(unapproved[f]) > 0 {
			contrib += "; listed but not started until approved: " + strings.Join(unapproved[f], ", ") + " (" + fix[f] + ")"
		}
		switch {
		case len(problems[f]) == 0 && len(unapproved[f]) > 0:
			add("WARN", "config "+f, "%s", contrib)
		case len(problems[f]) == 0:
			add("OK", "config "+f, "%s", contrib)
		default:
			add("FAIL", "config "+f, "%s; skipped: %s; fix the file (the other servers still load)", contrib, strings.Join(problems[f], "; "))
		}
	}
	for _, w := range set.Warnings {
		add("WARN", "config", "%s", w)
	}
}

// doctorServer starts one server through a real client actor and reports
// its start time and tool count. Entries of its tools/list the bridge
// cannot use make it a WARN that names them: the server works, but not all
// of it.
func (e *Engine) doctorServer(ctx context.Context, spec actors.ServerSpec) Check {
	name := "server " + spec.Name
	deps := e.clientDeps()
	deps.OnTools = func(string, string, []actors.ToolInfo) {}
	c := actors.NewClient(spec, deps)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Serve(cctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	start := time.Now()
	tools, err := c.Tools(cctx)
	if err != nil {
		return Check{"FAIL", name, err.Error()}
	}
	return serverCheck(name, fmt.Sprintf("%s, started in %v, %s", spec.Type, time.Since(start).Round(time.Millisecond), c.Reached().DescribeEra()), tools)
}

// serverCheck is a started server's doctor line: what, its tool count, and
// the entries it skipped.
func serverCheck(name, what string, tools []actors.ToolInfo) Check {
	usable, skipped := actors.SplitTools(tools)
	detail := fmt.Sprintf("%s, %d tools", what, len(usable))
	if len(skipped) == 0 {
		return Check{"OK", name, detail}
	}
	return Check{"WARN", name, detail + "; " + actors.SkipSummary(skipped) + "; its other tools work"}
}

// doctorTokens checks bridge serve's tokens file, when one is set: that it
// parses (the line at fault otherwise), that only its owner may read it,
// and that no token is short enough to guess.
func (e *Engine) doctorTokens(add func(string, string, string, ...any)) {
	path := e.Env.TokensFile
	if path == "" {
		return
	}
	set, others, err := httpd.LoadTokens(path)
	if err != nil {
		add("FAIL", "tokens", "%s: %v (MCP_BRIDGE_TOKENS_FILE)", path, err)
		return
	}
	if others {
		add("WARN", "tokens", "%s can be read by other users: `chmod 600 %s`", path, path)
	}
	if len(set.Short) > 0 {
		add("WARN", "tokens", "the tokens of %s are under %d characters, short enough to guess: make new ones with `openssl rand -hex 32`",
			strings.Join(set.Short, ", "), httpd.MinTokenLength)
	}
	add("OK", "tokens", "%s: %d tokens, for %s", path, set.Len(), strings.Join(set.Principals(), ", "))
}

// minStateFree is the free space under which doctor WARNs about the state
// directory's volume.
const minStateFree = 1 << 30

// freeText writes free space in GiB, or MiB under one GiB.
func freeText(n int64) string {
	if n >= 1<<30 {
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
	return fmt.Sprintf("%d MiB", n>>20)
}
