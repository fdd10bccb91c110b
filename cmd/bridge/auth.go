package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/engine"
	"github.com/bridge-mcp/bridge/engine/config"
	"github.com/bridge-mcp/bridge/engine/oauth"
)

// authCmd is `bridge auth login|status|logout`: sign-in to remote MCP
// servers that require OAuth.
func (m *Main) authCmd(ctx context.Context, args []string) int {
	if len(args) == 0 {
		return m.usage("auth: want a subcommand: login NAME, status or logout NAME (bridge auth --help)")
	}
	switch args[0] {
	case "-h", "--help", "-help":
		m.commandHelp("auth", flag.NewFlagSet("auth", flag.ContinueOnError))
		return 0
	case "login":
		return m.authLogin(ctx, args[1:])
	case "status":
		return m.authStatus(ctx, args[1:])
	case "logout":
		return m.authLogout(ctx, args[1:])
	}
	return m.usage("auth: unknown subcommand %q: want login NAME, status or logout NAME (bridge auth --help)", args[0])
}

// authSubHelp prints `bridge auth SUB`'s own usage when args ask for
// help; the shared help would show the whole auth synopsis.
func (m *Main) authSubHelp(sub, synopsis, what string, fs *flag.FlagSet, args []string) bool {
	for _, a := range args {
		if a == "--" {
			break
		}
		if a == "-h" || a == "--help" || a == "-help" {
			fmt.Fprintf(m.Stdout, "usage: bridge auth %s %s\n\n%s\n", sub, synopsis, what)
			n := 0
			fs.VisitAll(func(*flag.Flag) { n++ })
			if n > 0 {
				fmt.Fprintf(m.Stdout, "\nflags:\n")
				fs.VisitAll(func(f *flag.Flag) {
					arg, usage := flag.UnquoteUsage(f)
					if arg != "" {
						arg = " " + arg
					}
					fmt.Fprintf(m.Stdout, "  --%s%s\n        %s\n", f.Name, arg, usage)
				})
			}
			return true
		}
	}
	return false
}

// authEntry finds the http or sse server name in the configuration.
func (m *Main) authEntry(e *engine.Engine, sub, name string) (config.Entry, int, bool) {
	set := e.Entries()
	var names []string
	for _, en := range set.Entries {
		if en.Name == name {
			if en.Type != config.TypeHTTP && en.Type != config.TypeSSE {
				return en, m.usage("auth %s: server %q is a %s server; only http and sse servers sign in", sub, name, en.Type), false
			}
			return en, 0, true
		}
		if en.Type == config.TypeHTTP || en.Type == config.TypeSSE {
			names = append(names, en.Name)
		}
	}
	known := "no http or sse servers are configured"
	if len(names) > 0 {
		known = "http servers: " + strings.Join(names, ", ")
	}
	return config.Entry{}, m.usage("auth %s: no configured server %q (%s; bridge doctor lists them)", sub, name, known), false
}

func (m *Main) authLogin(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("auth login", flag.ContinueOnError)
	scope := fs.String("scope", "", "extra `SCOPES` to ask for, space-separated")
	noBrowser := fs.Bool("no-browser", false, "do not open a browser or listen for the redirect: paste the URL the browser was sent to (SSH, headless hosts)")
	timeout := fs.Duration("timeout", oauth.DefaultTimeout, "how long to wait for the browser, a `DURATION` such as 90s or 5m (default 5m)")
	if m.authSubHelp("login", "NAME [--scope SCOPES] [--no-browser] [--timeout D]",
		"Signs in to the configured http or sse server NAME in a browser and stores its tokens.", fs, args) {
		return 0
	}
	pos, code, ok := m.parse("auth login", fs, args, 1)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return m.usage("auth login: want the server NAME: bridge auth login NAME (bridge auth --help)")
	}
	env, ok := m.loadEnv()
	if !ok {
		return 2
	}
	e := engine.New(env, Version(), m.logger(env, m.levelFromEnv(env, zerolog.WarnLevel)), m.Getenv, false)
	en, code, ok := m.authEntry(e, "login", pos[0])
	if !ok {
		return code
	}
	ui := &oauth.Interaction{Out: m.Stderr, Timeout: *timeout, Open: oauth.Opener(m.Getenv)}
	if *noBrowser {
		ui.Open, ui.Paste = nil, m.Stdin
	}
	store, err := e.Tokens()
	if err != nil {
		fmt.Fprintf(m.Stderr, "bridge: auth login %s: %v\n", en.Name, err)
		return 1
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout*oauth.MaxAttempts+time.Minute)
	defer cancel()
	res, err := oauth.Login(ctx, en, store, ui, *scope)
	if err != nil {
		fmt.Fprintf(m.Stderr, "bridge: auth login %s: %v\n", en.Name, err)
		return 1
	}
	switch {
	case res.SignedIn:
		fmt.Fprintf(m.Stdout, "signed in to %s%s\n", en.Name, describe(res.Record))
	default:
		fmt.Fprintf(m.Stdout, "%s asked for no sign-in; nothing to do\n", en.Name)
	}
	return 0
}

// describe is " (scope …, until …)" for a record; never a token.
func describe(r *oauth.Record) string {
	if r == nil {
		return ""
	}
	s := ""
	if r.Account != "" {
		s += "as " + r.Account
	}
	if r.Scope != "" {
		if s != "" {
			s += ", "
		}
		s += "scope " + r.Scope
	}
	if !r.ExpiresAt.IsZero() {
		if s != "" {
			s += ", "
		}
		s += "until " + r.ExpiresAt.Local().Format("2006-01-02 15:04")
		if r.RefreshToken != "" {
			s += ", refreshed automatically"
		}
	}
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

func (m *Main) authStatus(_ context.Context, args []string) int {
	fs := flag.NewFlagSet("auth status", flag.ContinueOnError)
	principal := fs.String("principal", "", "show the own sign-ins of bridge serve's `PRINCIPAL` (servers with \"identity\": \"principal\")")
	if m.authSubHelp("status", "[--principal P]", "Lists every http or sse server with what the token store holds for it (files only).", fs, args) {
		return 0
	}
	if _, code, ok := m.parse("auth status", fs, args, 0); !ok {
		return code
	}
	env, ok := m.loadEnv()
	if !ok {
		return 2
	}
	e := engine.New(env, Version(), m.logger(env, m.levelFromEnv(env, zerolog.WarnLevel)), m.Getenv, false)
	store, err := e.Tokens()
	if *principal != "" {
		store, err = e.PrincipalTokens(*principal)
		if store == nil {
			return m.usage("auth status: --principal: %v", err)
		}
	}
	if err != nil {
		fmt.Fprintf(m.Stderr, "bridge: auth status: %v\n", err)
		return 1
	}
	printStatus(m.Stdout, e, store, *principal)
	return 0
}

// printStatus lists every http server with what store holds for it: the
// shared store, or principal's own; it reads files only (bridge doctor asks
// the servers).
func printStatus(w io.Writer, e *engine.Engine, store *oauth.Store, principal string) {
	n := 0
	for _, en := range e.Entries().Entries {
		if en.Type != config.TypeHTTP && en.Type != config.TypeSSE {
			continue
		}
		n++
		own := en.Identity == config.IdentityPrincipal
		if principal != "" && !own {
			fmt.Fprintf(w, "%s: shared identity: %s uses the operator's sign-in (bridge auth status)\n", en.Name, principal)
			continue
		}
		t, err := oauth.New(en.Name, en.URL, en.OAuth, store, nil)
		if err != nil {
			continue
		}
		rec, err := store.Load(en.Name, t.Canonical())
		login, notSigned := "run: bridge auth login "+en.Name, "bridge doctor tells whether it needs it"
		if principal != "" {
			login = principal + " signs in from their MCP client, at their next call"
			notSigned = login
		}
		switch {
		case principal == "" && own && (rec == nil || err != nil):
			fmt.Fprintf(w, "%s: identity principal: each principal signs in as themselves (bridge auth status --principal P)\n", en.Name)
		case err != nil:
			fmt.Fprintf(w, "%s: token file unreadable (%v); %s\n", en.Name, err, login)
		case rec == nil || (rec.AccessToken == "" && rec.RefreshToken == ""):
			fmt.Fprintf(w, "%s: not signed in (%s)\n", en.Name, notSigned)
		case !rec.Valid(time.Now()) && rec.RefreshToken == "":
			fmt.Fprintf(w, "%s: sign-in expired; %s\n", en.Name, login)
		default:
			fmt.Fprintf(w, "%s: signed in%s\n", en.Name, describe(rec))
		}
	}
	if n == 0 {
		fmt.Fprintln(w, "no http or sse servers configured")
	}
}

func (m *Main) authLogout(_ context.Context, args []string) int {
	fs := flag.NewFlagSet("auth logout", flag.ContinueOnError)
	principal := fs.String("principal", "", "remove the own tokens of bridge serve's `PRINCIPAL` only (servers with \"identity\": \"principal\")")
	if m.authSubHelp("logout", "NAME [--principal P]", "Removes the stored tokens of server NAME: the shared ones, or one principal's own.", fs, args) {
		return 0
	}
	pos, code, ok := m.parse("auth logout", fs, args, 1)
	if !ok {
		return code
	}
	if len(pos) != 1 {
		return m.usage("auth logout: want the server NAME: bridge auth logout NAME (bridge auth --help)")
	}
	env, ok := m.loadEnv()
	if !ok {
		return 2
	}
	e := engine.New(env, Version(), m.logger(env, m.levelFromEnv(env, zerolog.WarnLevel)), m.Getenv, false)
	// Delete reads no file's content: a key problem does not stop a logout.
	store, _ := e.Tokens()
	who := ""
	if *principal != "" {
		own, err := e.PrincipalTokens(*principal)
		if own == nil {
			return m.usage("auth logout: --principal: %v", err)
		}
		store = own
		who = " for " + *principal
	}
	n, err := store.Delete(pos[0])
	if err != nil {
		fmt.Fprintf(m.Stderr, "bridge: auth logout %s: %v\n", pos[0], err)
		return 1
	}
	if n == 0 {
		fmt.Fprintf(m.Stdout, "%s: was not signed in%s\n", pos[0], who)
		return 0
	}
	fmt.Fprintf(m.Stdout, "%s: signed out%s (tokens removed)\n", pos[0], who)
	return 0
}

// lazySignIn lets `bridge exec` sign in during a call when someone can
// answer the browser: $BROWSER is set or stderr is a terminal. The URL goes
// to stderr, never stdout.
func (m *Main) lazySignIn(e *engine.Engine) {
	if oauth.Interactive(m.Getenv, isTerminal(m.Stderr)) {
		e.SetSignIn(&oauth.Interaction{Out: m.Stderr, Open: oauth.Opener(m.Getenv), Timeout: oauth.DefaultTimeout})
	}
}
