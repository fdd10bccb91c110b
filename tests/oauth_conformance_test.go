package tests

// The official MCP conformance suite's client auth scenarios, run with the
// bridge as the client: each scenario starts a protected MCP server and an
// authorization server that approves at once, and runs the adapter below
// with the server URL. The adapter maps it to `bridge auth login` and
// `bridge exec` calling the server's tool, in a fresh state dir per
// scenario (the suite runs them in parallel), with a $BROWSER that follows
// the redirects like a user who clicks "allow".

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// The test binary doubles as the adapter and the browser, so a prebuilt
// test binary (BRIDGE_TEST_BIN_DIR) needs nothing else.
func init() {
	switch {
	case os.Getenv("BRIDGE_OAUTH_BROWSER") == "1" && len(os.Args) > 1:
		os.Exit(fakeBrowser(os.Args[len(os.Args)-1]))
	case os.Getenv("BRIDGE_OAUTH_ADAPTER") == "1" && len(os.Args) > 1:
		os.Exit(conformanceAdapter(os.Args[len(os.Args)-1]))
	}
}

// fakeBrowser opens url and follows its redirects to the bridge's loopback
// callback.
func fakeBrowser(url string) int {
	c := &http.Client{Timeout: 20 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		fmt.Fprintln(os.Stderr, "browser:", err)
		return 1
	}
	resp.Body.Close()
	return 0
}

// conformanceAdapter is one scenario's client: configure the server,
// sign in, call its tool.
func conformanceAdapter(url string) int {
	bridge := os.Getenv("BRIDGE_OAUTH_BRIDGE")
	dir, err := os.MkdirTemp("", "bridge-oauth-conf-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	var cctx struct {
		ClientID     string `json:"client_id"`
		ClientSecret string `json:"client_secret"`
	}
	_ = json.Unmarshal([]byte(os.Getenv("MCP_CONFORMANCE_CONTEXT")), &cctx)
	// Every scenario gets the CIMD URL the suite expects: the bridge uses it
	// only where the authorization server supports such documents, so the
	// other scenarios prove the fallback to dynamic registration.
	oauthCfg := map[string]any{"clientMetadataUrl": "https://conformance-test.local/client-metadata.json"}
	if cctx.ClientID != "" {
		oauthCfg["clientId"], oauthCfg["clientSecret"] = cctx.ClientID, cctx.ClientSecret
	}
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"conf": map[string]any{"type": "http", "url": url, "oauth": oauthCfg}}})
	if err := os.MkdirAll(filepath.Join(dir, "MCPs"), 0o700); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := os.WriteFile(filepath.Join(dir, "MCPs", "servers.json"), cfg, 0o600); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	self, _ := os.Executable()
	env := []string{"HOME=" + dir, "MCP_BRIDGE_CONFIG_DIR=" + filepath.Join(dir, "MCPs"), "MCP_BRIDGE_STATE_DIR=" + filepath.Join(dir, "state"),
		"BROWSER=" + self, "BRIDGE_OAUTH_BROWSER=1"}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch k {
		case "HOME", "MCP_BRIDGE_CONFIG_DIR", "MCP_BRIDGE_STATE_DIR", "BROWSER", "BRIDGE_OAUTH_ADAPTER", "BRIDGE_OAUTH_BROWSER", "BRIDGE_OAUTH_SKIP_LOGIN", "BRIDGE_OAUTH_VIA", "BRIDGE_OAUTH_NO_URL", "BRIDGE_OAUTH_PROXY":
		default:
			env = append(env, kv)
		}
	}
	// Every line the bridge prints goes to the log dir too, at debug
	// level, where the test looks for leaked tokens.
	env = append(env, "MCP_BRIDGE_LOG_LEVEL=debug")
	logf, err := os.CreateTemp(os.Getenv("BRIDGE_OAUTH_LOGDIR"), "scenario-*.log")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer logf.Close()
	run := func(args ...string) int {
		cmd := exec.Command(bridge, args...)
		cmd.Env = env
		cmd.Stdout, cmd.Stderr = io.MultiWriter(os.Stdout, logf), io.MultiWriter(os.Stderr, logf)
		if err := cmd.Run(); err != nil {
			fmt.Fprintf(os.Stderr, "adapter: bridge %s: %v\n", args[0], err)
			return 1
		}
		return 0
	}
	if os.Getenv("BRIDGE_OAUTH_SKIP_LOGIN") != "1" {
		if code := run("auth", "login", "conf", "--timeout", "60s"); code != 0 {
			return code
		}
	}
	if os.Getenv("BRIDGE_OAUTH_VIA") == "run" {
		return viaRun(bridge, env, logf)
	}
	if code := run("exec", "--servers", "conf", "--timeout", "90",
		`print(await runtime.call_tool("conf", "test-tool", {}))`); code != 0 {
		return code
	}
	// Doctor asks the server with the stored token; the test reads its
	// verdict from the log.
	run("doctor", "--server", "conf")
	return 0
}

// viaRun calls the tool through `bridge run` with an MCP client that
// declares URL-mode elicitation and, asked to open a link, opens it like
// a browser; $BROWSER is unset, so any sign-in must come through the client.
func viaRun(bridge string, env []string, logf io.Writer) int {
	var runEnv []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "BROWSER=") {
			runEnv = append(runEnv, kv)
		}
	}
	tr := transport.NewStdioWithOptions(bridge, runEnv, []string{"run"})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := tr.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "adapter: start bridge run:", err)
		return 1
	}
	stderrDone := make(chan struct{})
	go func() {
		defer close(stderrDone)
		_, _ = io.Copy(io.MultiWriter(os.Stderr, logf), tr.Stderr())
	}()
	asked := 0
	elicit := &mcp.ElicitationCapability{Form: &struct{}{}, URL: &struct{}{}}
	if os.Getenv("BRIDGE_OAUTH_NO_URL") == "1" { // a client that cannot open links
		elicit.URL = nil
	}
	c := client.NewClient(tr, client.WithElicitationHandler(linkOpener{&asked}),
		client.WithClientCapabilities(mcp.ClientCapabilities{Elicitation: elicit}))
	defer func() {
		c.Close()
		<-stderrDone
	}()
	if err := c.Start(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "adapter: client:", err)
		return 1
	}
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = "2025-11-25"
	init.Params.ClientInfo = mcp.Implementation{Name: "oauth-adapter", Version: "1"}
	if _, err := c.Initialize(ctx, init); err != nil {
		fmt.Fprintln(os.Stderr, "adapter: initialize:", err)
		return 1
	}
	req := mcp.CallToolRequest{}
	req.Params.Name = "run_python"
	code, want := `print(await runtime.call_tool("conf", "test-tool", {}))`, "'text': 'test'"
	if os.Getenv("BRIDGE_OAUTH_PROXY") == "1" { // the tool's proxy, by its alias, before any catalog exists
		code, want = `print(repr(await mcp_conf.test_tool()))`, "'test'"
	}
	req.Params.Arguments = map[string]any{"code": code, "servers": []string{"conf"}, "timeout": 90}
	res, err := c.CallTool(ctx, req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "adapter: run_python:", err)
		return 1
	}
	text := ""
	for _, ct := range res.Content {
		if tc, ok := ct.(mcp.TextContent); ok {
			text += tc.Text
		}
	}
	fmt.Fprintf(io.MultiWriter(os.Stdout, logf), "run_python (sign-in links opened: %d):\n%s\n", asked, text)
	if res.IsError || !strings.Contains(text, want) {
		return 1
	}
	return 0
}

// linkOpener is the adapter's MCP client user: it opens URL-mode links
// (following redirects, like a browser whose user clicks "allow") and
// declines forms.
type linkOpener struct{ asked *int }

func (l linkOpener) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	if req.Params.Mode != mcp.ElicitationModeURL {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}, nil
	}
	*l.asked++
	go fakeBrowser(req.Params.URL) // the answer comes before the browser is done, as with a person
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept}}, nil
}

// conformanceBin is the pinned conformance suite; a missing suite fails
// the test, never skips it.
func conformanceBin(t *testing.T) (bin, self string) {
	t.Helper()
	bin = os.Getenv("BRIDGE_TEST_CONFORMANCE")
	if bin == "" {
		home, _ := os.UserHomeDir()
		bin = filepath.Join(home, ".cache", "bridge-conformance", "bin", "conformance")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("the MCP conformance suite is missing (%v): run `go tool task setup:conformance`, or set BRIDGE_TEST_CONFORMANCE", err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return bin, self
}

// TestOAuthExecSignsInInline: without a prior `bridge auth login`, `bridge
// exec` signs in when the server first challenges it (401), and again when
// tools/call wants more scope (403), through $BROWSER, then the call runs.
// One scenario at a time, so the client's exit code counts too.
func TestOAuthExecSignsInInline(t *testing.T) {
	bin, self := conformanceBin(t)
	for _, scenario := range []string{"auth/metadata-default", "auth/scope-step-up"} {
		cmd := exec.Command(bin, "client", "--scenario", scenario, "--timeout", "120000", "--command", self)
		cmd.Env = append(baseEnv(t, map[string]string{"MCP_BRIDGE_LOG_LEVEL": "warn"}), "BRIDGE_OAUTH_ADAPTER=1", "BRIDGE_OAUTH_SKIP_LOGIN=1",
			"BRIDGE_OAUTH_BRIDGE="+bridgeBin, "BRIDGE_OAUTH_LOGDIR="+t.TempDir())
		b, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(b), "OVERALL: PASSED") {
			t.Errorf("%s with exec alone: %v\n%s", scenario, err, b)
		}
	}
}

// TestOAuthRunSignsInThroughClient: under `bridge run`, a tools/call that
// the server refuses for scope (403 insufficient_scope) sends the sign-in
// link to the MCP client as a URL-mode elicitation, and the call goes
// through once the person opened it.
func TestOAuthRunSignsInThroughClient(t *testing.T) {
	bin, self := conformanceBin(t)
	cmd := exec.Command(bin, "client", "--scenario", "auth/scope-step-up", "--timeout", "120000", "--command", self)
	logDir := t.TempDir()
	cmd.Env = append(baseEnv(t, map[string]string{"MCP_BRIDGE_LOG_LEVEL": "warn"}), "BRIDGE_OAUTH_ADAPTER=1", "BRIDGE_OAUTH_VIA=run",
		"BRIDGE_OAUTH_BRIDGE="+bridgeBin, "BRIDGE_OAUTH_LOGDIR="+logDir)
	b, err := cmd.CombinedOutput()
	logs, _ := filepath.Glob(filepath.Join(logDir, "scenario-*.log"))
	var log []byte
	if len(logs) == 1 {
		log, _ = os.ReadFile(logs[0])
	}
	// Login took the first scope; the step-up's link went to the client.
	if err != nil || !strings.Contains(string(b), "OVERALL: PASSED") || !strings.Contains(string(log), "sign-in links opened: 1") {
		t.Errorf("auth/scope-step-up through bridge run: %v\n%s\nadapter log:\n%s", err, b, log)
	}
}

// TestOAuthRunFirstSignInThroughClient: with no `bridge auth login`, the
// server's start (in the background, where no one can be asked) fails for
// sign-in; the first run_python call that uses it signs in through its MCP
// client's URL-mode elicitation, starts it again and gets the tool call
// through (auth/scope-step-up then asks once more, for the step-up). A
// client without URL-mode elicitation still fails at once naming `bridge
// auth login`.
func TestOAuthRunFirstSignInThroughClient(t *testing.T) {
	bin, self := conformanceBin(t)
	for _, tc := range []struct {
		scenario, noURL, proxy string
		pass                   bool
		want                   string
	}{
		{"auth/metadata-default", "", "", true, "sign-in links opened: 1"},
		{"auth/metadata-default", "", "1", true, "sign-in links opened: 1"},
		{"auth/scope-step-up", "", "", true, "sign-in links opened: 2"},
		{"auth/metadata-default", "1", "", false, "MCPError: Server 'conf' needs sign-in: run: bridge auth login conf"},
		{"auth/metadata-default", "1", "1", false, "MCPError: Server 'conf' needs sign-in: run: bridge auth login conf"},
	} {
		cmd := exec.Command(bin, "client", "--scenario", tc.scenario, "--timeout", "120000", "--command", self)
		logDir := t.TempDir()
		cmd.Env = append(baseEnv(t, map[string]string{"MCP_BRIDGE_LOG_LEVEL": "warn"}), "BRIDGE_OAUTH_ADAPTER=1", "BRIDGE_OAUTH_VIA=run",
			"BRIDGE_OAUTH_SKIP_LOGIN=1", "BRIDGE_OAUTH_NO_URL="+tc.noURL, "BRIDGE_OAUTH_PROXY="+tc.proxy, "BRIDGE_OAUTH_BRIDGE="+bridgeBin, "BRIDGE_OAUTH_LOGDIR="+logDir)
		b, err := cmd.CombinedOutput()
		logs, _ := filepath.Glob(filepath.Join(logDir, "scenario-*.log"))
		var log []byte
		if len(logs) == 1 {
			log, _ = os.ReadFile(logs[0])
		}
		passed := err == nil && strings.Contains(string(b), "OVERALL: PASSED")
		if passed != tc.pass || !strings.Contains(string(log), tc.want) {
			t.Errorf("%s through bridge run (no URL elicitation %q, proxy %q): passed %v, want %v and %q in the adapter log: %v\n%s\nadapter log:\n%s",
				tc.scenario, tc.noURL, tc.proxy, passed, tc.pass, tc.want, err, b, log)
		}
	}
}

func TestOAuthConformanceSuite(t *testing.T) {
	bin, self := conformanceBin(t)
	out, logDir := t.TempDir(), t.TempDir()
	cmd := exec.Command(bin, "client", "--suite", "auth", "--verbose", "--timeout", "240000", "-o", out, "--command", self)
	cmd.Env = append(baseEnv(t, map[string]string{"MCP_BRIDGE_LOG_LEVEL": "warn"}), "BRIDGE_OAUTH_ADAPTER=1", "BRIDGE_OAUTH_BRIDGE="+bridgeBin,
		"BRIDGE_OAUTH_LOGDIR="+logDir)
	b, err := cmd.CombinedOutput()
	summary := string(b)
	if i := strings.LastIndex(summary, "=== SUMMARY ==="); i >= 0 {
		summary = summary[i:]
	}
	t.Logf("conformance client --suite auth:\n%s", summary)
	if err != nil {
		t.Fatalf("conformance client --suite auth failed: %v\n%s", err, b)
	}
	// The suite's tokens start with test-token: none may reach a log line,
	// an error text or a result.
	logs, _ := filepath.Glob(filepath.Join(logDir, "scenario-*.log"))
	if len(logs) < 14 {
		t.Fatalf("%d scenario logs, want one per scenario (14)", len(logs))
	}
	signedIn := 0
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		if strings.Contains(string(data), "test-token") {
			t.Errorf("%s shows an access token:\n%s", filepath.Base(l), data)
		}
		if strings.Contains(string(data), "OK   auth conf: signed in until ") {
			signedIn++
		}
	}
	// Every scenario but auth/scope-retry-limit (whose server never
	// accepts a token) ends signed in, as doctor reports it.
	if signedIn != len(logs)-1 {
		t.Errorf("doctor reported %q in %d of %d scenario logs, want all but one", "auth conf: signed in until", signedIn, len(logs))
	}
}
