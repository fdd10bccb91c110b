package oauth

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/bridge-mcp/bridge/engine/config"
)

// LoginResult is what a login found.
type LoginResult struct {
	SignedIn bool    // an authorization happened
	Record   *Record // the stored record after it; nil when none
}

// Login signs in to e: it connects as an MCP client (initialize and
// tools/list) with a transport that ignores the stored token, so the
// server's own challenge drives discovery and scope, and signs in through
// ui. A server that challenges nothing needs no sign-in.
func Login(ctx context.Context, e config.Entry, store *Store, ui *Interaction, scope string) (LoginResult, error) {
	t, err := New(e.Name, e.URL, e.OAuth, store, ui)
	if err != nil {
		return LoginResult{}, err
	}
	t.Fresh, t.Scope = true, scope
	if err := Probe(ctx, e, t); err != nil {
		return LoginResult{}, err
	}
	rec, _ := store.Load(e.Name, canonical(t.URL))
	return LoginResult{SignedIn: t.Attempts > 0, Record: rec}, nil
}

// Probe connects to e through rt, initializes and lists tools, then
// disconnects.
func Probe(ctx context.Context, e config.Entry, rt http.RoundTripper) error {
	ctx = OneSignIn(ctx)
	hc := &http.Client{Transport: rt}
	var mc *client.Client
	var err error
	if e.Type == config.TypeSSE {
		mc, err = client.NewSSEMCPClient(e.URL, client.WithHeaders(e.Headers), transport.WithHTTPClient(hc))
	} else {
		mc, err = client.NewStreamableHttpClient(e.URL, transport.WithHTTPHeaders(e.Headers), transport.WithHTTPBasicClient(hc))
	}
	if err != nil {
		return err
	}
	defer mc.Close()
	if err := mc.Start(ctx); err != nil {
		return unwrapRequired(err)
	}
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "bridge", Version: "1"}
	if _, err := mc.Initialize(ctx, req); err != nil {
		return unwrapRequired(err)
	}
	if _, err := mc.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
		return unwrapRequired(err)
	}
	return nil
}

// unwrapRequired returns the sign-in error inside a transport error, whose
// text would otherwise repeat the URL and the transport's wording.
func unwrapRequired(err error) error {
	var re *RequiredError
	if asRequired(err, &re) {
		return re
	}
	if fe, ok := AsFailed(err); ok {
		return fe
	}
	return err
}

// Opener opens a URL: $BROWSER (a command given the URL; %s in it stands
// for the URL), else the platform's opener. The command runs in the
// background; the returned func waits for it briefly, for the caller that
// owns it.
func Opener(getenv func(string) string) func(string) error {
	return func(u string) error {
		var cmd *exec.Cmd
		if b := strings.TrimSpace(getenv("BROWSER")); b != "" {
			first, _, _ := strings.Cut(b, ":") // BROWSER may list several commands
			args := strings.Fields(first)
			replaced := false
			for i, a := range args {
				if strings.Contains(a, "%s") {
					args[i] = strings.ReplaceAll(a, "%s", u)
					replaced = true
				}
			}
			if !replaced {
				args = append(args, u)
			}
			cmd = exec.Command(args[0], args[1:]...)
		} else {
			switch runtime.GOOS {
			case "darwin":
				cmd = exec.Command("open", u)
			case "windows":
				cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", u)
			default:
				cmd = exec.Command("xdg-open", u)
			}
		}
		cmd.Stdout, cmd.Stderr = nil, nil
		cmd.Stdin = nil
		if err := cmd.Start(); err != nil {
			return err
		}
		// Openers return at once; a browser run directly may not, and is
		// left running (it is the user's), reaped by the OS when we exit.
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				return fmt.Errorf("%s: %w", cmd.Args[0], err)
			}
		case <-time.After(2 * time.Second):
		}
		return nil
	}
}

// Interactive reports whether a sign-in can reach a user here: $BROWSER is
// set, or stderr is a terminal.
func Interactive(getenv func(string) string, terminal bool) bool {
	return strings.TrimSpace(getenv("BROWSER")) != "" || terminal
}
