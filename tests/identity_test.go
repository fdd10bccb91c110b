package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
)

// More principals: carol never opens her link in time, dave's client
// speaks 2026-07-28, erin's cannot open links.
const (
	carolToken = "tok-carol-0c55e1a9"
	daveToken  = "tok-dave-9a2b7c41"
	erinToken  = "tok-erin-5e03d8f2"
)

// signer is a principal's MCP client user with a browser signed in at the
// upstream as user: asked to open a sign-in link, it accepts, and (unless
// hold is set) opens the link a moment later, as a person would. Every
// link and the callback URL the browser reached are kept.
type signer struct {
	up   *identityUpstream
	user string

	mu        sync.Mutex
	hold      bool
	links     []string
	callbacks []string // the bridge callback URLs the browser was sent to
	pages     []string // "status body" of each callback page
	opened    sync.WaitGroup
}

func (s *signer) elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	if req.Params.Mode != mcp.ElicitationModeURL {
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}, nil
	}
	s.mu.Lock()
	s.links = append(s.links, req.Params.URL)
	hold := s.hold
	s.mu.Unlock()
	if !hold {
		s.opened.Add(1)
		go func() {
			defer s.opened.Done()
			s.open(req.Params.URL)
		}()
	}
	return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionAccept}}, nil
}

// open plays the browser: the authorization server approves for s.user
// and redirects to the bridge's callback, which the browser then loads.
func (s *signer) open(link string) {
	noFollow := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest(http.MethodGet, link, nil)
	req.Header.Set("X-Test-User", s.user)
	resp, err := noFollow.Do(req)
	if err != nil {
		s.page(fmt.Sprintf("authorize: %v", err))
		return
	}
	resp.Body.Close()
	cb := resp.Header.Get("Location")
	s.mu.Lock()
	s.callbacks = append(s.callbacks, cb)
	s.mu.Unlock()
	s.page(get(cb))
}

func (s *signer) page(p string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pages = append(s.pages, p)
}

func (s *signer) snapshot() (links, callbacks, pages []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.links...), append([]string(nil), s.callbacks...), append([]string(nil), s.pages...)
}

// get loads url as a browser would and returns "status body".
func get(url string) string {
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	return fmt.Sprintf("%d %s", resp.StatusCode, b)
}

// urlClient is an MCP client of s for token that declares URL-mode
// elicitation and answers it through sg.
func urlClient(t *testing.T, s *served, token string, sg *signer) *client.Client {
	t.Helper()
	c, err := s.clientVersion(token, "2025-11-25", client.WithElicitationHandler(elicitFunc(sg.elicit)),
		client.WithClientCapabilities(mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{Form: &struct{}{}, URL: &struct{}{}}}))
	if err != nil {
		t.Fatalf("client: %v\n%s", err, tail(s.stderr.String(), 4000))
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type elicitFunc func(context.Context, mcp.ElicitationRequest) (*mcp.ElicitationResult, error)

func (f elicitFunc) Elicit(ctx context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	return f(ctx, req)
}

// TestIdentityPrincipal: under serve, two principals each sign in once to
// an upstream with "identity": "principal", through their own MCP client,
// and the upstream sees each one's calls as that one; a sign-out forgets
// only that pair; the callback refuses a replay, a forged state and a link
// past its expiry; no token reaches a log line, the sandbox or a file in
// plain text.
func TestIdentityPrincipal(t *testing.T) {
	up := newIdentityUpstream(t)
	home := t.TempDir()
	state, keyFile := filepath.Join(home, "state"), filepath.Join(home, "key")
	env := withServers(t, map[string]any{"gh": map[string]any{"type": "http", "url": up.URL, "identity": "principal"}}, map[string]string{
		"MCP_BRIDGE_TOKENS_FILE": writeTokens(t, "alice "+aliceToken, "bob "+bobToken, "carol "+carolToken,
			"dave "+daveToken, "erin "+erinToken),
		"MCP_BRIDGE_STATE_DIR": state, "MCP_BRIDGE_KEY_FILE": keyFile,
		"MCP_BRIDGE_APPROVAL_TIMEOUT": "8",
	})
	s := startServe(t, env)
	aliceUser, bobUser := &signer{up: up, user: "alice"}, &signer{up: up, user: "bob"}
	alice, bob := urlClient(t, s, aliceToken, aliceUser), urlClient(t, s, bobToken, bobUser)
	whoami := map[string]any{"code": "print(await mcp_gh.whoami())", "servers": []string{"gh"}}

	// The first call signs in and goes on; its note says so rather than
	// that the tools raise.
	if got := text(t, callHTTP(t, alice, whoami)); !strings.Contains(got, "user=alice") || strings.Contains(got, "raise") ||
		!strings.Contains(got, "server 'gh' is not signed in yet: its first use asks you to sign in") {
		t.Fatalf("alice's first call: %s", got)
	}
	if got := text(t, callHTTP(t, bob, whoami)); !strings.Contains(got, "user=bob") {
		t.Fatalf("bob's first call: %s", got)
	}
	aliceUser.opened.Wait()
	bobUser.opened.Wait()
	links, callbacks, pages := aliceUser.snapshot()
	if len(links) != 1 || len(pages) != 1 || !strings.HasPrefix(pages[0], "200 ") || !strings.Contains(pages[0], "Signed in to gh for bridge principal alice. The tokens are the account gh names alice") {
		t.Fatalf("alice's sign-in: links %q, pages %q", links, pages)
	}
	if !strings.HasPrefix(callbacks[0], s.base+"/oauth/callback?") {
		t.Errorf("the browser came back to %q, want the bridge's own callback", callbacks[0])
	}
	// A second call asks nothing, and both keep acting as themselves, also
	// when their calls run at once.
	var wg sync.WaitGroup
	got := make([]string, 4)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := alice
			if i%2 == 1 {
				c = bob
			}
			got[i] = text(t, callHTTP(t, c, whoami))
		}()
	}
	wg.Wait()
	for i, g := range got {
		want := []string{"user=alice", "user=bob"}[i%2]
		if !strings.Contains(g, want) {
			t.Errorf("concurrent call %d: %s, want %s", i, g, want)
		}
	}
	if a, b := len(firstOf(aliceUser.snapshot())), len(firstOf(bobUser.snapshot())); a != 1 || b != 1 {
		t.Errorf("sign-in links: alice %d, bob %d; want one each", a, b)
	}
	if a, b := up.Authorizations("alice"), up.Authorizations("bob"); a != 1 || b != 1 {
		t.Errorf("authorizations at the upstream: alice %d, bob %d; want 1 each", a, b)
	}
	seen := up.Seen()
	if n := strings.Count(strings.Join(seen, " "), "alice"); n != 3 {
		t.Errorf("the upstream saw alice %d times, want 3: %q", n, seen)
	}

	// The callback's refusals: alice's link again, a forged state.
	if p := get(callbacks[0]); !strings.HasPrefix(p, "400 ") || !strings.Contains(p, "already used") {
		t.Errorf("replayed callback: %s", p)
	}
	if p := get(s.base + "/oauth/callback?code=x&state=forged"); !strings.HasPrefix(p, "400 ") || !strings.Contains(p, "started no sign-in") {
		t.Errorf("forged state: %s", p)
	}

	// Each sees their own sign-ins only; no token reaches the sandbox.
	res := text(t, callHTTP(t, alice, map[string]any{"code": "print(runtime.signins())"}))
	if !strings.Contains(res, "'server': 'gh'") || !strings.Contains(res, "'account': 'alice'") || !strings.Contains(res, "signed in") || strings.Contains(res, "token") {
		t.Errorf("alice's signins(): %s", res)
	}
	// bob signs out: his next call asks again, alice's does not.
	if res := text(t, callHTTP(t, bob, map[string]any{"code": "print(runtime.signout('gh'))", "servers": []string{"gh"}})); !strings.Contains(res, "True") {
		t.Errorf("bob's signout: %s", res)
	}
	if got := text(t, callHTTP(t, bob, whoami)); !strings.Contains(got, "user=bob") {
		t.Errorf("bob after signing out: %s", got)
	}
	if got := text(t, callHTTP(t, alice, whoami)); !strings.Contains(got, "user=alice") {
		t.Errorf("alice after bob signed out: %s", got)
	}
	bobUser.opened.Wait()
	if a, b := len(firstOf(aliceUser.snapshot())), len(firstOf(bobUser.snapshot())); a != 1 || b != 2 {
		t.Errorf("sign-in links after bob's sign-out: alice %d, bob %d; want 1 and 2", a, b)
	}

	// A step-up (403 insufficient_scope) asks the principal who met it, and
	// only them.
	if got := text(t, callHTTP(t, alice, map[string]any{"code": "print(await mcp_gh.write_note())", "servers": []string{"gh"}})); !strings.Contains(got, "note written by alice") {
		t.Errorf("alice's step-up: %s", got)
	}
	aliceUser.opened.Wait()
	if a, b := len(firstOf(aliceUser.snapshot())), len(firstOf(bobUser.snapshot())); a != 2 || b != 2 {
		t.Errorf("sign-in links after alice's step-up: alice %d, bob %d; want 2 and 2", a, b)
	}
	if got := text(t, callHTTP(t, bob, whoami)); !strings.Contains(got, "user=bob") {
		t.Errorf("bob after alice's step-up: %s", got)
	}

	// A link opened after MCP_BRIDGE_APPROVAL_TIMEOUT: the call fails
	// naming the setting, and the late callback is refused.
	carolUser := &signer{up: up, user: "carol", hold: true}
	carol := urlClient(t, s, carolToken, carolUser)
	if got := text(t, callHTTP(t, carol, whoami)); !strings.Contains(got, "MCP_BRIDGE_APPROVAL_TIMEOUT") {
		t.Errorf("carol's call with the link left unopened: %s", got)
	}
	links, _, _ = carolUser.snapshot()
	if len(links) == 0 {
		t.Fatal("carol got no sign-in link")
	}
	carolUser.open(links[0])
	if _, _, pages := carolUser.snapshot(); len(pages) != 1 || !strings.HasPrefix(pages[0], "400 ") || !strings.Contains(pages[0], "expired") {
		t.Errorf("carol's late callback: %q", pages)
	}
	if n := up.Authorizations("carol"); n != 1 {
		t.Errorf("carol's authorizations = %d, want 1 (the late code is never exchanged)", n)
	}

	// A 2026-07-28 client gets the link through input_required.
	daveUser := &signer{up: up, user: "dave"}
	dc, err := s.clientVersion(daveToken, "", client.WithElicitationHandler(elicitFunc(daveUser.elicit)),
		client.WithClientCapabilities(mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{Form: &struct{}{}, URL: &struct{}{}}}))
	if err != nil {
		t.Fatalf("dave's client: %v", err)
	}
	t.Cleanup(func() { dc.Close() })
	if got := text(t, callHTTP(t, dc, whoami)); !strings.Contains(got, "user=dave") {
		t.Errorf("dave (2026-07-28 client): %s", got)
	}
	// A client without URL mode gets one line saying what is missing.
	erin, err := s.clientVersion(erinToken, "2025-11-25", client.WithElicitationHandler(elicitFunc(daveUser.elicit)),
		client.WithClientCapabilities(mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapability{Form: &struct{}{}}}))
	if err != nil {
		t.Fatalf("erin's client: %v", err)
	}
	t.Cleanup(func() { erin.Close() })
	if got := text(t, callHTTP(t, erin, whoami)); !strings.Contains(got, "MCPError: Server 'gh' needs your own sign-in (principal erin): this MCP client cannot open sign-in links") {
		t.Errorf("erin (no URL mode): %s", got)
	}
	if n := up.Authorizations("erin"); n != 0 {
		t.Errorf("erin's authorizations = %d, want 0", n)
	}

	// Tokens at rest are sealed, and none reached the log.
	files, _ := filepath.Glob(filepath.Join(state, ".bridge", "principals", "*", "oauth", "token-*.json"))
	if len(files) == 0 {
		t.Fatal("no principal token files")
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		if !strings.HasPrefix(string(b), "bridge-token-v1 ") || strings.Contains(string(b), "access_token") {
			t.Errorf("%s is not sealed: %.80q", f, b)
		}
	}
	// No issued token in the log, the audit trail or /metrics.
	_, _, metrics := s.raw(http.MethodGet, "/metrics", "", bearerHeader(aliceToken))
	var audit strings.Builder
	_ = filepath.WalkDir(filepath.Join(state, ".bridge", "audit"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			audit.Write(b)
		}
		return nil
	})
	if audit.Len() == 0 || !strings.Contains(metrics, "bridge_") {
		t.Errorf("audit trail %d bytes, /metrics %d bytes: want both to hold something", audit.Len(), len(metrics))
	}
	for _, tok := range up.IssuedTokens() {
		for where, text := range map[string]string{"the log": s.stderr.String(), "the audit trail": audit.String(), "/metrics": metrics} {
			if strings.Contains(text, tok) {
				t.Errorf("an issued token appears in %s", where)
			}
		}
	}
}

// firstOf is the links of a signer snapshot.
func firstOf(links, _, _ []string) []string { return links }

// TestIdentityStartRefused: serve refuses to start (exit 2, one line) when a
// server has "identity": "principal" and the public URL could not receive
// a sign-in, or when there is no principal per caller.
func TestIdentityStartRefused(t *testing.T) {
	env := withServers(t, map[string]any{"gh": map[string]any{"type": "http", "url": "https://gh.example.com/mcp", "identity": "principal"}},
		map[string]string{"MCP_BRIDGE_TOKENS_FILE": writeTokens(t, "alice "+aliceToken)})
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--listen", "127.0.0.1:0", "--public-url", "http://bridge.example.com"},
			"serve: gh set \"identity\": \"principal\", but the public URL http://bridge.example.com is neither https nor loopback"},
		{[]string{"serve", "--listen", "0.0.0.0:0"}, "names no reachable host"},
		{[]string{"serve", "--listen", "127.0.0.1:0", "--public-url", "bridge.example.com"}, "serve: --public-url \"bridge.example.com\": want the bridge's external base URL"},
	} {
		_, errOut, code := runCLI(t, env, "", c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%q: exit %d, stderr %q; want 2 and one line naming %q", c.args, code, errOut, c.want)
		}
	}
	delete(env, "MCP_BRIDGE_TOKENS_FILE")
	_, errOut, code := runCLI(t, env, "", "serve", "--listen", "127.0.0.1:0", "--insecure-no-auth")
	if code != 2 || !strings.Contains(errOut, "needs a principal per caller") {
		t.Errorf("--insecure-no-auth: exit %d, stderr %q", code, errOut)
	}
}
