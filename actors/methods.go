package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sourcegraph/jsonrpc2"

	"github.com/bridge-mcp/bridge/protocol"
	"github.com/bridge-mcp/bridge/protocol/printable"
	"github.com/bridge-mcp/bridge/protocol/search"
)

// boxHandler answers one box→host request of the call scope belongs to.
type boxHandler func(r *Router, ctx context.Context, scope Scope, params json.RawMessage) (any, error)

// boxMethods is the one table of box→host requests (SPEC §7; protocol/doc.go
// lists them). The sandbox refuses any method not in it before admitting
// the request; the router answers through it. reset and job_scope have no
// handler: the sandbox answers them for its active call.
var boxMethods = map[string]boxHandler{
	protocol.MethodDiscoveredServers: withCatalog((*Router).discoveredServers),
	protocol.MethodListServers:       withCatalog((*Router).listServers),
	protocol.MethodDescribeServer:    withCatalog((*Router).describeServer),
	protocol.MethodListTools:         withCatalog((*Router).listTools),
	protocol.MethodQueryToolDocs:     withCatalog((*Router).queryToolDocs),
	protocol.MethodSearchToolDocs:    withCatalog((*Router).searchToolDocs),
	protocol.MethodSuggestTools:      withCatalog((*Router).suggestTools),
	protocol.MethodCallTool:          withCatalog((*Router).callTool),
	// resources.go
	protocol.MethodListResources:         withCatalog((*Router).listResources),
	protocol.MethodListResourceTemplates: withCatalog((*Router).listResourceTemplates),
	protocol.MethodReadResource:          withCatalog((*Router).readResource),
	protocol.MethodReset:                 nil,
	protocol.MethodJobScope:              nil,
	protocol.MethodMemoryGet: storeMethod(protocol.MethodMemoryGet, func(s Store, p protocol.KeyParams) (any, error) {
		return s.MemoryGet(p.Key)
	}),
	protocol.MethodMemoryPut: storeMethod(protocol.MethodMemoryPut, func(s Store, p protocol.MemoryPutParams) (any, error) {
		return s.MemoryPut(p)
	}),
	protocol.MethodMemoryDelete: storeMethod(protocol.MethodMemoryDelete, func(s Store, p protocol.KeyParams) (any, error) {
		ok, err := s.MemoryDelete(p.Key)
		return map[string]bool{"deleted": ok}, err
	}),
	protocol.MethodMemoryList: storeMethod(protocol.MethodMemoryList, func(s Store, p protocol.MemoryListParams) (any, error) {
		return s.MemoryList(p)
	}),
	protocol.MethodSaveTool: storeMethod(protocol.MethodSaveTool, func(s Store, p protocol.SaveToolParams) (any, error) {
		return s.SaveTool(p)
	}),
	protocol.MethodSavedTools: storeMethod(protocol.MethodSavedTools, func(s Store, _ struct{}) (any, error) {
		tools, problems, err := s.SavedTools()
		return map[string]any{"tools": tools, "problems": problems}, err
	}),
	protocol.MethodHistory: (*Router).history,
	// signins.go
	protocol.MethodSignIns: (*Router).signIns,
	protocol.MethodSignOut: withCatalog((*Router).signOut),
	protocol.MethodDeleteTool: storeMethod(protocol.MethodDeleteTool, func(s Store, p protocol.NameParams) (any, error) {
		ok, err := s.DeleteTool(p.Name)
		return map[string]bool{"deleted": ok}, err
	}),
}

// isBoxMethod reports whether method is a box→host request the bridge
// answers.
func isBoxMethod(method string) bool {
	_, ok := boxMethods[method]
	return ok || isDurableMethod(method)
}

// withCatalog answers a catalog method against the router's current
// catalog.
func withCatalog(f func(r *Router, ctx context.Context, cat *Catalog, scope Scope, params json.RawMessage) (any, error)) boxHandler {
	return func(r *Router, ctx context.Context, scope Scope, params json.RawMessage) (any, error) {
		return f(r, ctx, r.Snapshot(), scope, params)
	}
}

// discoveredServers lists every configured server; detailed adds the
// descriptions and the config that did not load, and why.
func (r *Router) discoveredServers(ctx context.Context, cat *Catalog, scope Scope, params json.RawMessage) (any, error) {
	var p struct {
		Detailed bool `json:"detailed"`
	}
	if err := decodeParams(protocol.MethodDiscoveredServers, params, &p); err != nil {
		return nil, err
	}
	out := make([]any, 0, len(cat.Servers))
	for _, s := range cat.Servers {
		if p.Detailed {
			out = append(out, map[string]string{"name": s.Spec.Name, "alias": s.Spec.Alias, "description": s.Spec.Description})
		} else {
			out = append(out, s.Spec.Name)
		}
	}
	if p.Detailed { // what did not load, and why; a project server not yet approved says how to approve it
		for _, sk := range r.skipped() {
			d := map[string]string{"file": sk.File, "skipped": sk.Reason}
			if sk.Entry != "" {
				d["name"] = sk.Entry
			}
			out = append(out, d)
		}
	}
	return map[string]any{"servers": out}, nil
}

// listServers lists the servers the call grants.
func (r *Router) listServers(ctx context.Context, cat *Catalog, scope Scope, params json.RawMessage) (any, error) {
	if err := decodeParams(protocol.MethodListServers, params, &struct{}{}); err != nil {
		return nil, err
	}
	return map[string]any{"servers": append([]string{}, scope.Servers...)}, nil
}

// queryToolDocs renders the docs of one server's tools, or of one tool.
func (r *Router) queryToolDocs(ctx context.Context, cat *Catalog, scope Scope, params json.RawMessage) (any, error) {
	var p struct {
		Server string  `json:"server"`
		Tool   *string `json:"tool"`
		Detail string  `json:"detail"`
	}
	if err := decodeParams(protocol.MethodQueryToolDocs, params, &p); err != nil {
		return nil, err
	}
	s, err := r.known(ctx, cat, scope, p.Server)
	if err != nil {
		return nil, err
	}
	docs := []any{}
	if p.Tool == nil {
		for i := range s.Tools {
			docs = append(docs, s.doc(i, p.Detail))
		}
		return map[string]any{"docs": docs}, nil
	}
	i := s.findTool(*p.Tool, true)
	if i < 0 {
		return nil, LinkError(protocol.CodeNotFound, protocol.KindNotFound, fmt.Sprintf("Tool '%s' not found for server %s", *p.Tool, p.Server))
	}
	return map[string]any{"docs": []any{s.doc(i, p.Detail)}}, nil
}

// searchToolDocs ranks tools over every discovered server for a query.
func (r *Router) searchToolDocs(ctx context.Context, cat *Catalog, scope Scope, params json.RawMessage) (any, error) {
	var p struct {
		Query  string `json:"query"`
		Limit  int    `json:"limit"`
		Detail string `json:"detail"`
	}
	if err := decodeParams(protocol.MethodSearchToolDocs, params, &p); err != nil {
		return nil, err
	}
	if strings.TrimSpace(p.Query) == "" {
		return nil, LinkError(protocol.CodeInvalidArguments, protocol.KindInvalidArguments, "Missing 'query' value")
	}
	return r.search(ctx, cat, scope, p.Query, max(1, min(20, p.Limit)), p.Detail)
}

// suggestTools names the tools of a server nearest to a name.
func (r *Router) suggestTools(ctx context.Context, cat *Catalog, scope Scope, params json.RawMessage) (any, error) {
	var p struct {
		Server string `json:"server"`
		Name   string `json:"name"`
	}
	if err := decodeParams(protocol.MethodSuggestTools, params, &p); err != nil {
		return nil, err
	}
	sugg := []string{}
	if s := cat.Server(p.Server); s != nil {
		sugg = append(sugg, search.Suggest(p.Name, s.Aliases, 3)...)
	}
	return map[string]any{"suggestions": sugg}, nil
}

// describeServer is one server as describe_server shows it.
func (r *Router) describeServer(ctx context.Context, cat *Catalog, scope Scope, params json.RawMessage) (any, error) {
	s, err := r.namedServer(ctx, cat, scope, protocol.MethodDescribeServer, params)
	if err != nil {
		return nil, err
	}
	return map[string]any{"server": describe(s, contains(scope.Servers, s.Spec.Name))}, nil
}

// listTools is a server's tools as the server listed them.
func (r *Router) listTools(ctx context.Context, cat *Catalog, scope Scope, params json.RawMessage) (any, error) {
	s, err := r.namedServer(ctx, cat, scope, protocol.MethodListTools, params)
	if err != nil {
		return nil, err
	}
	raw := make([]json.RawMessage, len(s.Tools))
	for i, t := range s.Tools {
		raw[i] = t.Raw
	}
	return map[string]any{"tools": raw}, nil
}

// namedServer is the known server that params name as name or server.
func (r *Router) namedServer(ctx context.Context, cat *Catalog, scope Scope, method string, params json.RawMessage) (*CatalogServer, error) {
	var p struct {
		Name   *string `json:"name"`
		Server *string `json:"server"`
	}
	if err := decodeParams(method, params, &p); err != nil {
		return nil, err
	}
	return r.known(ctx, cat, scope, deref(p.Name, p.Server))
}

// search ranks tools over every discovered server. A server without a
// catalog is started in the background (kicked); search waits for those
// still starting and not yet hung (startingUntil), all of them against one
// deadline searchWait after it began, and covers each that comes up. The
// others (hung, failing, parked, or slower than the wait) are reported under
// "uncovered" with their state at once, so the next search covers them once
// they answer.
func (r *Router) search(ctx context.Context, cat *Catalog, scope Scope, query string, limit int, detail string) (any, error) {
	fresh := awaitStarting(ctx, cat, time.Now())
	warnings := []string{}
	uncovered := map[string]string{}
	now := time.Now()
	for _, s := range cat.Servers {
		if _, up := fresh[s.Spec.Name]; !s.Known && !up {
			st := s.peek(scope.Principal).State()
			if s.pairs != nil && asSignIn(st.Err) != nil {
				// Its tools come from whoever signed in first; this
				// principal's own sign-in starts with their first use.
				uncovered[s.Spec.Name] = fmt.Sprintf("needs your own sign-in; describe_server('%s') sends you the link, through your MCP client", s.Spec.Name)
				continue
			}
			uncovered[s.Spec.Name] = uncoveredState(s.Spec.Name, st, scope, now)
		}
	}
	userTools, warn := r.userToolDocs(scope.Principal)
	if warn != "" {
		warnings = append(warnings, warn)
	}
	if cat.Server(UserToolsServer) != nil {
		userTools = nil // a configured server of that name wins
	}
	if len(userTools) == 0 && len(fresh) == 0 {
		return r.searchResults(cat, query, limit, detail, warnings, uncovered)
	}
	// The servers that came up during the wait are not in cat (the router
	// publishes their catalog a moment later): the search index is built
	// again with their tools, as with the saved tools.
	tools := map[string][]ToolInfo{}
	for _, s := range cat.Servers {
		if ts, up := fresh[s.Spec.Name]; up {
			tools[s.Spec.Name] = ts
		} else if s.Known {
			tools[s.Spec.Name] = s.Tools
		}
	}
	specs := make([]ServerSpec, len(cat.Servers), len(cat.Servers)+1)
	clients := map[string]*Client{}
	for i, s := range cat.Servers {
		specs[i] = s.Spec
		clients[s.Spec.Name] = s.Client
	}
	if len(userTools) > 0 {
		specs = append(specs, ServerSpec{Name: UserToolsServer, Description: "tools saved with save_tool"})
		tools[UserToolsServer] = userTools
	}
	return r.searchResults(buildCatalog(specs, clients, tools), query, limit, detail, warnings, uncovered)
}

// searchWait bounds search's wait for servers still starting: one deadline
// for the whole search, never one per server, so a first search right after
// the bridge starts finds the servers that start quickly, and one that
// starts slowly (a first `npx -y` download: 10 to 60 s) costs 2 s once.
const searchWait = 2 * time.Second

// awaitStarting kicks every server of cat without a catalog, waits for those
// starting and not yet hung until searchWait after began (each also no later
// than the moment it counts as hung), and returns the tools of those that
// came up, by name. The waits run one after another: every start already
// runs in the background, so the search ends when the last server came up
// or the deadline passed, whichever is first, as a parallel wait would.
func awaitStarting(ctx context.Context, cat *Catalog, began time.Time) map[string][]ToolInfo {
	var waits []*CatalogServer
	for _, s := range cat.Servers {
		if !s.Known {
			s.Client.Kick()
			waits = append(waits, s)
		}
	}
	deadline := began.Add(searchWait)
	fresh := map[string][]ToolInfo{}
	for _, s := range waits {
		// The state as it is now: a start may have failed, or turned
		// hung, while search waited for the servers before it.
		now := time.Now()
		until, ok := startingUntil(s.Client.State(), now)
		if !ok || !now.Before(deadline) {
			continue
		}
		if until.After(deadline) {
			until = deadline
		}
		wctx, cancel := context.WithDeadline(ctx, until)
		// useOnce, not Ready: a search never signs in, and its wait is
		// this deadline, not the start timeout.
		r, err := s.Client.useOnce(wctx)
		cancel()
		if err == nil {
			fresh[s.Spec.Name] = r.tools
		}
	}
	return fresh
}

// startingUntil reports whether search waits for a server in state st at
// now, and until when at the latest: the moment the start counts as hung
// (hungAfter). It waits for a server starting for the first time, or since
// its last success, and for one up whose tools the catalog does not hold
// yet; never for one whose last start failed (it is failing, or retrying
// after a failure) or that is hung: those are answered at once.
func startingUntil(st ClientState, now time.Time) (time.Time, bool) {
	switch {
	case st.Err != nil:
		return time.Time{}, false
	case st.Starting.IsZero(): // up, or not started yet: the kick starts it now
		return now.Add(hungAfter), true
	}
	hung := st.Starting.Add(hungAfter)
	return hung, now.Before(hung)
}

func (r *Router) searchResults(cat *Catalog, query string, limit int, detail string, warnings []string, uncovered map[string]string) (any, error) {
	results := []any{}
	for _, i := range cat.search(query, limit) {
		ref := cat.refs[i]
		results = append(results, ref.server.doc(ref.tool, detail))
	}
	return map[string]any{"results": results, "warnings": warnings, "uncovered": uncovered}, nil
}

// hungAfter is how long a start runs before search calls the server hung
// rather than starting, and stops waiting for it.
const hungAfter = 3 * time.Second

// uncoveredState says why search could not cover a server, and when to
// search again: "starting", "hung: not answering initialize after 30s",
// "failed to start: exit status 3; ...; retrying in 2s". A start error shows its
// details only to a call that grants the server.
func uncoveredState(name string, st ClientState, scope Scope, now time.Time) string {
	const again = "; search again in a few seconds"
	switch {
	case st.Ready:
		return "started just now" + again
	case !st.Starting.IsZero() && now.Sub(st.Starting) >= hungAfter:
		return fmt.Sprintf("hung: not answering initialize after %ds%s", int(now.Sub(st.Starting)/time.Second), again)
	case !st.Starting.IsZero() || st.Err == nil:
		return "starting" + again
	}
	why := startFailure(name, scopedError(scope, name, st.Err))
	if st.RetryAt.IsZero() { // parked after repeated failures
		return fmt.Sprintf("%s (%d failures in a row); describe_server('%s') tries again", why, st.Failures, name)
	}
	return fmt.Sprintf("%s; retrying in %ds%s", why, max(1, int(st.RetryAt.Sub(now).Round(time.Second)/time.Second)), again)
}

// callTool forwards a tool call of the active run_python call: the server
// must be in its allow-list (PXY-7), the tool must exist, and the arguments
// must match the schema (PXY-6).
func (r *Router) callTool(ctx context.Context, cat *Catalog, scope Scope, params json.RawMessage) (any, error) {
	var p struct {
		Server    string          `json:"server"`
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
		// Alias lets Tool be a proxy alias too: the proxies of a server
		// that needed a sign-in before it had a catalog send the attribute
		// name, which only the catalog fetched after the sign-in resolves.
		Alias bool `json:"alias,omitempty"`
		// Validate false (runtime.call_tool(..., validate=False)) skips
		// the argument check: the escape for a server whose schema is
		// wrong. The server still judges its arguments; nothing else is
		// skipped.
		Validate *bool `json:"validate,omitempty"`
	}
	if err := decodeParams(protocol.MethodCallTool, params, &p); err != nil {
		return nil, err
	}
	p.Server = cat.serverName(p.Server) // from here on the name, never the alias
	s, err := r.granted(cat, scope, p.Server)
	if err != nil {
		return nil, err
	}
	if p.Tool == "" {
		return nil, LinkError(protocol.CodeInvalidArguments, protocol.KindInvalidArguments, "Missing tool name")
	}
	args := bytes.TrimSpace(p.Arguments)
	if len(args) == 0 || string(args) == "null" {
		args = []byte("{}")
	}
	if args[0] != '{' {
		return nil, LinkError(protocol.CodeInvalidArguments, protocol.KindInvalidArguments, "Arguments must be an object")
	}
	if !s.Known {
		if s, err = r.known(ctx, cat, scope, p.Server); err != nil {
			return nil, err
		}
	}
	i := s.findTool(p.Tool, p.Alias)
	if i >= 0 {
		p.Tool = s.Tools[i].Name // the policy, the count and approvals see the real name, never an alias
	}
	if i < 0 {
		msg := fmt.Sprintf("Server '%s' has no tool '%s'.", p.Server, p.Tool)
		names := make([]string, len(s.Tools))
		for j, t := range s.Tools {
			names[j] = t.Name
		}
		if why := s.skipReason(p.Tool); why != "" {
			msg = fmt.Sprintf("Server '%s' lists a tool '%s' the bridge cannot use: %s.", p.Server, displayName(p.Tool), why)
		} else if sugg := search.Suggest(p.Tool, names, 3); len(sugg) > 0 {
			msg += " Did you mean: " + strings.Join(sugg, ", ") + "?"
		}
		return nil, LinkError(protocol.CodeNotFound, protocol.KindNotFound, msg)
	}
	if err := cat.policy.CheckFor(scope.Principal, p.Server, p.Tool); err != nil {
		if firstRefusal(scope) {
			scope.log(r.Log.Warn()).Str("server", p.Server).Str("tool", printable.Log(p.Tool)).Msg(printable.Log(err.Error()))
		}
		return nil, LinkError(protocol.CodeNotAvailable, protocol.KindNotAvailable, err.Error())
	}
	// Arguments first: a call they refuse never reaches the server, so it
	// does not count against maxToolCallsPerExecution.
	if p.Validate == nil || *p.Validate {
		if err := s.validate(i, args); err != nil {
			return nil, LinkError(protocol.CodeInvalidArguments, protocol.KindInvalidArguments,
				fmt.Sprintf("Invalid arguments for %s.%s: %v", p.Server, p.Tool, err))
		}
	}
	if err := r.countCall(cat, scope, p.Server, p.Tool); err != nil {
		return nil, err
	}
	if rule := cat.policy.GateFor(scope.Principal, p.Server, p.Tool, s.Tools[i].Annotations); rule != "" {
		if err := r.approve(ctx, scope, p.Server, p.Tool, rule+" of "+cat.policy.Source, args); err != nil {
			return nil, err
		}
	}
	timeout, limit := r.CallTimeout, "MCP_BRIDGE_CALL_TIMEOUT"
	if d, ok := cat.policy.TimeoutFor(scope.Principal, p.Server, p.Tool); ok {
		timeout, limit = d, "timeouts in "+cat.policy.Source
	}
	deadline := scope.Deadline
	if a, ok := scope.human.(*activeCall); ok && !deadline.IsZero() {
		deadline = deadline.Add(a.asks.pausedFor()) // the waits for approvals moved it
	}
	byCall := false // the time left in the run_python call bounds this one
	if left := time.Until(deadline); !deadline.IsZero() && left < timeout {
		timeout, byCall = max(left, time.Millisecond), true
	}
	var onProgress func(UpstreamProgress)
	ranOut := false // it ran until the run_python call's deadline
	if sink := scope.progress; sink != nil {
		key, label := innerCalls.Add(1), p.Server+"."+s.Aliases[i]
		onProgress = func(u UpstreamProgress) { sink.upstream(key, upstreamMessage(label, u)) }
		sink.began(key, label)
		defer func() { sink.ended(key, ranOut) }()
	}
	if r.OnProxied != nil {
		r.OnProxied(p.Server)
	}
	c, release, err := s.clientFor(scope.Principal)
	if err != nil {
		return nil, LinkError(protocol.CodeServerError, protocol.KindServerError, err.Error())
	}
	defer release()
	call := c.Call
	if requiresTask(s.Tools[i].Raw) { // tasks.go
		call = c.CallTask
	}
	res, err := call(withInner(ctx, p.Server, p.Tool, scope.human), p.Tool, args, timeout, limit, onProgress)
	ranOut = byCall && errors.Is(err, ErrCallTimeout)
	if ranOut {
		// This call's bound was the run_python call's deadline, which
		// passes now too. Its error is held until that call's own timeout
		// ends it (at most ranOutHold): sent at once, it could end the
		// cell with an MCPError a moment before the host's timer fires,
		// and the caller would get an error instead of the timeout that
		// names this tool (seen under load).
		hold := time.NewTimer(ranOutHold)
		select {
		case <-ctx.Done():
		case <-hold.C:
		}
		hold.Stop()
	}
	if err != nil {
		kind, code := protocol.KindServerError, int64(protocol.CodeServerError)
		if errors.Is(err, ErrCallTimeout) {
			kind, code = protocol.KindTimeout, protocol.CodeTimeout
		}
		return nil, LinkError(code, kind, err.Error())
	}
	if n := len(res) + 64; r.MaxFrame > 0 && n > r.MaxFrame {
		return nil, LinkError(protocol.CodeServerError, protocol.KindServerError,
			fmt.Sprintf("Result of %s.%s is %d bytes, over the %d-byte frame limit", p.Server, p.Tool, len(res), r.MaxFrame))
	}
	return map[string]json.RawMessage{"result": res}, nil
}

func invalidParams(method string, err error) error {
	return &jsonrpc2.Error{Code: protocol.CodeInvalidParams, Message: fmt.Sprintf("invalid params for %s: %v", method, err)}
}

// decodeParams decodes params strictly: unknown fields are refused (LNK-3).
func decodeParams(method string, params json.RawMessage, v any) error {
	if len(params) == 0 {
		params = json.RawMessage("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return invalidParams(method, err)
	}
	return nil
}

func deref(a, b *string) string {
	if a != nil {
		return *a
	}
	if b != nil {
		return *b
	}
	return ""
}

// ranOutHold bounds how long a tool call that ran out with its run_python
// call holds its error for that call's timeout.
const ranOutHold = time.Second

// hiddenCwd replaces the cwd of a server the call does not grant: a host
// path is shown only to calls that may use the server.
const hiddenCwd = "(hidden: add the server to the servers argument of run_python to see it)"

// describe is describe_server's answer; granted tells whether the call may
// use the server, which alone shows its host directory.
func describe(s *CatalogServer, granted bool) map[string]any {
	tools := make([]map[string]any, 0, len(s.Tools))
	for i, t := range s.Tools {
		tools = append(tools, map[string]any{"name": t.Name, "alias": s.Aliases[i], "description": t.Description, "input_schema": t.InputSchema})
	}
	var cwd any // None in Python when unset, as the reference gives
	if s.Spec.Cwd != "" {
		cwd = s.Spec.Cwd
		if !granted {
			cwd = hiddenCwd
		}
	}
	status := "configured"
	if s.Known {
		status = "available"
	}
	out := map[string]any{
		"name": s.Spec.Name, "alias": s.Spec.Alias, "description": s.Spec.Description, "transport": s.Spec.Type,
		"status": status, "cwd": cwd, "tools": tools,
		// Not in the reference: which MCP generation the server speaks.
		"protocol": s.Client.Reached().DescribeEra(),
	}
	if len(s.Skipped) > 0 { // only then: the reference's keys stay as they are
		skipped := make([]map[string]any, len(s.Skipped))
		for i, sk := range s.Skipped {
			var name any // None for an entry without a name
			if sk.Name != "" {
				name = sk.Name
			}
			skipped[i] = map[string]any{"name": name, "entry": sk.Entry, "reason": sk.Reason}
		}
		out["skipped"] = skipped
		out["note"] = SkipSummary(s.Skipped)
	}
	return out
}

// notAvailable is the error for a server the call may not use. For a
// configured one it gives the same fix, in the same words, as the sandbox's
// NameError, KeyError and ModuleNotFoundError for that server's proxies.
func notAvailable(name string, configured bool) string {
	if !configured {
		return fmt.Sprintf("Server '%s' is not available: no server '%s' is configured (runtime.discovered_servers() lists them)", name, name)
	}
	grant, _ := json.Marshal([]string{name})
	return fmt.Sprintf("Server '%s' is not available: server '%s' is configured but not granted to this call; pass servers=%s to run_python", name, name, grant)
}

// firstRefusal reports whether a policy refusal is the execution's first,
// the one that is logged (Scope.Refused).
func firstRefusal(scope Scope) bool {
	return scope.Refused == nil || scope.Refused.Add(1) == 1
}

// historyOff is runtime.history's note when there is no audit trail.
const historyOff = "runtime.history() is empty: the audit trail is off (MCP_BRIDGE_AUDIT=on turns it on; bridge serve has it on)"

// history answers runtime.history(n): the principal's last n calls, oldest
// first, from the audit trail (Router.History), and a note when there is
// none to read.
func (r *Router) history(_ context.Context, scope Scope, params json.RawMessage) (any, error) {
	var p protocol.HistoryParams
	if err := decodeParams(protocol.MethodHistory, params, &p); err != nil {
		return nil, err
	}
	n := min(max(p.N, 1), protocol.MaxHistory)
	if r.History == nil {
		return map[string]any{"records": []any{}, "note": historyOff}, nil
	}
	recs, err := r.History(scope.Principal, n)
	if err != nil {
		return nil, LinkError(protocol.CodeServerError, protocol.KindServerError, "runtime.history: "+err.Error())
	}
	if recs == nil {
		recs = []json.RawMessage{}
	}
	return map[string]any{"records": recs}, nil
}
