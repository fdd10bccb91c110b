package tests

// The hostile-upstream suite (issue 34, item 5): scripted servers
// (tests/hostileserver, no MCP SDK) send what no well-behaved server would,
// over stdio, streamable HTTP and the legacy SSE transport. For each case the run_python call
// gets its answer within hostileBound (an error that names the server, or
// the right result), the bridge stays up (a good call to the same server
// works after it), and a server configured beside the hostile one keeps
// serving another session while the case runs. Upstreams are host processes,
// so the sandbox runtime does not matter: Taskfile.yml runs this suite on
// local and on rootful podman only, and its test names stay out of SUBSET's
// TestHostile.* (which also runs on rootless podman, docker and kubernetes).

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The bounds of the suite. hostileBound is the "within 15 s" for
// every hostile call, and hostileCellTimeout, the run_python timeout of the
// calls, is above it: a call that waits for the cell's timeout fails the
// bound. hostileCallTimeout is MCP_BRIDGE_CALL_TIMEOUT in the suite's
// bridges, below the bound: a reply the bridge cannot read, which hangs the
// call, shows as the call timeout's message (which only the cases without
// a reply accept) within the bound. It leaves the floods room: 20,000
// notifications take the race-built bridge 2-5 s when the three suites
// share two cores.
const (
	hostileCallTimeout = 10 * time.Second
	hostileBound       = 15 * time.Second
	hostileCellTimeout = 20
)

// hostileCase is one misbehaviour and what the bridge must make of it.
// Each case calls a server of its own (foe_<server>, a hostile server in
// mode), so that a connection one case leaves broken fails that case's
// follow-up and not the next case.
type hostileCase struct {
	name   string
	server string // the configured server's name, after "foe_"
	mode   string // hostileserver's --mode; "" serves normally
	tool   string
	args   string // the call's keyword arguments, Python
	// viaCallTool calls through runtime.call_tool instead of the proxy: a
	// server that never lists its tools has none.
	viaCallTool bool
	// broken: the server never serves, so the follow-up good call goes to
	// foe_ok instead.
	broken bool
	// notStreamable: the case has no streamable HTTP form (a reply to a
	// request whose HTTP exchange the bridge abandoned has nowhere to
	// arrive; on the legacy SSE transport it comes down the session's
	// stream, as on stdio).
	notStreamable bool
	// settle is how long the case waits after the call before its
	// follow-up, for a reply still due to arrive first.
	settle time.Duration
	// check returns what is wrong with the call's outcome, a line
	// "RESULT <repr>" or "ERROR <exception type> <message>"; "" when right.
	check func(server, got string) string
}

// hostileCases are the cases of issue 34's list, in its order.
func hostileCases() []hostileCase {
	cases := []hostileCase{{name: "ok", server: "ok", tool: "ok", check: upValue("'fine'")}}
	// initialize answered with an error whose Go type holds a slice (a
	// comparison of two such errors panicked the whole bridge), with its
	// data proper, of the wrong types, or a string.
	for _, mode := range []string{"init-32022", "init-32022-junk", "init-32022-text", "init-32042"} {
		code := mode[len("init"):][:6] // -32022, -32042
		cases = append(cases, hostileCase{name: "initialize/" + mode, server: strings.NewReplacer("-", "").Replace(mode), mode: mode,
			tool: "ok", viaCallTool: true, broken: true, check: upError("failed to start", "("+code+")")})
	}
	// Error replies whose code or message has every wrong JSON type, or
	// whose error member is no object, or that hold both error and result
	// (or neither): each answers its request, unreadable as it is.
	for _, tool := range []string{
		"err_code_string", "err_code_float", "err_code_bool", "err_code_null", "err_code_object", "err_code_array",
		"err_code_missing", "err_message_number", "err_message_bool", "err_message_null", "err_message_object",
		"err_message_array", "err_message_missing", "err_empty", "err_null", "err_string", "err_number", "err_array",
		"err_and_result", "no_result_no_error",
	} {
		cases = append(cases, hostileCase{name: "error-shape/" + tool, server: tool, tool: tool, check: upError("sent a reply the bridge cannot read (")})
	}
	late := hostileCallTimeout + time.Second
	cases = append(cases,
		// The reply twice: the first answers the call, the second is
		// dropped (the follow-up call gets its own answer, not "stray").
		hostileCase{name: "ids/duplicate", server: "dup", tool: "dup_id", check: upValue("'fine'")},
		// Replies to ids the bridge never sent (a string, a number, null,
		// an object) before the right one: the right one answers.
		hostileCase{name: "ids/unknown", server: "unknown", tool: "unknown_id", check: upValue("'fine'")},
		// A reply after the call timed out: the call times out, and the
		// late reply, which arrives before the follow-up call, is dropped.
		hostileCase{name: "ids/late", server: "late", tool: "late", args: fmt.Sprintf("after=%g", late.Seconds()), notStreamable: true,
			check: upTimeout("late"), settle: late - hostileCallTimeout + 500*time.Millisecond},
		// Half a reply, then the process exits (stdio) or the response
		// breaks off (HTTP).
		hostileCase{name: "cutoff", server: "cutoff", tool: "cutoff", check: upError()},
		hostileCase{name: "size/40MB-line", server: "big", tool: "big", check: upError("frame limit (MCP_BRIDGE_MAX_FRAME_BYTES)")},
		hostileCase{name: "size/200000-deep", server: "deep", tool: "deep", check: upError("nested deeper than 512 levels")},
		// Invalid UTF-8 in a result string: replaced (U+FFFD) or refused,
		// either way said.
		hostileCase{name: "invalid-utf8", server: "utf8", tool: "bad_utf8", check: upEither(upValueContaining("\ufffd"), upError("UTF-8"))},
		// Junk catalogs: the bad entries are skipped, the good tool works
		// through its proxy (the sandbox's proxy builder survives them).
		hostileCase{name: "catalog/junk-schemas-and-names", server: "junk", mode: "tools-junk", tool: "ok", check: upValue("'fine'")},
		hostileCase{name: "catalog/junk-entries", server: "junkitems", mode: "tools-junk-items", tool: "ok", check: upValue("'fine'")},
		hostileCase{name: "catalog/tools-not-an-array", server: "toolsnotarray", mode: "tools-not-array", tool: "ok", viaCallTool: true, broken: true,
			check: upError("failed to start: its tools/list result is unusable: tools is an object, not an array")},
		hostileCase{name: "flood/20000-notifications", server: "notify", tool: "notify_flood", check: upValue("'flooded 20000'")},
		hostileCase{name: "flood/2000-server-requests", server: "requests", tool: "request_flood", check: upValue("'answered 2000 of 2000'")},
		// No reply ever: the call timeout ends it.
		hostileCase{name: "never", server: "never", tool: "never", check: upTimeout("never")},
	)
	for i := range cases {
		cases[i].server = "foe_" + cases[i].server
	}
	return cases
}

// TestUpstreamHostileStdio runs every case against stdio servers, one
// process per configured server.
func TestUpstreamHostileStdio(t *testing.T) {
	requirePodman(t)
	t.Parallel()
	servers := map[string]any{"good": fake()}
	for _, c := range hostileCases() {
		servers[c.server] = map[string]any{"command": hostileBin, "args": []string{"--mode", c.mode}}
	}
	runHostileUpstream(t, servers, "stdio")
}

// TestUpstreamHostileHTTP runs every case that has a streamable HTTP form
// against streamable HTTP servers.
func TestUpstreamHostileHTTP(t *testing.T) {
	requirePodman(t)
	t.Parallel()
	runHostileUpstream(t, hostileHTTPServers(t, "streamable-http"), "streamable-http")
}

// TestUpstreamHostileSSE runs every case against servers on the legacy SSE
// transport: issue 34 wants it to end each case as streamable HTTP does.
func TestUpstreamHostileSSE(t *testing.T) {
	requirePodman(t)
	t.Parallel()
	runHostileUpstream(t, hostileHTTPServers(t, "sse"), "sse")
}

// hostileHTTPServers is the configuration of the HTTP suites: one hostile
// server process per mode, each case's server its own connection (on
// transport typ) to it, and the good stdio server.
func hostileHTTPServers(t *testing.T, typ string) map[string]any {
	t.Helper()
	servers := map[string]any{"good": fake()}
	urls := map[string]string{}
	for _, c := range hostileCases() {
		if _, ok := urls[c.mode]; !ok {
			urls[c.mode] = hostileHTTP(t, c.mode)
			if typ == "sse" {
				urls[c.mode] = strings.TrimSuffix(urls[c.mode], "/mcp") + "/sse"
			}
		}
		servers[c.server] = map[string]any{"type": typ, "url": urls[c.mode]}
	}
	return servers
}

// hostileHTTP starts a hostile server on HTTP in mode and returns its
// streamable HTTP URL; the test's cleanup stops it.
func hostileHTTP(t *testing.T, mode string) string {
	return httpFixture(t, hostileBin, "--mode", mode)
}

// httpFixture starts a scripted server binary (tests/fixturehttp) on HTTP
// with args and returns the URL it prints; the test's cleanup stops it.
func httpFixture(t *testing.T, bin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--http", "127.0.0.1:0"}, args...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("%s %v: %v", filepath.Base(bin), args, err)
	}
	return strings.TrimSpace(line)
}

// runHostileUpstream runs the cases against one bridge configured with
// servers: a case's server misbehaving must not cost the other cases
// anything, which sharing the bridge (and its sessions) proves.
func runHostileUpstream(t *testing.T, servers map[string]any, transport string) {
	b := startBridge(t, withServers(t, servers, map[string]string{
		"MCP_BRIDGE_CALL_TIMEOUT":  strconv.Itoa(int(hostileCallTimeout / time.Second)),
		"MCP_BRIDGE_START_TIMEOUT": "10",
		// The floods would fill a debug log line by line.
		"MCP_BRIDGE_LOG_LEVEL": "info",
	}))
	// Warm: both sessions' sandboxes and the two servers the follow-ups
	// use are up, so each case's time is its own.
	if got := b.mustRun("(await mcp_foe_ok.ok(), await mcp_good.add(1, 2))", map[string]any{"servers": []string{"foe_ok", "good"}, "session": "foe"}); got != "('fine', {'sum': 3})" {
		t.Fatalf("warm-up: %s", got)
	}
	b.mustRun("1", map[string]any{"session": "bystander"})
	for _, c := range hostileCases() {
		if transport == "streamable-http" && c.notStreamable {
			continue
		}
		if transport == "sse" && c.tool == "request_flood" {
			// mcp-go's SSE client answers no server→client request
			// (docs/DECISIONS.md): the call still gets its answer.
			c.check = upValue("'answered 0 of 2000'")
		}
		t.Run(c.name, func(t *testing.T) { hostileRun(t, b, c) })
	}
	if logs := b.stderr.String(); strings.Contains(logs, "\npanic: ") || strings.Contains(logs, "fatal error: ") {
		t.Errorf("the bridge panicked:\n%s", tail(logs, 4000))
	}
}

// hostileRun runs case c: the hostile call in session "foe", a call of
// the good server in session "bystander" meanwhile, then a good call to
// the case's server (foe_ok when it never serves) in session "foe".
func hostileRun(t *testing.T, b *bridge, c hostileCase) {
	var (
		wg        sync.WaitGroup
		bystander string
		byErr     error
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		bystander, byErr = b.callAsync(map[string]any{"code": "await mcp_good.add(1, 2)", "servers": []string{"good"}, "session": "bystander", "timeout": hostileCellTimeout})
	}()
	call := "mcp_" + c.server + "." + c.tool + "(" + c.args + ")"
	if c.viaCallTool {
		call = "runtime.call_tool('" + c.server + "', '" + c.tool + "', dict(" + c.args + "))"
	}
	start := time.Now()
	r, err := b.callArgsWithin(2*hostileCellTimeout*time.Second, map[string]any{
		"code": hostileCode(call), "servers": []string{c.server}, "session": "foe", "timeout": hostileCellTimeout,
	})
	elapsed := time.Since(start)
	wg.Wait()
	if err != nil {
		t.Fatalf("run_python: %v (the bridge is gone?)\nstderr:\n%s", err, tail(b.stderr.String(), 3000))
	}
	got := outcome(text(t, r))
	t.Logf("%v: %s", elapsed.Round(10*time.Millisecond), got)
	if elapsed > hostileBound {
		t.Errorf("answered after %v, want within %v", elapsed.Round(time.Millisecond), hostileBound)
	}
	if strings.Contains(got, "Execution timed out") || strings.HasPrefix(got, "status: timeout") {
		t.Errorf("the cell timed out: %s", got)
	}
	if what := c.check(c.server, got); what != "" {
		t.Errorf("%s\n got: %s", what, got)
	}
	if byErr != nil || bystander != "{'sum': 3}" {
		t.Errorf("bystander session, server good: %q, %v; want {'sum': 3}", bystander, byErr)
	}
	time.Sleep(c.settle)
	next := c.server
	if c.broken {
		next = "foe_ok"
	}
	if got, err := b.callAsync(map[string]any{"code": "await mcp_" + next + ".ok()", "servers": []string{next}, "session": "foe", "timeout": hostileCellTimeout}); err != nil || got != "'fine'" {
		t.Errorf("follow-up good call to %s: %q, %v; want 'fine'", next, got, err)
	}
}

// hostileCode awaits call and prints its outcome as one line: RESULT and
// the value's repr, or ERROR, the exception's type and message (long ones
// cut, so that a 40 MB result stays readable).
func hostileCode(call string) string {
	return `def _short(s):
    return s if len(s) <= 400 else f'{s[:300]}... ({len(s)} chars)'
try:
    _r = await ` + call + `
    print('RESULT', _short(repr(_r)))
except Exception as e:
    print('ERROR', type(e).__name__, _short(str(e)))`
}

// outcome is the RESULT or ERROR line of text, or all of text when it has
// none (the cell failed on its own: that text says how).
func outcome(text string) string {
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "RESULT ") || strings.HasPrefix(line, "ERROR ") {
			return line
		}
	}
	return text
}

// upValue wants the call to return a value whose repr is want.
func upValue(want string) func(server, got string) string {
	return func(_, got string) string {
		if got != "RESULT "+want {
			return "want RESULT " + want
		}
		return ""
	}
}

// upValueContaining wants a value whose repr contains sub.
func upValueContaining(sub string) func(server, got string) string {
	return func(_, got string) string {
		if !strings.HasPrefix(got, "RESULT ") || !strings.Contains(got, sub) {
			return fmt.Sprintf("want a RESULT containing %q", sub)
		}
		return ""
	}
}

// upError wants MCPError naming the server, as a reply the bridge read
// (not a timeout, which is what a reply it could not read ran into), its
// message containing each of also.
func upError(also ...string) func(server, got string) string {
	return func(server, got string) string {
		switch {
		case !strings.HasPrefix(got, "ERROR MCPError "):
			return "want ERROR MCPError"
		case !namesServer(got, server):
			return fmt.Sprintf("want the error to name server %q", server)
		case strings.Contains(got, "timed out") || strings.Contains(got, "did not answer"):
			return "want the reply's own error, not a timeout"
		}
		for _, s := range also {
			if !strings.Contains(got, s) {
				return fmt.Sprintf("want the error to contain %q", s)
			}
		}
		return ""
	}
}

// upTimeout wants the bridge's call timeout (TMO-4) for server's tool.
func upTimeout(tool string) func(server, got string) string {
	return func(server, got string) string {
		want := fmt.Sprintf("Tool call %s.%s timed out after %ds (MCP_BRIDGE_CALL_TIMEOUT)", server, tool, int(hostileCallTimeout/time.Second))
		if !strings.HasPrefix(got, "ERROR MCPError ") || !strings.Contains(got, want) {
			return "want ERROR MCPError " + want
		}
		return ""
	}
}

// upEither accepts what either check accepts.
func upEither(a, b func(server, got string) string) func(server, got string) string {
	return func(server, got string) string {
		wa := a(server, got)
		if wa == "" {
			return ""
		}
		if wb := b(server, got); wb != "" {
			return wa + ", or " + wb
		}
		return ""
	}
}

// namesServer reports whether msg names server as a whole word ("foe" is
// not named by "foe_junk").
func namesServer(msg, server string) bool {
	return regexp.MustCompile(`(^|[^A-Za-z0-9_])` + regexp.QuoteMeta(server) + `([^A-Za-z0-9_]|$)`).MatchString(msg)
}
