package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/bridge-mcp/bridge/engine"
)

// runCmd serves MCP over stdio.
func (m *Main) runCmd(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	watch := fs.Bool("watch", false, "reload the server configuration when its files change (and on SIGHUP)")
	if _, code, ok := m.parse("run", fs, args, 0); !ok {
		return code
	}
	env, ok := m.loadEnv()
	if !ok {
		return 2
	}
	if isTerminal(m.Stdin) {
		// One line for a person who ran it by hand; an MCP client that
		// speaks on this terminal is still served.
		fmt.Fprintln(m.Stderr, "bridge: this is an MCP stdio server and waits for an MCP client on stdin; "+
			"add it to your agent (e.g. `claude mcp add bridge -- bridge run`, README \"Add to your agent\"), "+
			"try `bridge exec 'print(1)'`, or see `bridge --help`")
	}
	out := m.Stdout
	if f, isFile := out.(*os.File); isFile && f == os.Stdout {
		mcpOut, err := privateStdout()
		if err != nil {
			return m.usage("run: %v", err)
		}
		defer mcpOut.Close()
		out = mcpOut
	}
	log := m.logger(env, env.LogLevel)
	e := engine.New(env, Version(), log, m.Getenv, *watch)
	e.SignInThroughClient()
	if err := e.Serve(ctx, m.Stdin, out); err != nil {
		log.Error().Err(err).Msg("bridge stopped")
		return 1
	}
	return 0
}

// privateStdout keeps fd 1 for MCP frames only (MCP-5): it duplicates fd 1
// (close-on-exec) for the MCP writer, points fd 1 at stderr and sets
// os.Stdout to stderr, so stray prints of any library land on stderr.
func privateStdout() (*os.File, error) {
	fd, err := unix.FcntlInt(1, unix.F_DUPFD_CLOEXEC, 3)
	if err != nil {
		return nil, err
	}
	if err := unix.Dup2(2, 1); err != nil {
		unix.Close(fd)
		return nil, err
	}
	os.Stdout = os.Stderr
	return os.NewFile(uintptr(fd), "mcp-stdout"), nil
}
