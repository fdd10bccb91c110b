package actors

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/protocol"
)

// startScript is how one fake server's start goes: it takes delay, then
// comes up (serving echo over a pipe), fails, or hangs until the start is
// abandoned.
type startScript struct {
	delay   time.Duration
	outcome string // "up", "fail" or "hang"
}

// scriptedStarts is ClientDeps.dial for fake-time search tests: every
// server's start follows its script, by server name.
type scriptedStarts struct {
	pipes   *pipeServers
	scripts map[string]startScript
}

func (s *scriptedStarts) dial(ctx context.Context, conn *serverConn) error {
	sc := s.scripts[conn.name]
	if sc.outcome == "hang" {
		<-ctx.Done()
		return ctx.Err()
	}
	select {
	case <-time.After(sc.delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	if sc.outcome == "fail" {
		return errors.New("boom")
	}
	return s.pipes.dial(ctx, conn)
}

// TestSearchWaitsForStartingServers: search waits for the servers that are
// starting and not yet hung, against one 2 s deadline for the whole search,
// and covers those that come up; hung and failing servers are answered at
// once. Every server starts with the bridge; the search comes after.
func TestSearchWaitsForStartingServers(t *testing.T) {
	const again = "; search again in a few seconds"
	cases := []struct {
		name    string
		servers map[string]startScript
		known   []string      // servers whose catalog the router already holds
		after   time.Duration // the search comes this long after the bridge started
		// want: the servers search covers, how long it took, and the
		// uncovered ones' states (a trailing "*" matches any rest).
		covered   []string
		took      time.Duration
		uncovered map[string]string
	}{
		{
			name:    "fresh start within the wait",
			servers: map[string]startScript{"a": {time.Second, "up"}},
			covered: []string{"a"}, took: time.Second, uncovered: map[string]string{},
		},
		{
			name:    "a slow first start (npx -y) still answers after the wait",
			servers: map[string]startScript{"a": {30 * time.Second, "up"}},
			took:    searchWait, uncovered: map[string]string{"a": "starting" + again},
		},
		{
			name: "one deadline for all, never one per server",
			servers: map[string]startScript{
				"a": {1500 * time.Millisecond, "up"}, "b": {1900 * time.Millisecond, "up"},
				"c": {30 * time.Second, "up"}, "d": {2500 * time.Millisecond, "up"}, "e": {30 * time.Second, "up"},
			},
			covered: []string{"a", "b"}, took: searchWait,
			uncovered: map[string]string{"c": "starting" + again, "d": "starting" + again, "e": "starting" + again},
		},
		{
			name:    "hung: answered at once",
			servers: map[string]startScript{"h": {0, "hang"}},
			after:   5 * time.Second, took: 0,
			uncovered: map[string]string{"h": "hung: not answering initialize after 5s" + again},
		},
		{
			name:    "a start that turns hung during the wait ends it",
			servers: map[string]startScript{"h": {0, "hang"}},
			after:   2500 * time.Millisecond, took: 500 * time.Millisecond,
			uncovered: map[string]string{"h": "hung: not answering initialize after 3s" + again},
		},
		{
			name:    "failing: answered at once",
			servers: map[string]startScript{"f": {0, "fail"}},
			after:   200 * time.Millisecond, took: 0,
			uncovered: map[string]string{"f": "failed to start: *"},
		},
		{
			name:    "a start that fails during the wait ends it",
			servers: map[string]startScript{"f": {time.Second, "fail"}},
			took:    time.Second, uncovered: map[string]string{"f": "failed to start: *"},
		},
		{
			name: "failing and hung beside one starting",
			servers: map[string]startScript{
				"a": {4 * time.Second, "up"}, "f": {0, "fail"}, "h": {0, "hang"},
			},
			// f failed at its start, and the search's own kick starts it
			// again at the same instant of the bubble: which goroutine
			// runs first then is not fixed, so f is failed or starting
			// (seen 4 times in 300 runs). Either way the search does not
			// wait for it.
			after: 3250 * time.Millisecond, took: 0,
			uncovered: map[string]string{
				"a": "hung: not answering initialize after 3s" + again,
				"f": "failed to start: *|starting" + again,
				"h": "hung: not answering initialize after 3s" + again,
			},
		},
		{
			name:    "failing beside one starting: only the starting one is waited for",
			servers: map[string]startScript{"a": {time.Second, "up"}, "f": {0, "fail"}},
			after:   200 * time.Millisecond, covered: []string{"a"}, took: 800 * time.Millisecond,
			uncovered: map[string]string{"f": "failed to start: *"},
		},
		{
			name:    "a server with a catalog is not waited for",
			servers: map[string]startScript{"k": {0, "hang"}},
			known:   []string{"k"}, after: time.Second, covered: []string{"k"}, took: 0,
			uncovered: map[string]string{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, stop := runScriptedServers(tc.servers, tc.known)
				defer stop()
				time.Sleep(tc.after)
				start := time.Now()
				raw, err := r.ServeSandbox(context.Background(), Scope{}, protocol.MethodSearchToolDocs,
					json.RawMessage(`{"query":"echo","limit":20,"detail":"name"}`))
				took := time.Since(start)
				if err != nil {
					t.Fatal(err)
				}
				got := raw.(map[string]any)
				var covered []string
				for _, d := range got["results"].([]any) {
					covered = append(covered, d.(toolDoc).Server)
				}
				slices.Sort(covered)
				if !slices.Equal(covered, tc.covered) {
					t.Errorf("covered %q, want %q", covered, tc.covered)
				}
				if took != tc.took {
					t.Errorf("search took %v, want %v", took, tc.took)
				}
				uncovered := got["uncovered"].(map[string]string)
				if len(uncovered) != len(tc.uncovered) {
					t.Errorf("uncovered %q, want %q", uncovered, tc.uncovered)
				}
				for name, want := range tc.uncovered {
					state := uncovered[name]
					// want is alternatives split by "|", each exact or a
					// prefix ending in "*".
					if !slices.ContainsFunc(strings.Split(want, "|"), func(w string) bool {
						prefix, any := strings.CutSuffix(w, "*")
						return state == w || any && strings.HasPrefix(state, prefix)
					}) {
						t.Errorf("%s: state %q, want %q", name, state, want)
					}
				}
			})
		})
	}
}

// runScriptedServers starts one client per script, as the bridge does at
// its start, and a router whose catalog holds the known servers' tools
// only. stop ends the clients and waits for them; both run in the bubble.
func runScriptedServers(scripts map[string]startScript, known []string) (*Router, func()) {
	starts := &scriptedStarts{pipes: newPipeServers(), scripts: scripts}
	deps := &ClientDeps{StartTimeout: 30 * time.Second, CallTimeout: 5 * time.Second,
		Store: noStore{}, OnTools: func(string, string, []ToolInfo) {}, Log: zerolog.Nop(), dial: starts.dial}
	sup := quietSupervisor("search-test")
	var specs []ServerSpec
	clients := map[string]*Client{}
	tools := map[string][]ToolInfo{}
	for name := range scripts {
		spec := ServerSpec{Name: name, Type: "stdio", Hash: name}
		specs = append(specs, spec)
		clients[name] = NewClient(spec, deps)
		sup.Add(clients[name])
		if slices.Contains(known, name) {
			tools[name] = []ToolInfo{{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}}
		}
	}
	slices.SortFunc(specs, func(a, b ServerSpec) int { return strings.Compare(a.Name, b.Name) })
	r := NewRouter()
	r.current.Store(buildCatalog(specs, clients, tools))
	ctx, cancel := context.WithCancel(context.Background())
	errc := sup.ServeBackground(ctx)
	return r, func() {
		cancel()
		<-errc
		starts.pipes.wg.Wait()
	}
}
