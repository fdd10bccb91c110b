package actors

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/actors/mcpwire"
)

// scriptedDial is ClientDeps.dial for a server that answers each request
// with the frame reply returns for it (its id and method given; "" answers
// nothing), over net.Pipe.
func scriptedDial(wg *sync.WaitGroup, reply func(id json.RawMessage, method string) string) func(context.Context, *serverConn) error {
	return func(_ context.Context, conn *serverConn) error {
		hostR, serverW := net.Pipe()
		serverR, hostW := net.Pipe()
		wg.Add(1)
		go func() {
			defer wg.Done()
			serveScript(serverR, serverW, reply)
		}()
		conn.tr = mcpwire.New(hostR, hostW, mcpwire.Options{Server: conn.name, Log: zerolog.Nop()})
		conn.mc = client.NewClient(conn.tr)
		conn.cancel = func() {
			for _, c := range []net.Conn{hostR, hostW, serverR, serverW} {
				_ = c.Close()
			}
		}
		return conn.mc.Start(context.Background())
	}
}

func serveScript(r io.Reader, w io.Writer, reply func(id json.RawMessage, method string) string) {
	in := bufio.NewScanner(r)
	for in.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(in.Bytes(), &req) != nil || req.ID == nil {
			continue
		}
		if frame := reply(req.ID, req.Method); frame != "" {
			if _, err := io.WriteString(w, frame+"\n"); err != nil {
				return
			}
		}
	}
}

// TestStartRefusedByServerIsOneError: a server that refuses initialize with
// an error whose Go form is uncomparable (mcp-go's
// UnsupportedProtocolVersionError and URLElicitationRequiredError carry
// slices) fails its start with one line; before issue 34 the comparison
// with it panicked the start goroutine and ended the process.
func TestStartRefusedByServerIsOneError(t *testing.T) {
	for _, tc := range []struct {
		name, errFrame, want string
	}{
		{"unsupported version", `{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"],"requested":"2025-11-25"}}`,
			"it refused initialize for MCP 2025-11-25 (-32022), and its server/discover for 2026-07-28 failed too"},
		{"unsupported version, junk data", `{"code":-32022,"message":"no","data":[1,{"x":null},"s"]}`, "and supports only another version (-32022)"},
		{"url elicitation required", `{"code":-32042,"message":"sign in","data":{"elicitations":[{"mode":"url","url":"https://example.com","message":"m","elicitationId":"e"}]}}`,
			"it asked for a sign-in through a URL before it would initialize (-32042)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var wg sync.WaitGroup
			defer wg.Wait()
			dial := scriptedDial(&wg, func(id json.RawMessage, method string) string {
				return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":%s}`, id, tc.errFrame)
			})
			deps := &ClientDeps{StartTimeout: 5 * time.Second, CallTimeout: 5 * time.Second, Store: knownStore{},
				OnTools: func(string, string, []ToolInfo) {}, Log: zerolog.Nop(), dial: dial}
			c := NewClient(ServerSpec{Name: "modern", Type: "stdio", Hash: "m"}, deps)
			sup := quietSupervisor("client-test")
			sup.Add(c)
			serveUntilCleanup(t, sup)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := c.Tools(ctx)
			if err == nil {
				t.Fatal("the start succeeded; want a start error")
			}
			got := err.Error()
			if !strings.Contains(got, "Server 'modern' failed to start") || !strings.Contains(got, tc.want) || strings.Contains(got, "\n") {
				t.Errorf("start error = %q, want one line naming the server and %q", got, tc.want)
			}
		})
	}
}
