package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/bridge-mcp/bridge/actors"
	"github.com/bridge-mcp/bridge/engine/config"
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
		add("OK", "state dir", "%s is writable", filepath.Join(e.Env.StateDir, ".bridge"))
	}

	set := config.Load(e.configOptions())
	perFile := map[string]int{}
	for _, en := range set.Entries {
		perFile[en.File]++
	}
	problems := map[string][]string{}
	for _, p := range set.Problems {
		problems[p.File] = append(problems[p.File], strings.TrimSpace(p.Entry+" "+p.Reason))
	}
	if len(set.Files) == 0 {
		add("WARN", "config", "no *.json files in %s (MCP_BRIDGE_CONFIG_DIR) and no MCP_SERVERS_CONFIG", e.Env.ConfigDir)
	}
	for _, f := range set.Files {
		if len(problems[f]) > 0 {
			add("WARN", "config "+f, "%d servers; skipped: %s", perFile[f], strings.Join(problems[f], "; "))
		} else {
			add("OK", "config "+f, "%d servers", perFile[f])
		}
	}
	for _, w := range set.Warnings {
		add("WARN", "config", "%s", w)
	}

	switch pol := LoadPolicy(e.Env.ConfigDir); {
	case pol == nil:
		add("OK", "policy", "no %s in %s: every tool of the servers a call names may be called", PolicyFile, e.Env.ConfigDir)
	case pol.Err != nil:
		add("FAIL", "policy", "%s: %v; every tool call is refused until it is fixed", pol.Source, pol.Err)
	default:
		add("OK", "policy", "%s: rules for %d servers, %d tool calls per execution at most (0: no cap)", pol.Source, len(pol.Servers), pol.MaxCalls)
	}

	specs := specsFrom(set, e.getenv)
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
	if !found {
		add("FAIL", "server "+only, "not found in the configuration")
	}
	return out
}

// doctorServer starts one server through a real client actor and reports
// its start time and tool count.
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
	return Check{"OK", name, fmt.Sprintf("%s, started and initialized in %v, %d tools", spec.Type, time.Since(start).Round(time.Millisecond), len(tools))}
}
