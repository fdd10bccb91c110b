package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/bridge-mcp/bridge/protocol"
)

// Scope is the call a sandbox request belongs to: the session, the call
// number, the servers the call may use (the allow-list) and its deadline.
type Scope struct {
	Session  string
	Call     int64
	Servers  []string
	Deadline time.Time
	// ToolCalls counts the execution's proxied tool calls, for the
	// policy's cap; nil means no counting.
	ToolCalls *atomic.Int64
}

// RequestRouter serves box→host requests (list, docs, search, call_tool).
type RequestRouter interface {
	ServeSandbox(ctx context.Context, scope Scope, method string, params json.RawMessage) (any, error)
}

// Router is the frame router actor. It owns the current catalog snapshot;
// requests take the snapshot and are answered on the caller's goroutine, so
// tool calls from one sandbox run concurrently (CON-3).
type Router struct {
	catalogs  chan *Catalog
	snapshots chan chan *Catalog
	catalog   *Catalog // owned by Serve

	// MaxFrame is the link frame cap (LNK-4); CallTimeout bounds each
	// proxied call (TMO-4); StartTimeout bounds server starts.
	MaxFrame     int
	CallTimeout  time.Duration
	StartTimeout time.Duration
	Log          zerolog.Logger
	// Skipped returns the config files and entries the last load skipped,
	// named in unknown-server errors and in detailed discovered_servers;
	// nil means none.
	Skipped func() []ConfigProblem
	// Store serves the memory and saved-tool methods; nil refuses them.
	Store Store
}

// ConfigProblem is a config file (Entry "") or entry that was skipped.
type ConfigProblem struct {
	File, Entry, Reason string
}

// maxKnownNames bounds the server names an unknown-server error lists.
const maxKnownNames = 20

func (r *Router) skipped() []ConfigProblem {
	if r.Skipped == nil {
		return nil
	}
	return r.Skipped()
}

// unknownServer is the message for a server name that is not configured. It
// names the fix: the nearest name, the known servers, and the config files
// or entries that were skipped (a broken file may be where it is defined).
func (r *Router) unknownServer(cat *Catalog, name string) string {
	msg := "Unknown MCP server: " + name
	names := cat.Names()
	sep := ". "
	if s := cat.funcs.Suggest(name, names, 1); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean '%s'?", s[0])
		sep = " "
	}
	switch {
	case len(names) == 0:
		msg += sep + "No servers are configured."
	case len(names) > maxKnownNames:
		msg += fmt.Sprintf("%sKnown servers: %s and %d more (runtime.discovered_servers()).", sep, strings.Join(names[:maxKnownNames], ", "), len(names)-maxKnownNames)
	default:
		msg += sep + "Known servers: " + strings.Join(names, ", ") + "."
	}
	if probs := r.skipped(); len(probs) > 0 {
		parts := make([]string, len(probs))
		for i, p := range probs {
			parts[i] = p.File + ": " + p.Reason
			if p.Entry != "" {
				parts[i] = fmt.Sprintf("%s: server %q: %s", p.File, p.Entry, p.Reason)
			}
		}
		msg += " Skipped config: " + strings.Join(parts, "; ") + " (fix it, then call again; `bridge doctor` checks the config)."
	}
	return msg
}

// NewRouter returns a router with an empty catalog.
func NewRouter(funcs *CatalogFuncs) *Router {
	return &Router{
		catalogs:  make(chan *Catalog, 1),
		snapshots: make(chan chan *Catalog),
		catalog:   buildCatalog(nil, nil, nil, funcs),
	}
}

func (r *Router) String() string { return "router" }

// SetCatalog replaces the catalog; the latest value wins.
func (r *Router) SetCatalog(c *Catalog) {
	for {
		select {
		case r.catalogs <- c:
			return
		default:
		}
		select {
		case <-r.catalogs:
		default:
		}
	}
}

// Serve runs the router until ctx ends.
func (r *Router) Serve(ctx context.Context) error {
	for {
		select {
		case c := <-r.catalogs:
			r.catalog = c
		case reply := <-r.snapshots:
			select {
			case c := <-r.catalogs: // a newer catalog is waiting: answer with it
				r.catalog = c
			default:
			}
			reply <- r.catalog
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Snapshot returns the current catalog.
func (r *Router) Snapshot(ctx context.Context) (*Catalog, error) {
	reply := make(chan *Catalog, 1)
	select {
	case r.snapshots <- reply:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case c := <-reply:
		return c, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Resolve maps a call's servers argument to the servers it may use: each
// name must be discovered (VAL-2), and each server is readied in parallel
// within the start timeout (VAL-3).
func (r *Router) Resolve(ctx context.Context, names []string) ([]protocol.Server, error) {
	if len(names) == 0 {
		return nil, nil
	}
	cat, err := r.Snapshot(ctx)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		if cat.Server(n) == nil {
			return nil, errors.New(r.unknownServer(cat, n))
		}
	}
	// Each server's live tool list comes back with its start, so the
	// granted servers need no newer catalog snapshot.
	out := make([]protocol.Server, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := cat.Server(n)
			tools, err := s.Client.Ready(ctx)
			errs[i] = err
			out[i] = newCatalogServer(s.Spec, s.Client, tools, true, cat.funcs).protocolServer()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ServeSandbox implements RequestRouter.
func (r *Router) ServeSandbox(ctx context.Context, scope Scope, method string, params json.RawMessage) (any, error) {
	if storeMethods[method] {
		return r.serveStore(method, params)
	}
	cat, err := r.Snapshot(ctx)
	if err != nil {
		return nil, LinkError(protocol.CodeTransport, protocol.KindTransport, "RPC channel closed")
	}
	switch method {
	case protocol.MethodDiscoveredServers:
		var p struct {
			Detailed bool `json:"detailed"`
		}
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		out := make([]any, 0, len(cat.Servers))
		for _, s := range cat.Servers {
			if p.Detailed {
				out = append(out, map[string]string{"name": s.Spec.Name, "description": s.Spec.Description})
			} else {
				out = append(out, s.Spec.Name)
			}
		}
		if p.Detailed { // what did not load, and why
			for _, sk := range r.skipped() {
				d := map[string]string{"file": sk.File, "skipped": sk.Reason}
				if sk.Entry != "" {
					d["name"] = sk.Entry
				}
				out = append(out, d)
			}
		}
		return map[string]any{"servers": out}, nil
	case protocol.MethodListServers:
		if err := decodeParams(method, params, &struct{}{}); err != nil {
			return nil, err
		}
		return map[string]any{"servers": append([]string{}, scope.Servers...)}, nil
	case protocol.MethodDescribeServer, protocol.MethodListTools:
		var p struct {
			Name   *string `json:"name"`
			Server *string `json:"server"`
		}
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		s, err := r.known(ctx, cat, scope, deref(p.Name, p.Server))
		if err != nil {
			return nil, err
		}
		if method == protocol.MethodListTools {
			raw := make([]json.RawMessage, len(s.Tools))
			for i, t := range s.Tools {
				raw[i] = t.Raw
			}
			return map[string]any{"tools": raw}, nil
		}
		return map[string]any{"server": describe(s, contains(scope.Servers, s.Spec.Name))}, nil
	case protocol.MethodQueryToolDocs:
		var p struct {
			Server string  `json:"server"`
			Tool   *string `json:"tool"`
			Detail string  `json:"detail"`
		}
		if err := decodeParams(method, params, &p); err != nil {
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
	case protocol.MethodSearchToolDocs:
		var p struct {
			Query  string `json:"query"`
			Limit  int    `json:"limit"`
			Detail string `json:"detail"`
		}
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		if strings.TrimSpace(p.Query) == "" {
			return nil, LinkError(protocol.CodeInvalidArguments, protocol.KindInvalidArguments, "Missing 'query' value")
		}
		return r.search(ctx, cat, scope, p.Query, max(1, min(20, p.Limit)), p.Detail)
	case protocol.MethodSuggestTools:
		var p struct {
			Server string `json:"server"`
			Name   string `json:"name"`
		}
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		sugg := []string{}
		if s := cat.Server(p.Server); s != nil {
			sugg = append(sugg, cat.funcs.Suggest(p.Name, s.Aliases, 3)...)
		}
		return map[string]any{"suggestions": sugg}, nil
	case protocol.MethodCallTool:
		return r.callTool(ctx, cat, scope, params)
	}
	return nil, &jsonrpc2.Error{Code: protocol.CodeMethodNotFound, Message: fmt.Sprintf("Unknown method %q", method)}
}

// known returns a discovered server with its tools known, starting it when
// it has no catalog yet. A start failure shows its stderr and host details
// only when scope grants the server.
func (r *Router) known(ctx context.Context, cat *Catalog, scope Scope, name string) (*CatalogServer, error) {
	s := cat.Server(name)
	if s == nil {
		return nil, LinkError(protocol.CodeNotFound, protocol.KindNotFound, r.unknownServer(cat, name))
	}
	if s.Known {
		return s, nil
	}
	tools, err := s.Client.Tools(ctx)
	if err != nil {
		return nil, LinkError(protocol.CodeServerError, protocol.KindServerError, scopedError(scope, name, err))
	}
	return newCatalogServer(s.Spec, s.Client, tools, true, cat.funcs), nil
}

// search ranks tools over every discovered server (SRC-2). Servers without a
// known catalog are started in parallel, bounded; those that fail are
// skipped with a warning.
func (r *Router) search(ctx context.Context, cat *Catalog, scope Scope, query string, limit int, detail string) (any, error) {
	var unknown []*CatalogServer
	for _, s := range cat.Servers {
		if !s.Known {
			unknown = append(unknown, s)
		}
	}
	warnings := []string{}
	userTools, warn := r.userToolDocs()
	if warn != "" {
		warnings = append(warnings, warn)
	}
	if cat.Server(UserToolsServer) != nil {
		userTools = nil // a configured server of that name wins
	}
	if len(unknown) == 0 && len(userTools) == 0 {
		return r.searchResults(cat, query, limit, detail, warnings)
	}
	tools := map[string][]ToolInfo{}
	for _, s := range cat.Servers {
		if s.Known {
			tools[s.Spec.Name] = s.Tools
		}
	}
	if len(unknown) > 0 {
		sctx, cancel := context.WithTimeout(ctx, r.StartTimeout)
		defer cancel()
		results := make([][]ToolInfo, len(unknown))
		errs := make([]error, len(unknown))
		sem := make(chan struct{}, 8)
		var wg sync.WaitGroup
		for i, s := range unknown {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				results[i], errs[i] = s.Client.Tools(sctx)
			}()
		}
		wg.Wait()
		for i, s := range unknown {
			if errs[i] != nil {
				warnings = append(warnings, fmt.Sprintf("search skipped server '%s': %s", s.Spec.Name, scopedError(scope, s.Spec.Name, errs[i])))
				continue
			}
			tools[s.Spec.Name] = results[i]
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
	return r.searchResults(buildCatalog(specs, clients, tools, cat.funcs), query, limit, detail, warnings)
}

func (r *Router) searchResults(cat *Catalog, query string, limit int, detail string, warnings []string) (any, error) {
	results := []any{}
	for _, i := range cat.search(query, limit) {
		ref := cat.refs[i]
		results = append(results, ref.server.doc(ref.tool, detail))
	}
	return map[string]any{"results": results, "warnings": warnings}, nil
}

// callTool forwards a tool call of the active run_python call: the server
// must be in its allow-list (PXY-7), the tool must exist, and the arguments
// must match the schema (PXY-6).
func (r *Router) callTool(ctx context.Context, cat *Catalog, scope Scope, params json.RawMessage) (any, error) {
	var p struct {
		Server    string          `json:"server"`
		Tool      string          `json:"tool"`
		Arguments json.RawMessage `json:"arguments"`
	}
	if err := decodeParams(protocol.MethodCallTool, params, &p); err != nil {
		return nil, err
	}
	s := cat.Server(p.Server)
	if !contains(scope.Servers, p.Server) || s == nil {
		return nil, LinkError(protocol.CodeNotAvailable, protocol.KindNotAvailable,
			fmt.Sprintf("Server '%s' is not available; add it to the servers argument of run_python", p.Server))
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
		var err error
		if s, err = r.known(ctx, cat, scope, p.Server); err != nil {
			return nil, err
		}
	}
	i := s.findTool(p.Tool, false)
	if i < 0 {
		msg := fmt.Sprintf("Server '%s' has no tool '%s'.", p.Server, p.Tool)
		names := make([]string, len(s.Tools))
		for j, t := range s.Tools {
			names[j] = t.Name
		}
		if sugg := cat.funcs.Suggest(p.Tool, names, 3); len(sugg) > 0 {
			msg += " Did you mean: " + strings.Join(sugg, ", ") + "?"
		}
		return nil, LinkError(protocol.CodeNotFound, protocol.KindNotFound, msg)
	}
	if err := cat.policy.Check(p.Server, p.Tool); err != nil {
		r.Log.Warn().Str("server", p.Server).Str("tool", p.Tool).Str("session", scope.Session).Int64("call", scope.Call).Msg(err.Error())
		return nil, LinkError(protocol.CodeNotAvailable, protocol.KindNotAvailable, err.Error())
	}
	if max := cat.policyMaxCalls(); max > 0 && scope.ToolCalls != nil && scope.ToolCalls.Add(1) > int64(max) {
		msg := fmt.Sprintf("Tool call limit of %d per execution reached (maxToolCallsPerExecution in %s)", max, cat.policy.Source)
		r.Log.Warn().Str("server", p.Server).Str("tool", p.Tool).Str("session", scope.Session).Msg(msg)
		return nil, LinkError(protocol.CodeNotAvailable, protocol.KindNotAvailable, msg)
	}
	if err := s.validate(cat.funcs, i, args); err != nil {
		return nil, LinkError(protocol.CodeInvalidArguments, protocol.KindInvalidArguments,
			fmt.Sprintf("Invalid arguments for %s.%s: %v; expected: %s", p.Server, p.Tool, err, cat.funcs.Signature(s.Aliases[i], s.Tools[i].InputSchema)))
	}
	timeout, limit := r.CallTimeout, "MCP_BRIDGE_CALL_TIMEOUT"
	if d, ok := cat.policy.Timeout(p.Server, p.Tool); ok {
		timeout, limit = d, "timeouts in "+cat.policy.Source
	}
	if left := time.Until(scope.Deadline); !scope.Deadline.IsZero() && left < timeout {
		timeout = max(left, time.Millisecond)
	}
	res, err := s.Client.Call(ctx, p.Tool, args, timeout, limit)
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

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// scopedError is err's message as the sandbox sees it: complete for a
// server the call grants (VAL-3), redacted otherwise.
func scopedError(scope Scope, server string, err error) string {
	if contains(scope.Servers, server) {
		return err.Error()
	}
	return RedactedError(err)
}

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
	return map[string]any{
		"name": s.Spec.Name, "alias": s.Spec.Alias, "description": s.Spec.Description, "transport": s.Spec.Type,
		"status": status, "cwd": cwd, "tools": tools,
	}
}
