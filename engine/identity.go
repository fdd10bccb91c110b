package engine

// identity.go is each principal's own sign-in to upstream servers whose
// entry says "identity": "principal" (bridge serve only): their tokens
// live under <state>/.bridge/principals/<principal>/oauth, sealed with the
// bridge's key like the shared ones; the sign-in link goes to the
// principal's own MCP client (URL-mode elicitation), and the browser comes
// back to serve's /oauth/callback on --public-url.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/actors"
	"github.com/bridge-mcp/bridge/actors/mcpwire"
	"github.com/bridge-mcp/bridge/engine/config"
	"github.com/bridge-mcp/bridge/engine/httpd"
	"github.com/bridge-mcp/bridge/engine/oauth"
	"github.com/bridge-mcp/bridge/engine/snapshot"
)

// CallbackPath is serve's OAuth redirect endpoint.
const CallbackPath = httpd.CallbackPath

// bridgeKey is MCP_BRIDGE_KEY_FILE, read once (made when there is none)
// for everything the bridge signs or seals with it: session snapshots, the
// audit trail and token files. Its mode warning is logged once. Each user
// wraps the error with what it loses.
type bridgeKey struct {
	path string
	log  zerolog.Logger
	once sync.Once
	key  []byte
	err  error
}

func (k *bridgeKey) load() ([]byte, error) {
	k.once.Do(func() {
		var warning string
		k.key, warning, k.err = snapshot.LoadKey(k.path)
		if warning != "" {
			k.log.Warn().Msg(warning)
		}
	})
	return k.key, k.err
}

// tokenKey is the key that seals token files; the error names the key file.
func (e *Engine) tokenKey() ([]byte, error) {
	key, err := e.key.load()
	if err != nil {
		return nil, fmt.Errorf("token key: MCP_BRIDGE_KEY_FILE=%s: %w", e.Env.KeyFile, err)
	}
	return key, nil
}

// principalsDir holds every principal's own files.
func (e *Engine) principalsDir() string {
	return filepath.Join(e.Env.StateDir, ".bridge", "principals")
}

// PrincipalTokens is principal's own token store; nil only for a name
// that is no principal's. Like Tokens, a store without a usable key comes
// with the error, and refuses every write.
func (e *Engine) PrincipalTokens(principal string) (*oauth.Store, error) {
	if !httpd.ValidPrincipal(principal) {
		return nil, fmt.Errorf("principal %q: a principal is 1-64 characters from A-Z a-z 0-9 _ . - (not . or ..)", principal)
	}
	key, err := e.tokenKey()
	return oauth.NewStoreAt(filepath.Join(e.principalsDir(), principal, "oauth"), key), err
}

// MigrateTokens seals the token files an earlier version kept in plain
// text, the shared ones and every principal's, without a new sign-in. It
// runs at every start; a store with nothing plain is left as it is.
func (e *Engine) MigrateTokens() {
	_, errShared := os.Stat(filepath.Join(e.Env.StateDir, ".bridge", "oauth"))
	_, errOwn := os.Stat(e.principalsDir())
	if errShared != nil && errOwn != nil {
		return // no token file anywhere: nothing to seal, no key to make yet
	}
	stores := []*oauth.Store{}
	if s, err := e.Tokens(); err == nil {
		stores = append(stores, s)
	} else {
		e.Log.Warn().Err(err).Msg("token files cannot be read or written until the key file is fixed")
		return
	}
	ents, _ := os.ReadDir(e.principalsDir())
	for _, ent := range ents {
		if s, _ := e.PrincipalTokens(ent.Name()); s != nil && ent.IsDir() {
			stores = append(stores, s)
		}
	}
	for _, s := range stores {
		n, err := s.Migrate()
		if err != nil {
			e.Log.Warn().Err(err).Str("dir", s.Dir()).Msg("sealing plain-text token files")
		} else if n > 0 {
			e.Log.Info().Int("files", n).Str("dir", s.Dir()).Msg("token files sealed with the key file (MCP_BRIDGE_KEY_FILE); no new sign-in needed")
		}
	}
}

// PublicURL is serve's externally visible base URL: --public-url, else
// the listen address (https with TLS).
func PublicURL(opts HTTPOptions) (*url.URL, error) {
	raw := opts.PublicURL
	if raw == "" {
		scheme := "http"
		if opts.TLSCert != "" {
			scheme = "https"
		}
		raw = scheme + "://" + opts.Listen
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("serve: --public-url %q: want the bridge's external base URL, e.g. https://bridge.example.com", raw)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return u, nil
}

// callbackUsable says why u cannot receive sign-in redirects; "" when it
// can. Authorization servers refuse a plain-http redirect beyond loopback,
// and one to an unspecified address (0.0.0.0) reaches no one.
func callbackUsable(u *url.URL) string {
	host := u.Hostname()
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return fmt.Sprintf("the public URL %s names no reachable host", u)
	}
	if u.Scheme != "https" && !isLoopback(host) {
		return fmt.Sprintf("the public URL %s is neither https nor loopback, and authorization servers refuse such redirects", u)
	}
	return ""
}

// CheckIdentities refuses a serve start that cannot sign principals in:
// a server with identity: principal needs authentication (a tokens file)
// and a public URL the browser can come back to. The error is one line
// naming the fix; nil when no server asks for it.
func (e *Engine) CheckIdentities(opts HTTPOptions) error {
	var names []string
	for _, en := range config.Load(e.configOptions()).Entries {
		if en.Identity == config.IdentityPrincipal {
			names = append(names, en.Name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	if opts.InsecureNoAuth {
		return fmt.Errorf("serve: %s set \"identity\": \"principal\", which needs a principal per caller: give MCP_BRIDGE_TOKENS_FILE instead of --insecure-no-auth", strings.Join(names, ", "))
	}
	u, err := PublicURL(opts)
	if err != nil {
		return err
	}
	if why := callbackUsable(u); why != "" {
		return fmt.Errorf("serve: %s set \"identity\": \"principal\", but %s: give --public-url https://… (the address your users' browsers reach this bridge at)", strings.Join(names, ", "), why)
	}
	return nil
}

// identityProblem is why en cannot be served as it says, "" when it can:
// under serve, identity: principal needs tokens and a usable callback.
func (e *Engine) identityProblem(en config.Entry) string {
	if en.Identity != config.IdentityPrincipal || !e.Env.Serving {
		return ""
	}
	if e.Env.TokensFile == "" {
		return `"identity": "principal" needs a principal per caller: bridge serve runs with --insecure-no-auth`
	}
	if e.callbacks.Load() == nil {
		return `"identity": "principal" needs an https --public-url (or a loopback one) for the sign-in callback`
	}
	return ""
}

// forPrincipal is the spec maker of en under serve: each principal's
// connection carries their own tokens, and signs in through their own
// client, back to serve's callback.
func (e *Engine) forPrincipal(en config.Entry, base actors.ServerSpec) func(string) actors.ServerSpec {
	timeout := time.Duration(e.Env.ApprovalTimeout) * time.Second
	// Nothing of the shared identity reaches a principal's spec: without a
	// store or a callback it goes out with no token at all.
	base.Transport, base.SignIn, base.ForPrincipal = nil, nil, nil
	return func(principal string) actors.ServerSpec {
		spec := base
		// A principal the front accepted has a valid name; a key problem
		// was logged at start, and the store then refuses to save.
		store, _ := e.PrincipalTokens(principal)
		callbacks := e.callbacks.Load()
		if callbacks == nil {
			// Never a loopback listener: under serve it would wait on the
			// server's host. Load skips such an entry (identityProblem);
			// this is the backstop.
			return spec
		}
		ui := &oauth.Interaction{Out: io.Discard, Timeout: timeout, Can: actors.CanAskURL, NoLinks: actors.CannotAskURL,
			Callbacks: callbacks, Principal: principal,
			Ask: func(ctx context.Context, u string) bool {
				msg := fmt.Sprintf("Sign in to %s as yourself (bridge principal %s): open the link in a browser.", en.Name, principal)
				return actors.AskURL(ctx, timeout, msg, u, randomID())
			}}
		t, err := oauth.New(en.Name, en.URL, en.OAuth, store, ui)
		if err != nil || store == nil {
			return spec // config already checked the URL
		}
		t.Base = mcpwire.HTTPTransport
		spec.Transport = t
		bound := timeout + time.Minute
		spec.SignIn = func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, bound)
			defer cancel()
			return oauth.Probe(ctx, en, t)
		}
		return spec
	}
}

// principalSignIns is actors.SignIns over the principals' own stores.
type principalSignIns struct{ e *Engine }

var _ actors.SignIns = principalSignIns{}

func (p principalSignIns) List(principal string) []actors.SignIn {
	store, _ := p.e.PrincipalTokens(principal)
	if store == nil {
		return nil
	}
	now := time.Now()
	var out []actors.SignIn
	for _, r := range store.List() {
		s := actors.SignIn{Server: r.Server, Scope: r.Scope, Expires: r.ExpiresAt, Account: r.Account}
		switch {
		case r.Valid(now):
			s.State = "signed in"
		case r.RefreshToken != "":
			s.State = "expired, refreshed on next use"
		default:
			s.State = "expired"
		}
		if r.AccessToken == "" && r.RefreshToken == "" {
			continue // a registration without tokens: not a sign-in
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Server < out[j].Server })
	return out
}

func (p principalSignIns) SignOut(principal, server string) (bool, error) {
	store, err := p.e.PrincipalTokens(principal)
	if store == nil {
		return false, err
	}
	n, err := store.Delete(server)
	if err != nil {
		return false, errors.New("signout: the token file could not be removed")
	}
	if n > 0 {
		p.e.Log.Info().Str("principal", principal).Str("server", server).Msg("signed out by the principal")
	}
	return n > 0, nil
}

// openCallbacks makes serve's sign-in redirect endpoint, once the listen
// address is known (the default public URL names the port chosen for
// :0). Without a public URL a browser can come back to, there is none, and
// identity: principal servers are skipped at load (identityProblem).
func (e *Engine) openCallbacks(opts HTTPOptions, listening string) {
	if opts.PublicURL == "" {
		opts.Listen = listening
	}
	pub, err := PublicURL(opts)
	if err != nil || callbackUsable(pub) != "" {
		return
	}
	e.callbacks.Store(oauth.NewCallbacks(pub.String() + CallbackPath))
}

// callback is serve's /oauth/callback endpoint, for httpd: the one
// openCallbacks made, or nil before it or without one.
func (e *Engine) callback() http.Handler {
	if c := e.callbacks.Load(); c != nil {
		return c
	}
	return nil
}
