package actors

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestSessionsEvictOnlyOwn: at the global cap, a principal's new session
// evicts only that principal's own idle session; with none, it fails, and
// the other principal's idle session lives on.
func TestSessionsEvictOnlyOwn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := startSessions(t, testConfig(&pipeLauncher{script: noSandbox}), 2)
		alice, err := m.Get(ctx, SessionKey("alice", "default"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Get(ctx, SessionKey("bob", "default")); err != nil {
			t.Fatal(err)
		}
		// bob is at the cap with one idle session of his own: it goes.
		if _, err := m.Get(ctx, SessionKey("bob", "second")); err != nil {
			t.Fatalf("bob's second session: %v", err)
		}
		select {
		case <-alice.Done():
			t.Fatal("bob's new session evicted alice's session")
		default:
		}
		// carol has no session to evict: she is refused, and nobody's goes.
		_, err = m.Get(ctx, SessionKey("carol", "default"))
		if err == nil || !strings.Contains(err.Error(), "MCP_BRIDGE_MAX_SESSIONS") {
			t.Fatalf("carol at the cap: %v, want too many sessions", err)
		}
		select {
		case <-alice.Done():
			t.Fatal("carol's new session evicted alice's session")
		default:
		}
		if got := m.Counts(); got["alice"] != 1 || got["bob"] != 1 || got["carol"] != 0 {
			t.Errorf("counts = %v, want alice 1, bob 1", got)
		}
	})
}

// TestSessionsPerPrincipalCap: a principal at its own cap evicts its own
// idle session, however far the global cap is.
func TestSessionsPerPrincipalCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		sup := quietSupervisor("sessions-test")
		m := NewSessions(testConfig(&pipeLauncher{script: noSandbox}), sup, 10, 0)
		m.PerPrincipal = 1
		sup.Add(m)
		serveUntilCleanup(t, sup)
		first, err := m.Get(ctx, SessionKey("alice", "a"))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := m.Get(ctx, SessionKey("bob", "a")); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Get(ctx, SessionKey("alice", "b")); err != nil {
			t.Fatal(err)
		}
		<-first.Done() // alice's own idle session made room
		if got := m.Counts(); got["alice"] != 1 || got["bob"] != 1 {
			t.Errorf("counts = %v, want alice 1, bob 1", got)
		}
	})
}

// TestSessionKeysDoNotCollide: the same session name of two principals is
// two sessions, and no session name reaches another principal's key.
func TestSessionKeysDoNotCollide(t *testing.T) {
	for _, c := range []struct{ p1, n1, p2, n2 string }{
		{"alice", "default", "bob", "default"},
		{"a", "b.c", "a.b", "c"},
		{"", "alice/default", "alice", "default"},
	} {
		k1, k2 := SessionKey(c.p1, c.n1), SessionKey(c.p2, c.n2)
		if k1 == k2 && sessionRe.MatchString(c.n1) && sessionRe.MatchString(c.n2) {
			t.Errorf("(%q,%q) and (%q,%q) share key %q", c.p1, c.n1, c.p2, c.n2, k1)
		}
	}
	if p, n := splitKey(SessionKey("alice", "x.y")); p != "alice" || n != "x.y" {
		t.Errorf("splitKey = %q %q", p, n)
	}
}

func TestPolicyCheckForPrincipal(t *testing.T) {
	p, err := NewPolicy("bridge.policy", 0, map[string]ServerPolicy{"github": {Deny: []string{"delete_*"}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.WithPrincipals(map[string]map[string]ServerPolicy{
		"alice": {"github": {Allow: []string{"get_*", "delete_repo"}}},
	}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		principal, server, tool string
		ok                      bool
	}{
		{"alice", "github", "get_issue", true},
		{"alice", "github", "create_issue", false}, // not in her grant
		{"alice", "github", "delete_repo", false},  // her grant cannot lift the top-level deny
		{"alice", "fetch", "fetch", false},         // a server not granted to her
		{"bob", "github", "create_issue", true},    // no grants: top-level rules only
		{"bob", "github", "delete_repo", false},
		{"", "fetch", "fetch", true},
	} {
		err := p.CheckFor(c.principal, c.server, c.tool)
		if got := err == nil; got != c.ok {
			t.Errorf("CheckFor(%q, %s.%s) = %v, want ok %v", c.principal, c.server, c.tool, err, c.ok)
		}
	}
	if err := p.WithPrincipals(map[string]map[string]ServerPolicy{"eve": {"x": {Allow: []string{"["}}}}); err == nil || !strings.Contains(err.Error(), `principal "eve"`) {
		t.Errorf("bad pattern: %v, want an error naming the principal", err)
	}
}

func TestStoreForPrincipal(t *testing.T) {
	shared := &memStore{}
	own := map[string]Store{"alice": &memStore{}}
	r := &Router{Store: shared}
	if r.storeFor("alice") != nil {
		t.Error("a principal got the shared store without StoreFor")
	}
	r.StoreFor = func(p string) Store { return own[p] }
	if r.storeFor("") != shared || r.storeFor("alice") != own["alice"] {
		t.Error("storeFor picked the wrong store")
	}
}

// memStore is a Store that is never called.
type memStore struct{ Store }

// TestSessionsGetKeepsRecency: a Get of a live session, answered without
// the manager, still counts as a use: the least recently used idle session
// is the one evicted at the cap.
func TestSessionsGetKeepsRecency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := startSessions(t, testConfig(&pipeLauncher{script: noSandbox}), 2)
		get := func(name string) *Session {
			t.Helper()
			s, err := m.Get(ctx, SessionKey("alice", name))
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
			return s
		}
		a, b := get("a"), get("b")
		if got := get("a"); got != a {
			t.Fatal("a second Get of a live session returned another actor")
		}
		get("c") // at the cap: b is the least recently used
		synctest.Wait()
		if !isClosed(b.Done()) || isClosed(a.Done()) {
			t.Fatalf("evicted: a %v, b %v; want b only", isClosed(a.Done()), isClosed(b.Done()))
		}
	})
}
