package bench

// httpserve.go measures bridge serve (bridge bench --http): warm latency
// and throughput with 1, 10 and 50 concurrent HTTP clients, each its own
// principal with its own session; the bridge's RSS and its growth per live
// session; and fairness: one principal's warm p95 while another floods
// print(1) calls past its concurrency cap.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// httpClientCounts are the concurrency levels measured.
var httpClientCounts = []int{1, 10, 50}

// floodCap is the flooding principal's MCP_BRIDGE_MAX_CALLS_PER_PRINCIPAL
// (its default), and the number of print(1) loops it runs.
const floodCap = 4

// served is a bridge serve process.
type served struct {
	cmd    *exec.Cmd
	url    string
	stderr *lockedBuffer
	done   chan struct{}
	rm     func()
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 { // keep the start of the log only: it holds the URL
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var serveURL = regexp.MustCompile(`"url":"(http://127\.0\.0\.1:[0-9]+/mcp)"`)

// startServe starts bridge serve on a free loopback port with one token
// per principal ("tok-" + principal), isolated like startBridge.
func startServe(ctx context.Context, o Options, principals []string, extra ...string) (*served, error) {
	return startServeWith(ctx, o, nil, principals, extra...)
}

// startServeWith is startServe proxying servers.
func startServeWith(ctx context.Context, o Options, servers map[string]any, principals []string, extra ...string) (*served, error) {
	return startServeArgs(ctx, o, servers, principals, nil, extra...)
}

// startServeArgs is startServeWith with more flags of bridge serve.
func startServeArgs(ctx context.Context, o Options, servers map[string]any, principals, flags []string, extra ...string) (*served, error) {
	env, rmEnv, err := isolated(o, servers)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "bridge-bench-tokens-")
	if err != nil {
		rmEnv()
		return nil, fmt.Errorf("bench: %w", err)
	}
	rm := func() { rmEnv(); os.RemoveAll(dir) }
	var lines []string
	for _, p := range principals {
		lines = append(lines, p+" tok-"+p)
	}
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		rm()
		return nil, fmt.Errorf("bench: %w", err)
	}
	env = append(env, "MCP_BRIDGE_TOKENS_FILE="+tokens, "MCP_BRIDGE_LOG_FORMAT=json", "MCP_BRIDGE_LOG_LEVEL=info")
	env = append(env, extra...)
	s := &served{stderr: &lockedBuffer{}, done: make(chan struct{}), rm: rm}
	s.cmd = exec.Command(o.Bridge, append([]string{"serve", "--listen", "127.0.0.1:0"}, flags...)...)
	s.cmd.Env = env
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		rm()
		return nil, fmt.Errorf("bench: start bridge serve: %w", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	deadline := time.After(30 * time.Second)
	for s.url == "" {
		if m := serveURL.FindStringSubmatch(s.stderr.String()); m != nil {
			s.url = m[1]
			break
		}
		select {
		case <-s.done:
			s.stop()
			return nil, fmt.Errorf("bench: bridge serve exited: %s", tailOf(s.stderr.String(), 800))
		case <-deadline:
			s.stop()
			return nil, fmt.Errorf("bench: bridge serve did not listen within 30s")
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return s, nil
}

// stop sends SIGTERM and waits (a minute at most, then SIGKILL).
func (s *served) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(time.Minute):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.rm()
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// httpProc is an initialized streamable HTTP client of one principal.
type httpProc struct {
	c       *client.Client
	session string
}

func (s *served) client(ctx context.Context, principal string) (*httpProc, error) {
	c, err := client.NewStreamableHttpClient(s.url,
		transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer tok-" + principal}))
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	if err := c.Start(ctx); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = "2025-11-25"
	req.Params.ClientInfo = mcp.Implementation{Name: "bridge-bench-http", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		c.Close()
		return nil, fmt.Errorf("bench: initialize over HTTP: %w", err)
	}
	return &httpProc{c: c, session: "bench"}, nil
}

// run runs code in the client's session; an isError result fails.
func (h *httpProc) run(ctx context.Context, code string) error {
	return h.runWith(ctx, code)
}

// runWith runs code in the client's session with servers granted.
func (h *httpProc) runWith(ctx context.Context, code string, servers ...string) error {
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_python"
	req.Params.Arguments = map[string]any{"code": code, "session": h.session, "servers": servers}
	res, err := h.c.CallTool(ctx, req)
	if err != nil {
		return fmt.Errorf("bench: run_python over HTTP: %w", err)
	}
	if res.IsError {
		var text string
		if len(res.Content) > 0 {
			t, _ := res.Content[0].(mcp.TextContent)
			text = t.Text
		}
		return fmt.Errorf("bench: run_python over HTTP failed: %s", text)
	}
	return nil
}

// clients starts n clients of principals prefix<from>..prefix<from+n-1>
// and warms each one's session.
func (s *served) clients(ctx context.Context, prefix string, from, n int) ([]*httpProc, error) {
	out := make([]*httpProc, 0, n)
	for i := range n {
		h, err := s.client(ctx, fmt.Sprintf("%s%d", prefix, from+i))
		if err != nil {
			closeAll(out)
			return nil, err
		}
		out = append(out, h)
		if err := h.run(ctx, "print(1)"); err != nil {
			closeAll(out)
			return nil, err
		}
	}
	return out, nil
}

func closeAll(hs []*httpProc) {
	for _, h := range hs {
		_ = h.c.Close()
	}
}

// concurrently runs per calls of print(1) on each client at once and
// returns every call's latency and the wall time.
func concurrently(ctx context.Context, hs []*httpProc, per int) ([]time.Duration, time.Duration, error) {
	var mu sync.Mutex
	var all []time.Duration
	errs := make([]error, len(hs))
	var wg sync.WaitGroup
	start := time.Now()
	for i, h := range hs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := sample(per, func() error { return h.run(ctx, "print(1)") })
			errs[i] = err
			mu.Lock()
			all = append(all, d...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	for _, err := range errs {
		if err != nil {
			return nil, 0, err
		}
	}
	return all, wall, nil
}
