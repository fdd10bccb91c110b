package actors

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/thejerf/suture/v4"
)

// testPairs is a pool of pairs under a running supervisor; each pair's spec
// names its principal in URL, so a test can tell whose spec a client got.
func testPairs(t *testing.T, max int, idle time.Duration) (*identities, *time.Time) {
	t.Helper()
	sup := suture.NewSimple("pairs")
	ctx, cancel := context.WithCancel(context.Background())
	done := sup.ServeBackground(ctx)
	t.Cleanup(func() {
		cancel()
		<-done
	})
	spec := ServerSpec{Name: "gh", Type: "http", URL: "https://gh/mcp"}
	spec.ForPrincipal = func(p string) ServerSpec {
		s := spec
		s.URL, s.ForPrincipal = "https://gh/mcp#"+p, nil
		return s
	}
	deps := &ClientDeps{StartTimeout: time.Second, CallTimeout: time.Second, IdleTimeout: idle, Store: noStore{}, Log: zerolog.Nop(),
		MaxIdentityConns: max}
	p := newIdentities(spec, deps, sup)
	now := time.Unix(1_000_000, 0)
	p.now = func() time.Time { return now }
	return p, &now
}

func TestIdentitiesLease(t *testing.T) {
	p, now := testPairs(t, 2, time.Hour)
	a, releaseA, err := p.lease("alice")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := a.Spec().URL, "https://gh/mcp#alice"; got != want {
		t.Errorf("alice's client spec URL = %q, want %q", got, want)
	}
	again, release2, _ := p.lease("alice")
	if again != a {
		t.Error("a second lease of alice made a second connection")
	}
	release2()
	b, releaseB, _ := p.lease("bob")
	if b == a || b.Spec().URL != "https://gh/mcp#bob" {
		t.Errorf("bob got %q", b.Spec().URL)
	}
	// At the cap with both held: refused, naming the setting.
	if _, _, err := p.lease("carol"); err == nil || !strings.Contains(err.Error(), "MCP_BRIDGE_MAX_IDENTITY_CONNS") {
		t.Errorf("over the cap with every pair held: %v", err)
	}
	// bob released, then alice: bob is the least recently used idle pair
	// and goes for carol.
	*now = now.Add(time.Second)
	releaseB()
	*now = now.Add(time.Second)
	releaseA()
	c, releaseC, err := p.lease("carol")
	if err != nil || c.Spec().URL != "https://gh/mcp#carol" {
		t.Fatalf("carol: %v", err)
	}
	releaseC()
	if p.existing("bob") != nil || p.existing("alice") != a {
		t.Error("the cap dropped the wrong pair")
	}
	if why, _ := b.removed.Load().(string); !strings.Contains(why, "principal bob was closed") {
		t.Errorf("bob's dropped client says %q", why)
	}
	// A sign-out forgets alice's pair: her next lease is a new client.
	p.forget("alice")
	a2, release, _ := p.lease("alice")
	release()
	if a2 == a {
		t.Error("alice's pair survived her sign-out")
	}
	// Idle pairs go at the next lease.
	*now = now.Add(2 * time.Hour)
	_, release, _ = p.lease("dave")
	release()
	if got := p.live(); got != 1 {
		t.Errorf("live pairs after the idle time = %d, want 1 (dave)", got)
	}
	// A removed server fails every later lease with why.
	p.retire("Server 'gh' was removed from the configuration")
	if _, _, err := p.lease("alice"); err == nil || err.Error() != "Server 'gh' was removed from the configuration" {
		t.Errorf("lease after retire: %v", err)
	}
}

func TestUnionTools(t *testing.T) {
	old := []ToolInfo{{Name: "a", Description: "1"}, {Name: "b"}}
	got := unionTools(old, []ToolInfo{{Name: "c"}, {Name: "a", Description: "2"}})
	var names []string
	for _, tl := range got {
		names = append(names, tl.Name+tl.Description)
	}
	if strings.Join(names, ",") != "a2,b,c" {
		t.Errorf("union = %v, want a2,b,c", names)
	}
}
