// Command bridge is an MCP server with one tool, run_python, that runs
// Python in a locked-down container session whose code can call the user's
// other MCP servers.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/bridge-mcp/bridge/actors/childproc"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == childproc.WatchParentArg { // hidden: see actors/childproc/parentwatch.go
		os.Exit(childproc.RunParentWatcher(os.Args[2:]))
	}
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	// A client that closes the bridge's stderr (or stdout) before it exits
	// must not kill it halfway through its shutdown: its sandboxes are still
	// being removed (a Kubernetes pod has no watchdog of its own). Writes to
	// a closed pipe then fail with EPIPE, and a failed stdout ends the front.
	signal.Ignore(syscall.SIGPIPE)
	go func() {
		<-sigs
		cancel() // first signal: orderly shutdown (LIF-1)
		<-sigs
		os.Exit(1) // second signal: at once
	}()
	m := &Main{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv}
	os.Exit(m.Run(ctx, os.Args[1:]))
}
