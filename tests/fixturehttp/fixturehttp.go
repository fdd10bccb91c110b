// Package fixturehttp runs the HTTP side of the scripted test servers
// (tests/hostileserver, tests/modernserver): it listens, prints the
// streamable HTTP URL (http://ADDR/mcp) as the first line on stdout, which
// the tests read to find the server, and serves until SIGINT or SIGTERM.
package fixturehttp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Serve serves h on addr as Serve's package doc says, and returns the
// process's exit code; name prefixes its error lines on stderr.
func Serve(name, addr string, h http.Handler) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: listen: %v\n", name, err)
		return 1
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	fmt.Printf("http://%s/mcp\n", ln.Addr())
	select {
	case err := <-errc:
		fmt.Fprintf(os.Stderr, "%s: serve: %v\n", name, err)
		return 1
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(os.Stderr, "%s: shutdown: %v\n", name, err)
	}
	return 0
}
