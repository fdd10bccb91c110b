package actors

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"
)

// needsSignIn is engine/oauth's RequiredError as actors see it.
type needsSignIn struct{}

func (needsSignIn) Error() string { return "Server 'pipe' needs sign-in: run: bridge auth login pipe" }
func (needsSignIn) Fix() string   { return "bridge auth login pipe" }

// refusing is a transport whose every request needs a sign-in, like an
// http server's 401 answered without a token.
type refusing struct{}

func (refusing) Start(context.Context) error { return nil }
func (refusing) SendRequest(context.Context, transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
	return nil, needsSignIn{}
}
func (refusing) SendNotification(context.Context, mcp.JSONRPCNotification) error { return nil }
func (refusing) SetNotificationHandler(func(mcp.JSONRPCNotification))            {}
func (refusing) Close() error                                                    { return nil }
func (refusing) GetSessionId() string                                            { return "" }

// TestClientSignsInThroughTheCall: a start that needs sign-in (in the
// background, where no one can be asked) is signed in by the first use
// whose call has a client that opens links, once per call, and the server
// then starts; a call whose client cannot open links fails naming the fix
// and signs nothing in.
func TestClientSignsInThroughTheCall(t *testing.T) {
	for _, tc := range []struct {
		name     string
		url      bool
		accepts  bool // the sign-in succeeds
		wantErr  bool
		wantSign int32
	}{
		{"client opens links", true, true, false, 1},
		{"sign-in fails: tried once per call", true, false, true, 1},
		{"client cannot open links", false, true, true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := newPipeServers()
				var signedIn atomic.Bool
				var signIns atomic.Int32
				deps := &ClientDeps{StartTimeout: 5 * time.Second, CallTimeout: 5 * time.Second, Store: noStore{}, OnTools: func(string, string, []ToolInfo) {}, Log: zerolog.Nop(),
					dial: func(ctx context.Context, conn *serverConn) error {
						if signedIn.Load() {
							return p.dial(ctx, conn)
						}
						conn.tr = refusing{}
						conn.mc = client.NewClient(conn.tr)
						conn.cancel = func() {}
						return nil
					}}
				spec := ServerSpec{Name: "pipe", Type: "http", Hash: "p", SignIn: func(ctx context.Context) error {
					if !CanAskURL(ctx) {
						t.Error("SignIn ran for a call that cannot open links")
					}
					signIns.Add(1)
					if !tc.accepts {
						return needsSignIn{}
					}
					signedIn.Store(true)
					return nil
				}}
				c := NewClient(spec, deps)
				sup := quietSupervisor("signin-test")
				sup.Add(c)
				sctx, cancel := context.WithCancel(context.Background())
				errc := sup.ServeBackground(sctx)
				defer func() { cancel(); <-errc; p.wg.Wait() }()

				src := &noteSink{asks: newApprovals(&fakeHuman{caps: HumanCaps{Form: true, URL: tc.url}})}
				ctx := withInner(context.Background(), "pipe", "", src)
				for range 2 { // two uses in one call: at most one sign-in
					_, err := c.Ready(ctx)
					if gotErr := err != nil; gotErr != tc.wantErr {
						t.Fatalf("Ready: %v, want error %v", err, tc.wantErr)
					}
					if err != nil && !errors.As(err, new(needsSignIn)) {
						t.Errorf("Ready: %v, want the sign-in error naming the fix", err)
					}
				}
				if got := signIns.Load(); got != tc.wantSign {
					t.Errorf("%d sign-ins, want %d", got, tc.wantSign)
				}
			})
		})
	}
}

// TestDialSignInNamesFix: a sign-in needed to open the connection itself
// (an SSE server's stream) fails the start with the sign-in's line, not
// "failed to start … last stderr: (none)" (issue 36).
func TestDialSignInNamesFix(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		deps := &ClientDeps{StartTimeout: 5 * time.Second, CallTimeout: 5 * time.Second, Store: noStore{}, OnTools: func(string, string, []ToolInfo) {}, Log: zerolog.Nop(),
			dial: func(context.Context, *serverConn) error {
				return fmt.Errorf("failed to connect to SSE stream: %w", needsSignIn{})
			}}
		c := NewClient(ServerSpec{Name: "pipe", Type: "sse", Hash: "p"}, deps)
		sup := quietSupervisor("signin-test")
		sup.Add(c)
		sctx, cancel := context.WithCancel(context.Background())
		errc := sup.ServeBackground(sctx)
		defer func() { cancel(); <-errc }()
		_, err := c.Ready(context.Background())
		if err == nil || !errors.As(err, new(needsSignIn)) || strings.Contains(err.Error(), "failed to start") {
			t.Errorf("Ready: %v, want the sign-in error naming the fix", err)
		}
	})
}
