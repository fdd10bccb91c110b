package actors

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestSessionsEvictOnlyOwn: at the global cap, a principal's new session
// evicts that principal's own idle session; only a principal with no live
// session may end another's, the least recently used idle one of the
// principal holding the most (issue 36: one principal held every slot).
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
		// carol has no live session: she may end the least recently used
		// idle session of the principal holding the most (a tie between
		// alice and bob goes by name), and alice's next result says why.
		if _, err := m.Get(ctx, SessionKey("carol", "default")); err != nil {
			t.Fatalf("carol's first session at the cap: %v", err)
		}
		select {
		case <-alice.Done():
		case <-time.After(time.Minute):
			t.Fatal("carol's first session ended nobody's")
		}
		if got := m.Counts(); got["alice"] != 0 || got["bob"] != 1 || got["carol"] != 1 {
			t.Errorf("counts = %v, want bob 1, carol 1", got)
		}
		why := m.lost[SessionKey("alice", "default")]
		if !strings.Contains(why, "another principal could start its first session (MCP_BRIDGE_MAX_SESSIONS=2)") {
			t.Errorf("alice's loss: %q", why)
		}
		// carol, now with a session, ends only her own.
		if _, err := m.Get(ctx, SessionKey("carol", "second")); err != nil {
			t.Fatal(err)
		}
		if got := m.Counts(); got["bob"] != 1 || got["carol"] != 1 {
			t.Errorf("counts = %v, want bob 1, carol 1", got)
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
	if err := p.WithPrincipals(map[string]PrincipalRules{
		"alice": {Servers: map[string]ServerPolicy{"github": {Allow: []string{"get_*", "delete_repo"}}}},
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
	if err := p.WithPrincipals(map[string]PrincipalRules{"eve": {Servers: map[string]ServerPolicy{"x": {Allow: []string{"["}}}}}); err == nil || !strings.Contains(err.Error(), `principal "eve"`) {
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

// TestPrincipalRulesEveryKey: every key of the policy holds at the
// principal level as at the top level, for the principal it names only
// (issue 36): deny denies, allow narrows, approve and approveDestructive
// gate, resources false refuses, and the smaller timeout and
// maxToolCallsPerExecution win.
func TestPrincipalRulesEveryKey(t *testing.T) {
	yes, no := true, false
	destructiveAnn := []byte(`{"destructiveHint":true}`)
	type facts struct {
		check, resources bool // allowed
		gate             string
		timeout          time.Duration
		maxCalls         int
	}
	// what returns the facts bob gets for x.drop (destructive).
	what := func(p *Policy, who string) facts {
		d, _ := p.TimeoutFor(who, "x", "drop")
		return facts{
			check:     p.CheckFor(who, "x", "drop") == nil,
			resources: p.ResourcesAllowedFor(who, "x") == nil,
			gate:      p.GateFor(who, "x", "drop", destructiveAnn),
			timeout:   d,
			maxCalls:  p.MaxCallsFor(who),
		}
	}
	open := facts{check: true, resources: true, timeout: 0, maxCalls: 0}
	tests := []struct {
		key  string
		rule PrincipalRules // at the top level: Servers, MaxCalls, ApproveDestructive
		want func(f facts, at string) facts
	}{
		{"deny", PrincipalRules{Servers: map[string]ServerPolicy{"x": {Deny: []string{"drop"}}}},
			func(f facts, _ string) facts { f.check = false; return f }},
		{"allow", PrincipalRules{Servers: map[string]ServerPolicy{"x": {Allow: []string{"get"}}}},
			func(f facts, _ string) facts { f.check = false; return f }},
		{"approve", PrincipalRules{Servers: map[string]ServerPolicy{"x": {Approve: []string{"drop"}}}},
			func(f facts, at string) facts { f.gate = "approve in " + at + "servers.x"; return f }},
		{"servers.x.approveDestructive", PrincipalRules{Servers: map[string]ServerPolicy{"x": {ApproveDestructive: &yes}}},
			func(f facts, at string) facts {
				f.gate = "approveDestructive in " + at + "servers.x (the tool's annotations say destructiveHint: true)"
				return f
			}},
		{"approveDestructive", PrincipalRules{ApproveDestructive: true, Servers: map[string]ServerPolicy{"x": {}}},
			func(f facts, at string) facts {
				f.gate = at + "approveDestructive (the tool's annotations say destructiveHint: true)"
				return f
			}},
		{"resources", PrincipalRules{Servers: map[string]ServerPolicy{"x": {Resources: &no}}},
			func(f facts, _ string) facts { f.resources = false; return f }},
		{"timeouts", PrincipalRules{Servers: map[string]ServerPolicy{"x": {Timeouts: map[string]float64{"drop": 2}}}},
			func(f facts, _ string) facts { f.timeout = 2 * time.Second; return f }},
		{"maxToolCallsPerExecution", PrincipalRules{MaxCalls: 3, Servers: map[string]ServerPolicy{"x": {}}},
			func(f facts, _ string) facts { f.maxCalls = 3; return f }},
	}
	for _, tt := range tests {
		for _, level := range []string{"top", "principal"} {
			var p *Policy
			var err error
			// bob's own rules grant x; alice has none of her own.
			bob := PrincipalRules{Servers: map[string]ServerPolicy{"x": {}}}
			if level == "top" {
				p, err = NewPolicy("bridge.policy", tt.rule.MaxCalls, tt.rule.Servers)
				if err == nil {
					p.ApproveDestructive = tt.rule.ApproveDestructive
				}
			} else {
				p, err = NewPolicy("bridge.policy", 0, nil)
				bob = tt.rule
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := p.WithPrincipals(map[string]PrincipalRules{"bob": bob}); err != nil {
				t.Fatal(err)
			}
			at := ""
			if level == "principal" {
				at = "principals.bob."
			}
			if got, want := what(p, "bob"), tt.want(open, at); got != want {
				t.Errorf("%s at the %s level: bob gets %+v, want %+v", tt.key, level, got, want)
			}
			wantAlice := open
			if level == "top" {
				wantAlice = tt.want(open, "")
			}
			if got := what(p, "alice"); got != wantAlice {
				t.Errorf("%s at the %s level: alice gets %+v, want %+v", tt.key, level, got, wantAlice)
			}
		}
	}
	// The smaller of two timeouts and caps wins, whichever level has it.
	p, _ := NewPolicy("bridge.policy", 5, map[string]ServerPolicy{"x": {Timeouts: map[string]float64{"*": 9}}})
	_ = p.WithPrincipals(map[string]PrincipalRules{"bob": {MaxCalls: 10, Servers: map[string]ServerPolicy{"x": {Timeouts: map[string]float64{"drop": 4}}}}})
	if d, _ := p.TimeoutFor("bob", "x", "drop"); d != 4*time.Second || p.MaxCallsFor("bob") != 5 {
		t.Errorf("smaller wins: timeout %v, cap %d; want 4s and 5", d, p.MaxCallsFor("bob"))
	}
	// A server bob's rules do not name is refused, its resources too.
	if p.CheckFor("bob", "y", "get") == nil || p.ResourcesAllowedFor("bob", "y") == nil {
		t.Error("an ungranted server: tool call or resources allowed to bob")
	}
}

// TestPolicySummary: doctor's policy line names the approvals in force, at
// both levels, with the counts in words.
func TestPolicySummary(t *testing.T) {
	off := false
	p, err := NewPolicy("bridge.policy", 0, map[string]ServerPolicy{
		"memory": {Approve: []string{"create_*", "delete_*"}},
		"fs":     {ApproveDestructive: &off},
	})
	if err != nil {
		t.Fatal(err)
	}
	p.ApproveDestructive = true
	_ = p.WithPrincipals(map[string]PrincipalRules{"bob": {MaxCalls: 3, Servers: map[string]ServerPolicy{"gh": {Approve: []string{"merge"}}}}})
	got := p.Summary()
	want := "rules for 2 servers and 1 principal; approval asked for memory.create_*, memory.delete_*, destructive tools (approveDestructive, except on fs), " +
		"principal bob: gh.merge; no cap on tool calls per execution"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	none, _ := NewPolicy("bridge.policy", 5, map[string]ServerPolicy{"x": {Deny: []string{"*"}}})
	if got, want := none.Summary(), "rules for 1 server; no call needs approval; at most 5 tool calls per execution"; got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
