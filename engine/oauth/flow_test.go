package oauth

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeAuth is a protected MCP endpoint and its authorization server on one
// origin. The endpoint wants a token with every scope of need; the
// authorization server approves at once and grants what was asked.
type fakeAuth struct {
	srv        *httptest.Server
	need       atomic.Value // string
	authorizes atomic.Int32
	mu         sync.Mutex
	granted    map[string]string // token → scope
}

func newFakeAuth(t *testing.T, need string) *fakeAuth {
	f := &fakeAuth{granted: map[string]string{}}
	f.need.Store(need)
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAuth) serve(w http.ResponseWriter, r *http.Request) {
	base := f.srv.URL
	switch r.URL.Path {
	case "/.well-known/oauth-protected-resource/mcp":
		fmt.Fprintf(w, `{"resource":%q,"authorization_servers":[%q]}`, base+"/mcp", base)
	case "/.well-known/oauth-authorization-server":
		fmt.Fprintf(w, `{"issuer":%q,"authorization_endpoint":%q,"token_endpoint":%q,"registration_endpoint":%q,"code_challenge_methods_supported":["S256"]}`,
			base, base+"/authorize", base+"/token", base+"/register")
	case "/register":
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"client_id":"dyn-client"}`)
	case "/authorize":
		f.authorizes.Add(1)
		q := r.URL.Query()
		to, _ := url.Parse(q.Get("redirect_uri"))
		v := url.Values{"code": {"code:" + q.Get("scope")}, "state": {q.Get("state")}}
		to.RawQuery = v.Encode()
		http.Redirect(w, r, to.String(), http.StatusFound)
	case "/token":
		_ = r.ParseForm()
		scope := strings.TrimPrefix(r.Form.Get("code"), "code:")
		tok := fmt.Sprintf("tok-%d", time.Now().UnixNano())
		f.mu.Lock()
		f.granted[tok] = scope
		f.mu.Unlock()
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600,"scope":%q}`, tok, scope)
	case "/mcp":
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		f.mu.Lock()
		scope, ok := f.granted[tok]
		f.mu.Unlock()
		need := f.need.Load().(string)
		switch {
		case !ok:
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer scope=%q`, need))
			w.WriteHeader(http.StatusUnauthorized)
		case !covers(scope, need):
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer error="insufficient_scope", scope=%q`, need))
			w.WriteHeader(http.StatusForbidden)
		default:
			_, _ = io.Copy(w, r.Body) // echo: proves the body was resent whole
		}
	default:
		http.NotFound(w, r)
	}
}

// browser is an Open that follows the redirects to the loopback callback.
func browser(base *http.Transport) func(string) error {
	return func(u string) error {
		resp, err := (&http.Client{Transport: base}).Get(u)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
}

func newTestTransport(t *testing.T, f *fakeAuth, ui *Interaction) *Transport {
	base := &http.Transport{}
	t.Cleanup(base.CloseIdleConnections)
	tr, err := New("srv", f.srv.URL+"/mcp", nil, NewStore(t.TempDir(), testKey), ui)
	if err != nil {
		t.Fatal(err)
	}
	tr.Base = base
	if ui != nil && ui.Open == nil && ui.Paste == nil {
		ui.Open = browser(base)
	}
	return tr
}

func post(t *testing.T, tr *Transport, body string) (string, error) {
	resp, err := (&http.Client{Transport: tr}).Post(tr.URL.String(), "application/json", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return "", fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return string(b), nil
}

func TestSignInThenStepUp(t *testing.T) {
	f := newFakeAuth(t, "read")
	tr := newTestTransport(t, f, &Interaction{Out: io.Discard, Timeout: 10 * time.Second})
	if got, err := post(t, tr, `{"n":1}`); err != nil || got != `{"n":1}` {
		t.Fatalf("first call = %q, %v", got, err)
	}
	// The server now wants more: a 403 insufficient_scope signs in again
	// with the union of the granted and the demanded scopes.
	f.need.Store("read write")
	if got, err := post(t, tr, `{"n":2}`); err != nil || got != `{"n":2}` {
		t.Fatalf("after step-up = %q, %v", got, err)
	}
	if got, want := f.authorizes.Load(), int32(2); got != want {
		t.Errorf("authorizations = %d, want %d", got, want)
	}
	rec, _ := tr.Store.Load("srv", tr.Canonical())
	if rec == nil || rec.Scope != "read write" || rec.ClientID != "dyn-client" {
		t.Errorf("stored record: %+v", rec)
	}
	// A new transport (another process) uses the stored token: no sign-in.
	tr2 := newTestTransport(t, f, nil)
	tr2.Store = tr.Store
	if got, err := post(t, tr2, `{"n":3}`); err != nil || got != `{"n":3}` {
		t.Errorf("with the stored token = %q, %v", got, err)
	}
}

func TestSignInAttemptsCapped(t *testing.T) {
	f := newFakeAuth(t, "admin")
	// The authorization server grants less than asked: every retry is 403.
	tr := newTestTransport(t, f, &Interaction{Out: io.Discard, Timeout: 10 * time.Second})
	base := tr.Base.(*http.Transport)
	tr.UI.Open = func(u string) error {
		pu, _ := url.Parse(u)
		q := pu.Query()
		q.Set("scope", "nothing")
		pu.RawQuery = q.Encode()
		return browser(base)(pu.String())
	}
	_, err := post(t, tr, `{}`)
	re, ok := AsRequired(err)
	if !ok || !strings.Contains(re.Error(), "still refused after 3 sign-ins") {
		t.Fatalf("err = %v, want a RequiredError after 3 sign-ins", err)
	}
	if got := f.authorizes.Load(); got != MaxAttempts {
		t.Errorf("authorizations = %d, want %d", got, MaxAttempts)
	}
	// The cap spans requests (mcp-go gives up on one and sends another):
	// no request gets through, so no more sign-ins.
	if _, err := post(t, tr, `{}`); err == nil {
		t.Error("second request succeeded")
	}
	if got := f.authorizes.Load(); got != MaxAttempts {
		t.Errorf("authorizations after a second request = %d, want still %d", got, MaxAttempts)
	}
}

// TestSignInUnansweredNotCounted: sign-ins that got no token (the link
// never followed, until the timeout) do not use up the attempts: after
// more than MaxAttempts of them, a followed link still signs in.
func TestSignInUnansweredNotCounted(t *testing.T) {
	f := newFakeAuth(t, "read")
	tr := newTestTransport(t, f, &Interaction{Out: io.Discard, Timeout: 50 * time.Millisecond})
	base := tr.Base.(*http.Transport)
	tr.UI.Open = func(string) error { return nil } // nobody follows it
	for i := range MaxAttempts + 1 {
		_, err := post(t, tr, `{}`)
		if err == nil || strings.Contains(err.Error(), "still refused") {
			t.Fatalf("unanswered sign-in %d: err = %v, want the sign-in's own timeout", i+1, err)
		}
	}
	tr.UI.Timeout = 10 * time.Second
	tr.UI.Open = browser(base)
	if _, err := post(t, tr, `{}`); err != nil {
		t.Fatalf("a followed link after %d unanswered ones: %v", MaxAttempts+1, err)
	}
}

func TestSignInPastedRedirect(t *testing.T) {
	f := newFakeAuth(t, "read")
	outR, outW := io.Pipe()
	pasteR, pasteW := io.Pipe()
	ui := &Interaction{Out: outW, Paste: pasteR, Timeout: 10 * time.Second}
	tr := newTestTransport(t, f, ui)
	base := tr.Base.(*http.Transport)
	// The user: read the printed URL, open it in a browser elsewhere, and
	// paste back the address the browser landed on (nothing listens there).
	done := make(chan struct{})
	var pastes sync.WaitGroup
	go func() {
		defer close(done)
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if !strings.HasPrefix(line, "http") {
				continue
			}
			c := &http.Client{Transport: base, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
			resp, err := c.Get(line)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			// Pasted while the bridge goes on printing its prompt.
			pastes.Add(1)
			go func() {
				defer pastes.Done()
				fmt.Fprintln(pasteW, resp.Header.Get("Location"))
			}()
		}
	}()
	got, err := post(t, tr, `{"x":1}`)
	outW.Close()
	<-done
	pasteW.Close()
	pastes.Wait()
	if err != nil || got != `{"x":1}` {
		t.Fatalf("call after a pasted redirect = %q, %v", got, err)
	}
}

func TestSignInWrongStateAndTimeout(t *testing.T) {
	f := newFakeAuth(t, "read")
	tr := newTestTransport(t, f, &Interaction{Out: io.Discard, Timeout: 10 * time.Second})
	base := tr.Base.(*http.Transport)
	tr.UI.Open = func(u string) error {
		pu, _ := url.Parse(u)
		cb, _ := url.Parse(pu.Query().Get("redirect_uri"))
		cb.RawQuery = url.Values{"code": {"stolen"}, "state": {"forged"}}.Encode()
		return browser(base)(cb.String())
	}
	if _, err := post(t, tr, `{}`); err == nil || !strings.Contains(err.Error(), "wrong state") {
		t.Errorf("forged state: err = %v", err)
	}
	tr.UI.Open = func(string) error { return nil } // the user never answers
	tr.UI.Timeout = 200 * time.Millisecond
	if _, err := post(t, tr, `{}`); err == nil || !strings.Contains(err.Error(), "(the sign-in timeout, --timeout)") {
		t.Errorf("no answer: err = %v", err)
	}
}

func TestSignInOutlivesDeadlineNotCancel(t *testing.T) {
	f := newFakeAuth(t, "read")
	tr := newTestTransport(t, f, &Interaction{Out: io.Discard, Timeout: 10 * time.Second})
	base := tr.Base.(*http.Transport)
	slow := browser(base)
	tr.UI.Open = func(u string) error {
		go func() { // the user takes longer than the request's deadline
			time.Sleep(300 * time.Millisecond)
			_ = slow(u)
		}()
		return nil
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, tr.URL.String(), strings.NewReader(`{}`))
	if resp, err := tr.RoundTrip(req); err == nil {
		resp.Body.Close()
	}
	if rec, _ := tr.Store.Load("srv", tr.Canonical()); rec == nil || rec.AccessToken == "" {
		t.Errorf("the sign-in was cut off by the request's deadline")
	}
	// A cancellation ends a pending sign-in at once.
	tr2 := newTestTransport(t, f, &Interaction{Out: io.Discard, Timeout: 10 * time.Second, Open: func(string) error { return nil }})
	ctx2, cancel2 := context.WithCancel(t.Context())
	time.AfterFunc(100*time.Millisecond, cancel2)
	req2, _ := http.NewRequestWithContext(ctx2, http.MethodPost, tr2.URL.String(), strings.NewReader(`{}`))
	start := time.Now()
	if _, err := tr2.RoundTrip(req2); err == nil || time.Since(start) > 5*time.Second {
		t.Errorf("cancelled sign-in: err %v after %v", err, time.Since(start))
	}
}

// TestRefusedStoredToken: a stored token the server no longer accepts,
// with no one to sign in, fails naming that it was signed in and was
// refused, and the command that signs in again (issue 36: auth status said
// signed in while the start failed with no reason).
func TestRefusedStoredToken(t *testing.T) {
	f := newFakeAuth(t, "read")
	tr := newTestTransport(t, f, nil)
	if err := tr.Store.Save(&Record{Server: "srv", Resource: canonical(tr.URL), AccessToken: "revoked", Scope: "read"}); err != nil {
		t.Fatal(err)
	}
	_, err := post(t, tr, `{}`)
	want := "Server 'srv' needs sign-in again (it was signed in, and the server refused its token: revoked, or expired on its side): run: bridge auth login srv"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v, want %q", err, want)
	}
}
