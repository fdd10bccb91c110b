package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"time"

	"github.com/bridge-mcp/bridge/actors"
	"github.com/bridge-mcp/bridge/actors/mcpwire"
	"github.com/bridge-mcp/bridge/engine/config"
	"github.com/bridge-mcp/bridge/engine/oauth"
)

// SetSignIn lets calls sign in to http servers that ask for it, through ui
// (bridge exec with $BROWSER or a terminal). Without it such a call fails at
// once naming `bridge auth login`. Call it before the first call.
func (e *Engine) SetSignIn(ui *oauth.Interaction) { e.signIn.Store(ui) }

// SignInThroughClient lets calls of `bridge run` sign in when the MCP
// client of the call declared URL-mode elicitation: the sign-in link goes
// to the person as an elicitation, the browser's answer comes back on the
// loopback callback (the stdio bridge runs on the person's machine).
// Anything else fails at once naming `bridge auth login`. Not for `bridge
// serve`: there the callback would land on the server's host.
func (e *Engine) SignInThroughClient() {
	e.SetSignIn(&oauth.Interaction{Out: io.Discard, Timeout: oauth.DefaultTimeout, Can: actors.CanAskURL,
		Ask: func(ctx context.Context, u string) bool {
			return actors.AskURL(ctx, oauth.DefaultTimeout, "sign in to use this server: open the link in a browser", u, randomID())
		}})
}

func randomID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Tokens is the shared token store under the state dir, sealed with the key
// of MCP_BRIDGE_KEY_FILE. It is never nil: without a usable key it still
// reads plain-text files of an earlier version and refuses every write,
// and err says why.
func (e *Engine) Tokens() (*oauth.Store, error) {
	key, err := e.tokenKey()
	return oauth.NewStore(e.Env.StateDir, key), err
}

// Entries loads the configured servers, for bridge auth.
func (e *Engine) Entries() config.Set { return config.Load(e.configOptions()) }

// withAuth gives every http and sse server a transport that carries its
// stored token (specs is specsFrom(set), entry for entry).
func (e *Engine) withAuth(set config.Set, specs []actors.ServerSpec) []actors.ServerSpec {
	store, err := e.Tokens()
	if err != nil {
		e.Log.Error().Err(err).Msg("no sign-in can be stored until the key file is fixed")
	}
	ui := e.signIn.Load()
	for i, en := range set.Entries {
		if en.Type != config.TypeHTTP && en.Type != config.TypeSSE {
			continue
		}
		if en.Identity == config.IdentityPrincipal && e.Env.Serving {
			specs[i].ForPrincipal = e.forPrincipal(en, specs[i])
		} else if en.Identity == config.IdentityPrincipal {
			e.identityIgnored.Do(func() {
				e.Log.Warn().Str("server", en.Name).Msg(`"identity": "principal" applies under bridge serve only; here the server uses this machine's sign-in (bridge auth login)`)
			})
		}
		t, err := oauth.New(en.Name, en.URL, en.OAuth, store, ui)
		if err != nil {
			continue // config already checked the URL
		}
		t.Base = mcpwire.HTTPTransport
		specs[i].Transport = t
		if ui != nil {
			en := en
			// Bounded beyond the browser's wait by the probe's own requests.
			bound := max(ui.Timeout, oauth.DefaultTimeout) + time.Minute
			specs[i].SignIn = func(ctx context.Context) error {
				ctx, cancel := context.WithTimeout(ctx, bound)
				defer cancel()
				return oauth.Probe(ctx, en, t)
			}
		}
	}
	return specs
}

// AuthState is one http server's sign-in state for doctor and auth status.
type AuthState struct {
	Server   string
	Identity string // config.IdentityShared or config.IdentityPrincipal
	State    string // "signed in", "signed in, expired", "sign-in required", "no sign-in needed", "unreachable", ...
	Detail   string
	Fix      string // the command that fixes it; "" when nothing to fix
}

// AuthStates probes each http or sse server (or only name) without a
// sign-in: one that answers needs none or is signed in; one that asks
// needs `bridge auth login`.
func (e *Engine) AuthStates(ctx context.Context, name string) []AuthState {
	var out []AuthState
	store, _ := e.Tokens()
	for _, en := range e.Entries().Entries {
		if (en.Type != config.TypeHTTP && en.Type != config.TypeSSE) || (name != "" && en.Name != name) {
			continue
		}
		out = append(out, oauthState(ctx, en, store))
	}
	return out
}

func oauthState(ctx context.Context, en config.Entry, store *oauth.Store) AuthState {
	st := AuthState{Server: en.Name, Identity: en.Identity}
	t, err := oauth.New(en.Name, en.URL, en.OAuth, store, nil)
	if err != nil {
		st.State, st.Detail = "invalid", err.Error()
		return st
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = oauth.Probe(pctx, en, t)
	rec, _ := store.Load(en.Name, t.Canonical())
	switch {
	case err == nil && rec != nil && rec.AccessToken != "":
		st.State = "signed in"
		if !rec.ExpiresAt.IsZero() {
			st.Detail = "until " + rec.ExpiresAt.Local().Format("2006-01-02 15:04")
			if rec.RefreshToken != "" {
				st.Detail += ", refreshed automatically"
			}
		}
	case err == nil:
		st.State = "no sign-in needed"
	default:
		if re, ok := oauth.AsRequired(err); ok {
			st.State, st.Detail, st.Fix = "sign-in required", re.Error(), re.Fix()
		} else {
			st.State, st.Detail = "unreachable", err.Error()
		}
	}
	return st
}

// doctorAuth is one check per http or sse server (or only that one): its
// sign-in state and the command that fixes it.
func (e *Engine) doctorAuth(ctx context.Context, only string) []Check {
	var out []Check
	for _, st := range e.AuthStates(ctx, only) {
		c := Check{Status: "OK", Name: "auth " + st.Server, Detail: st.State}
		if st.Detail != "" {
			c.Detail += " " + st.Detail
		}
		own := st.Identity == config.IdentityPrincipal
		switch {
		case own && (st.State == "sign-in required" || st.State == "signed in"):
			c.Detail = "identity principal: each principal of bridge serve signs in as themselves, from their MCP client"
		case st.State == "sign-in required":
			c.Status, c.Detail = "FAIL", "sign-in required; run: "+st.Fix
		case st.State == "unreachable" || st.State == "invalid":
			c.Status, c.Detail = "WARN", "could not check sign-in: "+st.Detail
		case st.State == "signed in" && e.Env.TokensFile != "":
			// MCP_BRIDGE_TOKENS_FILE: this is bridge serve's environment.
			c.Status = "WARN"
			c.Detail += `; under bridge serve every principal acts as this one account at ` + st.Server +
				`: set "identity": "principal" in its entry so that each signs in as themselves`
		}
		out = append(out, c)
	}
	return out
}
