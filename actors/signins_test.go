package actors

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/bridge-mcp/bridge/protocol"
)

// fakeSignIns is a SignIns over fixed lists; it records every principal
// it was asked about, and signs out by removing the server's entry.
type fakeSignIns struct {
	mu    sync.Mutex
	by    map[string][]SignIn
	err   error    // SignOut's error, when set
	asked []string // "list alice", "signout alice gh"
}

func (f *fakeSignIns) List(principal string) []SignIn {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, "list "+principal)
	return append([]SignIn(nil), f.by[principal]...)
}

func (f *fakeSignIns) SignOut(principal, server string) (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, "signout "+principal+" "+server)
	if f.err != nil {
		return false, f.err
	}
	kept, found := []SignIn{}, false
	for _, s := range f.by[principal] {
		if s.Server == server {
			found = true
			continue
		}
		kept = append(kept, s)
	}
	f.by[principal] = kept
	return found, nil
}

func (f *fakeSignIns) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.asked...)
}

// signInsRouter is a router whose catalog has gh (identity: principal,
// with pairs) and wiki (shared).
func signInsRouter(t *testing.T, s SignIns) (*Router, *identities) {
	t.Helper()
	pairs, _ := testPairs(t, 4, 0)
	r := NewRouter()
	r.SignIns = s
	cat := buildCatalog([]ServerSpec{{Name: "gh"}, {Name: "wiki"}}, nil, nil)
	cat.Server("gh").pairs = pairs
	r.current.Store(cat)
	return r, pairs
}

func newFakeSignIns() *fakeSignIns {
	exp := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	return &fakeSignIns{by: map[string][]SignIn{
		"alice": {{Server: "gh", State: "signed in", Scope: "repo", Expires: exp}},
		"bob":   {{Server: "gh", State: "expired"}},
	}}
}

// TestSignIns: runtime.signins() shows the calling principal's own
// sign-ins only, never another's, and none outside bridge serve or
// without a principal.
func TestSignIns(t *testing.T) {
	for _, tc := range []struct {
		name      string
		nilStore  bool
		principal string
		want      string
		wantAsked []string
	}{
		{"alice sees hers", false, "alice", `{"signins":[{"server":"gh","state":"signed in","scope":"repo","expires":"2030-01-02T03:04:05Z"}]}`, []string{"list alice"}},
		{"bob sees his", false, "bob", `{"signins":[{"server":"gh","state":"expired"}]}`, []string{"list bob"}},
		{"carol has none", false, "carol", `{"signins":[]}`, []string{"list carol"}},
		{"no principal", false, "", `{"signins":[]}`, nil},
		{"bridge run", true, "alice", `{"signins":[]}`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSignIns()
			var s SignIns = f
			if tc.nilStore {
				s = nil
			}
			r, _ := signInsRouter(t, s)
			res, err := r.ServeSandbox(context.Background(), Scope{Principal: tc.principal}, protocol.MethodSignIns, nil)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := json.Marshal(res)
			if got := string(raw); got != tc.want {
				t.Errorf("signins = %s\nwant      %s", got, tc.want)
			}
			if got := f.calls(); strings.Join(got, "; ") != strings.Join(tc.wantAsked, "; ") {
				t.Errorf("store asked %q, want %q", got, tc.wantAsked)
			}
		})
	}
	// Params are strict, as for every method (LNK-3).
	r, _ := signInsRouter(t, newFakeSignIns())
	if _, err := r.ServeSandbox(context.Background(), Scope{Principal: "alice"}, protocol.MethodSignIns, json.RawMessage(`{"principal":"bob"}`)); err == nil {
		t.Error("signins with a principal param: no error")
	}
}

// TestSignInsSignOut: runtime.signout(server) forgets the calling principal's
// tokens and closes their connection, and no one else's; it refuses an
// unknown server, a shared one, and outside bridge serve.
func TestSignInsSignOut(t *testing.T) {
	const shared = "Server 'wiki' uses the operator's shared sign-in (identity: shared): only the operator can sign it out, with bridge auth logout wiki"
	for _, tc := range []struct {
		name      string
		nilStore  bool
		storeErr  error
		principal string
		params    string
		want      string // the result's JSON, or the error's kind: message
		wantAsked []string
		wantPairs string // the principals with a pair afterwards
	}{
		{"alice signs out", false, nil, "alice", `{"server":"gh"}`, `{"signed_out":true}`, []string{"signout alice gh"}, "bob"},
		{"carol had none", false, nil, "carol", `{"server":"gh"}`, `{"signed_out":false}`, []string{"signout carol gh"}, "alice bob"},
		{"unknown server", false, nil, "alice", `{"server":"gj"}`, "not_found: Unknown MCP server: gj; did you mean 'gh'? Known servers: gh, wiki.", nil, "alice bob"},
		{"shared server", false, nil, "alice", `{"server":"wiki"}`, "not_available: " + shared, nil, "alice bob"},
		{"bridge run", true, nil, "alice", `{"server":"gh"}`, "not_available: " + noOwnSignIns, nil, "alice bob"},
		{"no principal", false, nil, "", `{"server":"gh"}`, "not_available: " + noOwnSignIns, nil, "alice bob"},
		{"missing server", false, nil, "alice", `{}`, "invalid_arguments: Missing 'server' value", nil, "alice bob"},
		{"store fails", false, errors.New("signout: the token file could not be removed"), "alice", `{"server":"gh"}`,
			"server_error: signout: the token file could not be removed", []string{"signout alice gh"}, "alice bob"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSignIns()
			f.err = tc.storeErr
			var s SignIns = f
			if tc.nilStore {
				s = nil
			}
			r, pairs := signInsRouter(t, s)
			for _, p := range []string{"alice", "bob"} {
				_, release, err := pairs.lease(p)
				if err != nil {
					t.Fatal(err)
				}
				release()
			}
			res, err := r.ServeSandbox(context.Background(), Scope{Principal: tc.principal}, protocol.MethodSignOut, json.RawMessage(tc.params))
			var got string
			if err != nil {
				kind, msg := linkKind(t, err)
				got = kind + ": " + msg
			} else {
				raw, _ := json.Marshal(res)
				got = string(raw)
			}
			if got != tc.want {
				t.Errorf("signout = %s\nwant      %s", got, tc.want)
			}
			if got := f.calls(); strings.Join(got, "; ") != strings.Join(tc.wantAsked, "; ") {
				t.Errorf("store asked %q, want %q", got, tc.wantAsked)
			}
			var live []string
			for _, p := range []string{"alice", "bob", "carol"} {
				if pairs.existing(p) != nil {
					live = append(live, p)
				}
			}
			if got := strings.Join(live, " "); got != tc.wantPairs {
				t.Errorf("pairs afterwards: %q, want %q", got, tc.wantPairs)
			}
		})
	}
	// After alice's sign-out her next lease is a new connection; bob's is
	// the one he had.
	r, pairs := signInsRouter(t, newFakeSignIns())
	a, release, _ := pairs.lease("alice")
	release()
	b, release, _ := pairs.lease("bob")
	release()
	if _, err := r.ServeSandbox(context.Background(), Scope{Principal: "alice"}, protocol.MethodSignOut, json.RawMessage(`{"server":"gh"}`)); err != nil {
		t.Fatal(err)
	}
	a2, release, _ := pairs.lease("alice")
	release()
	b2, release, _ := pairs.lease("bob")
	release()
	if a2 == a || b2 != b {
		t.Errorf("after alice's sign-out: alice's connection new %v, bob's kept %v; want true, true", a2 != a, b2 == b)
	}
}
