package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// served is a running `bridge serve` process.
type served struct {
	t      *testing.T
	cmd    *exec.Cmd
	stderr *syncBuffer
	base   string // http://127.0.0.1:PORT
	exited chan struct{}
	err    error // Wait's, once exited is closed
	// auditEnv, when the test set them, names the state dir and key file
	// (MCP_BRIDGE_STATE_DIR, MCP_BRIDGE_KEY_FILE) for bridge audit.
	auditEnv map[string]string
}

var servingURL = regexp.MustCompile(`"url":"(https?://127\.0\.0\.1:[0-9]+)/mcp"`)

// startServe starts `bridge serve --listen 127.0.0.1:0 args...` and waits
// for it to listen.
func startServe(t *testing.T, extra map[string]string, args ...string) *served {
	t.Helper()
	requirePodman(t)
	if extra == nil {
		extra = map[string]string{}
	}
	if _, ok := extra["MCP_BRIDGE_LOG_LEVEL"]; !ok {
		extra["MCP_BRIDGE_LOG_LEVEL"] = "info"
	}
	s := &served{t: t, stderr: &syncBuffer{}, exited: make(chan struct{})}
	s.cmd = exec.Command(bridgeBin, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	s.cmd.Env = append(baseEnv(t, extra), "MCP_BRIDGE_LOG_FORMAT=json")
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start bridge serve: %v", err)
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.exited)
	}()
	t.Cleanup(s.stop)
	deadline := time.Now().Add(30 * time.Second)
	for s.base == "" {
		if m := servingURL.FindStringSubmatch(s.stderr.String()); m != nil {
			s.base = m[1]
			break
		}
		select {
		case <-s.exited:
			t.Fatalf("bridge serve exited: %v\n%s", s.err, tail(s.stderr.String(), 4000))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("bridge serve did not listen within 30s:\n%s", tail(s.stderr.String(), 4000))
		}
	}
	return s
}

// stop sends SIGTERM, waits for the exit and checks that no container of
// the bridge is left.
func (s *served) stop() {
	if s.cmd.Process == nil {
		return
	}
	select {
	case <-s.exited:
	default:
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(60 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.exited
			s.t.Errorf("bridge serve did not exit within 60s of SIGTERM")
		}
	}
	if testRuntime() != "local" {
		assertNoContainers(s.t, s.cmd.Process.Pid)
	}
	if s.t.Failed() {
		s.t.Logf("bridge serve stderr:\n%s", tail(s.stderr.String(), 8000))
	}
}

// writeTokens writes a tokens file (0600) and returns its path.
func writeTokens(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// httpClient is an initialized mcp-go streamable HTTP client of s with
// token ("" sends none).
func (s *served) client(token string) (*client.Client, error) {
	return s.clientVersion(token, "2025-11-25")
}

// clientVersion is client asking for protocol version ("" lets mcp-go
// try the stateless 2026-07-28 revision first), with copts (e.g. an
// elicitation handler).
func (s *served) clientVersion(token, version string, copts ...client.ClientOption) (*client.Client, error) {
	var opts []transport.StreamableHTTPCOption
	if token != "" {
		opts = append(opts, transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + token}))
	}
	tr, err := transport.NewStreamableHTTP(s.base+"/mcp", opts...)
	if err != nil {
		return nil, err
	}
	c := client.NewClient(tr, copts...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = version
	req.Params.ClientInfo = mcp.Implementation{Name: "bridge-e2e-http", Version: "1"}
	if _, err := c.Initialize(ctx, req); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (s *served) mustClient(token string) *client.Client {
	s.t.Helper()
	c, err := s.client(token)
	if err != nil {
		s.t.Fatalf("client: %v\n%s", err, tail(s.stderr.String(), 4000))
	}
	s.t.Cleanup(func() { c.Close() })
	return c
}

// callHTTP runs run_python with args on c.
func callHTTP(t *testing.T, c *client.Client, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_python"
	req.Params.Arguments = args
	res, err := c.CallTool(ctx, req)
	if err != nil {
		t.Fatalf("tools/call: %v", err)
	}
	return res
}

// raw sends one HTTP request to s and returns the status, headers and body.
func (s *served) raw(method, path, body string, headers map[string]string) (int, http.Header, string) {
	s.t.Helper()
	req, err := http.NewRequest(method, s.base+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	for k, v := range headers {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := (&http.Client{Timeout: 60 * time.Second}).Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, resp.Header, string(b)
}

func bearerHeader(tok string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + tok}
}

func withHeader(h map[string]string, k, v string) map[string]string {
	out := map[string]string{k: v}
	for kk, vv := range h {
		out[kk] = vv
	}
	return out
}

const initializeBody = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func fmtCall(id int, code string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"run_python","arguments":{"code":%q}}}`, id, code)
}

const syscallSIGTERM = syscall.SIGTERM
