package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/engine"
	"github.com/bridge-mcp/bridge/engine/bench"
	"github.com/bridge-mcp/bridge/engine/kube"
)

// benchServerCmd is the hidden MCP server `bridge bench` proxies: echo and
// sleep tools plus a synthetic catalog of --tools tools (--catalog-only
// leaves out echo and sleep).
func (m *Main) benchServerCmd(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("bench-server", flag.ContinueOnError)
	n := fs.Int("tools", 0, "synthetic tools")
	catalogOnly := fs.Bool("catalog-only", false, "serve only the synthetic tools")
	if _, code, ok := m.parse("bench-server", fs, args, 0); !ok {
		return code
	}
	if err := bench.ServeEchoServer(ctx, m.Stdin, m.Stdout, *n, *catalogOnly); err != nil {
		fmt.Fprintf(m.Stderr, "bridge: bench-server: %v\n", err)
		return 1
	}
	return 0
}

// benchCmd measures this binary against baselines in the same run and
// writes bench.json and bench.md. The real npm servers (token figures) are
// looked up under --npm-dir, default $BRIDGE_TEST_NPM_DIR or
// ~/.cache/bridge-npm; without them those figures are reported as not
// measured.
func (m *Main) benchCmd(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "small sample counts (CI)")
	samples := fs.Int("samples", 200, "warm samples, `N` >= 1")
	out := fs.String("out", "bench-out", "`DIR` for bench.json and bench.md")
	npmDir := fs.String("npm-dir", "", "`DIR` whose node_modules/.bin holds the real MCP servers measured for tokens (default $BRIDGE_TEST_NPM_DIR or ~/.cache/bridge-npm)")
	runtime := fs.String("runtime", "", "container `RUNTIME` to measure: podman, docker or a path (default: MCP_BRIDGE_RUNTIME, else podman, else docker)")
	bridgeBin := fs.String("bridge", "", "bridge `BINARY` to measure, e.g. an older build for a before/after comparison in one run (default: this one)")
	previous := fs.String("previous", "", "measure the warm calls and the everything server's first call of bridge `BINARY` too (latency group), in turns with this build's: before/after figures from one run")
	httpServe := fs.Bool("http", false, "measure bridge serve instead: 1, 10 and 50 concurrent HTTP clients, RSS per session and fairness (with --groups, those groups too)")
	groups := fs.String("groups", "", "comma-separated figure `GROUPS` to measure: "+strings.Join(bench.GroupNames, ", ")+" (default: all; kubernetes, durable, audit and traces only when named: the first needs a cluster, KUBECONFIG, the second writes 200 MB snapshots, the others run bridges side by side)")
	if _, code, ok := m.parse("bench", fs, args, 0); !ok {
		return code
	}
	var only []string
	for _, g := range strings.Split(*groups, ",") {
		if g = strings.TrimSpace(g); g == "" {
			continue
		}
		if !slices.Contains(bench.GroupNames, g) {
			return m.usage("bench: unknown group %q in --groups: want some of %s (bridge bench --help)", g, strings.Join(bench.GroupNames, ", "))
		}
		only = append(only, g)
	}
	if *samples < 1 {
		return m.usage("bench: invalid --samples %d: want an integer >= 1 (bridge bench --help)", *samples)
	}
	env, ok := m.loadEnv()
	if !ok {
		return 2
	}
	benchEnv := append(os.Environ(), "MCP_BRIDGE_LOG_LEVEL=warn")
	if *runtime != "" {
		env.Runtime = *runtime
		benchEnv = append(benchEnv, "MCP_BRIDGE_RUNTIME="+*runtime)
	}
	if *npmDir == "" {
		*npmDir = m.Getenv("BRIDGE_TEST_NPM_DIR")
	}
	if *npmDir == "" {
		home := m.Getenv("HOME")
		if home == "" {
			home, _ = os.UserHomeDir()
		}
		*npmDir = filepath.Join(home, ".cache", "bridge-npm")
	}
	if *quick {
		*samples = 20
	}
	self, err := os.Executable()
	if err != nil {
		return m.usage("bench: %v", err)
	}
	version := Version()
	if *previous != "" {
		if *previous, err = filepath.Abs(*previous); err == nil {
			_, err = os.Stat(*previous)
		}
		if err != nil {
			return m.usage("bench: --previous: %v", err)
		}
	}
	if *bridgeBin != "" {
		if self, err = filepath.Abs(*bridgeBin); err != nil {
			return m.usage("bench: --bridge: %v", err)
		}
		if _, err := os.Stat(self); err != nil {
			return m.usage("bench: --bridge: %v", err)
		}
		version = self
	}
	l := engine.NewContainer(env, m.logger(env, env.LogLevel))
	cli, err := l.CLI()
	if err == nil {
		err = l.Facts().Err // the fix for a runtime that does not answer; settles the OCI runtime
	}
	if err != nil {
		fmt.Fprintf(m.Stderr, "bridge: bench: %v\n", err)
		return 1
	}
	container := append(append([]string{cli}, l.GlobalArgs()...), l.VerifyArgs(env.Image)...)
	var socketArgv []string
	if args := l.SocketLinkArgs(env.Image); args != nil {
		socketArgv = append(append([]string{cli}, l.GlobalArgs()...), args...)
	}
	baseline := append(append([]string{}, container...), "python3", "-c", "print(1)")
	var kl *kube.Launcher
	if slices.Contains(only, "kubernetes") {
		var stop func()
		kl, stop = benchKube(ctx, env, m.logger(env, env.LogLevel))
		defer stop()
	}
	rep, err := bench.Run(ctx, bench.Options{
		Bridge: self, Version: version, Env: benchEnv,
		Samples: *samples, Quick: *quick, BaselineArgv: baseline, ContainerArgv: container, RuntimeCLI: cli,
		SocketArgv:  socketArgv,
		MemoryLimit: env.MemoryBytes, NPMDir: *npmDir, Groups: only, HTTP: *httpServe, Kube: kl, Previous: *previous, Log: m.Stderr,
	})
	if err != nil {
		fmt.Fprintf(m.Stderr, "bridge: %v\n", err)
		return 1
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintf(m.Stderr, "bridge: bench: %v\n", err)
		return 1
	}
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		fmt.Fprintf(m.Stderr, "bridge: bench: %v\n", err)
		return 1
	}
	md := rep.Markdown()
	if err := os.WriteFile(filepath.Join(*out, "bench.json"), append(js, '\n'), 0o644); err != nil {
		fmt.Fprintf(m.Stderr, "bridge: bench: %v\n", err)
		return 1
	}
	if err := os.WriteFile(filepath.Join(*out, "bench.md"), []byte(md), 0o644); err != nil {
		fmt.Fprintf(m.Stderr, "bridge: bench: %v\n", err)
		return 1
	}
	fmt.Fprint(m.Stdout, md)
	return 0
}

// benchKube is the kubernetes backend of env for the bench's own pods (the
// kubernetes group's floors), with its Serve running until stop: the
// bench's pods then have a live owner, and are deleted when it ends. No
// warm pool: the bench starts each of its pods itself.
func benchKube(ctx context.Context, env engine.Env, log zerolog.Logger) (l *kube.Launcher, stop func()) {
	env.Kube.WarmPool = 0
	l = engine.NewKube(env, log)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = l.Serve(ctx)
	}()
	return l, func() {
		cancel()
		<-done
	}
}
