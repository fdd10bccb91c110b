package actors

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/bridge-mcp/bridge/protocol"
	"github.com/bridge-mcp/bridge/protocol/result"
)

// TestGrantEntries: a granted server's entry is built once per tool list:
// the same list gives the same entry, and a new list (a refresh makes a
// new slice), another alias or another description a new digest.
func TestGrantEntries(t *testing.T) {
	var g grantEntries
	c := &Client{}
	spec := ServerSpec{Name: "demo", Alias: "demo"}
	tools := []ToolInfo{{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	first := g.server(spec, c, tools)
	if first.Digest == "" || len(first.Tools) != 1 || first.Tools[0].Alias != "echo" {
		t.Fatalf("first entry: %+v", first)
	}
	if again := g.server(spec, c, tools); again.Digest != first.Digest || &again.Tools[0] != &first.Tools[0] {
		t.Errorf("same tool list: rebuilt (%s, %s)", again.Digest, first.Digest)
	}
	// The same content in a new list is rebuilt, to the same digest.
	same := append([]ToolInfo(nil), tools...)
	if got := g.server(spec, c, same); got.Digest != first.Digest || &got.Tools[0] == &first.Tools[0] {
		t.Errorf("a new list of the same tools: digest %s, want %s, rebuilt", got.Digest, first.Digest)
	}
	changed := []ToolInfo{{Name: "echo", Description: "now described", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	renamed := spec
	renamed.Alias = "demo_2"
	described := spec
	described.Description = "a server"
	for name, got := range map[string]protocol.Server{
		"tools":       g.server(spec, c, changed),
		"alias":       g.server(renamed, c, changed),
		"description": g.server(described, c, changed),
	} {
		if got.Digest == first.Digest {
			t.Errorf("another %s: the same digest %s", name, got.Digest)
		}
	}
}

// TestKeptEntries: an exec frame names by digest alone the entries of the
// frame sent before it, and sends the rest, and those without a digest,
// in full.
func TestKeptEntries(t *testing.T) {
	a := protocol.Server{Name: "a", Alias: "a", Digest: "da", Tools: []protocol.Tool{{Name: "x"}}}
	b := protocol.Server{Name: "b", Alias: "b", Digest: "db", Tools: []protocol.Tool{{Name: "y"}}}
	broken := protocol.Server{Name: "c", Alias: "c", Error: "failed to start"}
	ref := func(s protocol.Server) protocol.Server {
		return protocol.Server{Name: s.Name, Alias: s.Alias, Digest: s.Digest, Cached: true}
	}
	var k keptEntries
	steps := []struct {
		name          string
		servers, want []protocol.Server
		forget        bool
	}{
		{"first frame", []protocol.Server{a, broken}, []protocol.Server{a, broken}, false},
		{"a again", []protocol.Server{a, b, broken}, []protocol.Server{ref(a), b, broken}, false},
		{"both kept", []protocol.Server{b, a}, []protocol.Server{ref(b), ref(a)}, false},
		{"none", nil, nil, false},
		{"after none", []protocol.Server{a}, []protocol.Server{a}, false},
		{"after a stale answer", []protocol.Server{a}, []protocol.Server{a}, true},
	}
	for _, s := range steps {
		if s.forget {
			k.forget()
		}
		got := k.frame(s.servers)
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(s.want)
		if string(gj) != string(wj) {
			t.Errorf("%s: got %s, want %s", s.name, gj, wj)
		}
		k.sent(s.servers)
	}
	if a.Cached || len(a.Tools) != 1 {
		t.Errorf("frame changed its input: %+v", a)
	}
}

// TestStaleServersResent: a call's exec frame names the server entry of
// the frame before it by digest; a worker that answers that it does not
// keep it (CodeStaleServers) gets the frame again in full, and the call
// succeeds, as if the frame had been full at first.
func TestStaleServersResent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, forgets := range []bool{false, true} {
			l := &pipeLauncher{script: func(int64) boxScript { return boxScript{forgets: forgets} }}
			m := startSessions(t, testConfig(l), 1)
			s, err := m.Get(context.Background(), "s")
			if err != nil {
				t.Fatal(err)
			}
			entry := protocol.Server{Name: "a", Alias: "a", Digest: "da", Tools: []protocol.Tool{{Name: "x", Alias: "x"}}}
			for range 2 {
				req := newRequest(context.Background(), 10*time.Second)
				req.Servers = []protocol.Server{entry}
				if !s.Exec(context.Background(), req) {
					t.Fatal("Exec refused")
				}
				if r := <-req.Reply; r.Status != result.StatusSuccess {
					t.Fatalf("forgets %v: %+v", forgets, r)
				}
			}
			full, _ := json.Marshal([]protocol.Server{entry})
			ref := `[{"name":"a","alias":"a","tools":null,"digest":"da","cached":true}]`
			want := []string{string(full), ref}
			if forgets {
				want = append(want, string(full))
			}
			if got := l.box(0).servers(); !slices.Equal(got, want) {
				t.Errorf("forgets %v: exec frames' servers\n got %q\nwant %q", forgets, got, want)
			}
		}
	})
}
