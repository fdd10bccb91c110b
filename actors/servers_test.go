package actors

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
	"github.com/rs/zerolog"
	"github.com/thejerf/suture/v4"
)

// stubbornServerArg makes the test binary a stdio MCP server that ignores
// SIGTERM and outlives its stdin, so only SIGKILL ends it: stopping it takes
// the client's whole polite-then-term grace.
const stubbornServerArg = "stubborn-mcp-server"

// runStubbornServer is the stubborn server's main. It opens the FIFO named
// by STUBBORN_FIFO for writing and holds it open until it dies, so the test
// sees its death as EOF.
func runStubbornServer() int {
	signal.Ignore(syscall.SIGTERM)
	fifo, err := os.OpenFile(os.Getenv("STUBBORN_FIFO"), os.O_WRONLY, 0)
	if err != nil {
		return 1
	}
	if _, err := fifo.Write([]byte("u")); err != nil {
		return 1
	}
	s := server.NewMCPServer("stubborn", "1")
	s.AddTool(mcp.NewTool("echo"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("ok"), nil
	})
	_ = server.NewStdioServer(s).Listen(context.Background(), os.Stdin, os.Stdout)
	time.Sleep(time.Minute)
	return 0
}

// lifeline is the read end of a stubborn server's FIFO.
type lifeline struct{ f *os.File }

func newLifeline(t *testing.T) (string, *lifeline) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "alive")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
	// O_NONBLOCK: opening the read end does not wait for a writer.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return path, &lifeline{f}
}

// read is one non-blocking read: n bytes, or EOF once every writer is gone,
// or a would-block error while the writer lives and is silent.
func (l *lifeline) read() (int, error) {
	buf := make([]byte, 8)
	return syscall.Read(int(l.f.Fd()), buf)
}

// alive reports whether the server holds its end open: a read would block
// rather than see EOF. Call it only after up has seen the server write.
func (l *lifeline) alive() bool {
	n, err := l.read()
	return n < 0 && errors.Is(err, syscall.EAGAIN)
}

// waitUp waits until the server has opened its end and written.
func (l *lifeline) waitUp(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if n, _ := l.read(); n > 0 {
			return
		}
	}
	t.Fatal("stubborn server never opened its lifeline")
}

// waitGone waits until every writer has closed its end.
func (l *lifeline) waitGone(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if n, err := l.read(); n == 0 && err == nil {
			return
		}
	}
	t.Fatal("stubborn server still alive 20 s after it was removed")
}

// stubbornSetup adds a router and a servers manager to sup; it returns them,
// the stubborn server's lifeline and its spec.
func stubbornSetup(t *testing.T, sup *suture.Supervisor) (*Servers, *Router, *lifeline, ServerSpec) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	fifo, life := newLifeline(t)
	stubborn := ServerSpec{Name: "stubborn", Type: "stdio", Command: exe, Args: []string{stubbornServerArg},
		Env: []string{"STUBBORN_FIFO=" + fifo}, Hash: "s1"}
	r := NewRouter()
	r.Log = zerolog.Nop()
	deps := &ClientDeps{StartTimeout: 20 * time.Second, CallTimeout: 5 * time.Second, Store: noStore{}, Log: zerolog.Nop()}
	sup.Add(r)
	m := NewServers(sup, deps, r, func(string) suture.Spec {
		return suture.Spec{EventHook: func(suture.Event) {}, Timeout: 10 * time.Second}
	})
	sup.Add(m)
	return m, r, life, stubborn
}

// startStubborn configures the stubborn server and starts its process.
func startStubborn(t *testing.T, ctx context.Context, m *Servers, r *Router, life *lifeline, spec ServerSpec) {
	t.Helper()
	if _, err := m.Apply(ctx, []ServerSpec{spec}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Snapshot().Server("stubborn").Client.Tools(ctx); err != nil {
		t.Fatalf("start the stubborn server: %v", err)
	}
	life.waitUp(t)
}

// runStubborn runs a router and a servers manager until the test ends, with
// the stubborn server configured and started.
func runStubborn(t *testing.T, ctx context.Context) (*Servers, *Router, *lifeline, ServerSpec) {
	t.Helper()
	sup := quietSupervisor("servers-test")
	m, r, life, stubborn := stubbornSetup(t, sup)
	serveUntilCleanup(t, sup)
	startStubborn(t, ctx, m, r, life, stubborn)
	return m, r, life, stubborn
}

// TestReloadDoesNotWaitForStoppingServer: a reload that removes a server
// whose process is slow to die publishes the new catalog, and a following
// reload that adds another server completes, while that process is still
// stopping; the supervisor still ends it (issue 14).
func TestReloadDoesNotWaitForStoppingServer(t *testing.T) {
	other := fakeHTTPServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, r, life, _ := runStubborn(t, ctx)

	d, err := m.Apply(ctx, nil, nil)
	if err != nil || !slices.Equal(d.Removed, []string{"stubborn"}) {
		t.Fatalf("remove: diff %+v, %v", d, err)
	}
	if !life.alive() {
		t.Fatal("the reload that removed the server returned only after its process died")
	}
	if r.Snapshot().Server("stubborn") != nil {
		t.Fatal("catalog after the removal still has stubborn")
	}
	d, err = m.Apply(ctx, []ServerSpec{other}, nil)
	if err != nil || !slices.Equal(d.Added, []string{"fake"}) {
		t.Fatalf("add: diff %+v, %v", d, err)
	}
	if r.Snapshot().Server("fake") == nil {
		t.Fatal("catalog after the add lacks fake")
	}
	if !life.alive() {
		t.Fatal("adding another server waited for the stopping one")
	}
	life.waitGone(t)
}

// TestShutdownWaitsForStoppingServer: a server removed by a reload is still
// owned: stopping the supervisor waits until its process is dead.
func TestShutdownWaitsForStoppingServer(t *testing.T) {
	sup := quietSupervisor("servers-test")
	m, r, life, stubborn := stubbornSetup(t, sup)
	runCtx, stop := context.WithCancel(context.Background())
	errc := sup.ServeBackground(runCtx)
	stopped := false
	defer func() {
		if !stopped {
			stop()
			<-errc
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	startStubborn(t, ctx, m, r, life, stubborn)
	if _, err := m.Apply(ctx, nil, nil); err != nil {
		t.Fatal(err)
	}
	stop()
	<-errc
	stopped = true
	if n, err := life.read(); n != 0 || err != nil {
		t.Fatalf("after shutdown the removed server's process lives on (read %d, %v)", n, err)
	}
}

// TestChangedServerStartsAfterOldOneDied: a reload that changes a server
// returns while the old process is still stopping, and the new process
// starts only once the old one is dead, so the two never run side by side.
func TestChangedServerStartsAfterOldOneDied(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, r, life, stubborn := runStubborn(t, ctx)

	fifo2, life2 := newLifeline(t)
	changed := stubborn
	changed.Env, changed.Hash = []string{"STUBBORN_FIFO=" + fifo2}, "s2"
	d, err := m.Apply(ctx, []ServerSpec{changed}, nil)
	if err != nil || !slices.Equal(d.Changed, []string{"stubborn"}) {
		t.Fatalf("change: diff %+v, %v", d, err)
	}
	if !life.alive() {
		t.Fatal("the reload that changed the server returned only after its old process died")
	}
	if _, err := r.Snapshot().Server("stubborn").Client.Tools(ctx); err != nil {
		t.Fatalf("start the changed server: %v", err)
	}
	if n, err := life.read(); n != 0 || err != nil {
		t.Fatalf("the changed server started while its old process lived (read %d, %v)", n, err)
	}
	life2.waitUp(t)
}
