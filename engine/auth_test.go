package engine

import (
	"bytes"
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/bridge-mcp/bridge/engine/config"
	"github.com/bridge-mcp/bridge/engine/oauth"
)

// TestAuthStateNoSignIn: an http server that never challenges is "no
// sign-in needed" in doctor's terms, and with a token stored for it,
// "signed in" with the token's expiry.
func TestAuthStateNoSignIn(t *testing.T) {
	s := server.NewMCPServer("open", "1", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("hello"), func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("hi"), nil
	})
	h := server.NewStreamableHTTPServer(s)
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer func() { _ = h.Shutdown(context.Background()) }()

	en := config.Entry{Name: "open", Type: config.TypeHTTP, URL: srv.URL + "/mcp"}
	store := oauth.NewStore(t.TempDir(), bytes.Repeat([]byte{7}, 32))
	if got := oauthState(context.Background(), en, store); got.State != "no sign-in needed" || got.Fix != "" {
		t.Errorf("a server that never challenges: %+v, want no sign-in needed", got)
	}
	until := time.Now().Add(time.Hour)
	if err := store.Save(&oauth.Record{Server: "open", Resource: srv.URL + "/mcp", AccessToken: "tok", ExpiresAt: until}); err != nil {
		t.Fatal(err)
	}
	got := oauthState(context.Background(), en, store)
	if want := "until " + until.Local().Format("2006-01-02 15:04"); got.State != "signed in" || got.Detail != want {
		t.Errorf("with a stored token: %+v, want signed in %s", got, want)
	}
}
