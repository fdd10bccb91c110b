package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

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
}

// RequestRouter serves box→host requests (list, docs, search, call_tool).
type RequestRouter interface {
	ServeSandbox(ctx context.Context, scope Scope, method string, params json.RawMessage) (any, error)
}

// Catalog is an immutable snapshot of every discovered server, replaced
// whole on reload (SUP-1).
type Catalog struct {
	Servers []CatalogServer
}

// CatalogServer is one discovered server as the router knows it.
type CatalogServer struct {
	Name        string
	Alias       string
	Description string
	Transport   string
	Cwd         string
	Tools       []protocol.Tool
}

// find returns the server named name.
func (c *Catalog) find(name string) *CatalogServer {
	for i := range c.Servers {
		if c.Servers[i].Name == name {
			return &c.Servers[i]
		}
	}
	return nil
}

// Router is the frame router actor: it holds the catalog and answers
// sandbox requests against it with the call's allow-list.
type Router struct {
	requests chan routed
	catalogs chan *Catalog
	catalog  *Catalog // owned by Serve
}

type routed struct {
	scope  Scope
	method string
	params json.RawMessage
	reply  chan routedReply
}

type routedReply struct {
	v   any
	err error
}

// NewRouter returns a router with an empty catalog.
func NewRouter() *Router {
	return &Router{requests: make(chan routed), catalogs: make(chan *Catalog, 1), catalog: &Catalog{}}
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
		case req := <-r.requests:
			v, err := r.answer(req.scope, req.method, req.params)
			req.reply <- routedReply{v, err}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ServeSandbox implements RequestRouter.
func (r *Router) ServeSandbox(ctx context.Context, scope Scope, method string, params json.RawMessage) (any, error) {
	reply := make(chan routedReply, 1)
	select {
	case r.requests <- routed{scope, method, params, reply}:
	case <-ctx.Done():
		return nil, LinkError(protocol.CodeTransport, protocol.KindTransport, "RPC channel closed")
	}
	select {
	case rr := <-reply:
		return rr.v, rr.err
	case <-ctx.Done():
		return nil, LinkError(protocol.CodeTransport, protocol.KindTransport, "RPC channel closed")
	}
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

func unknownServer(name string) error {
	return LinkError(protocol.CodeNotFound, protocol.KindNotFound, "Unknown MCP server: "+name)
}

func (r *Router) answer(scope Scope, method string, params json.RawMessage) (any, error) {
	switch method {
	case protocol.MethodDiscoveredServers:
		var p struct {
			Detailed bool `json:"detailed"`
		}
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		out := make([]any, 0, len(r.catalog.Servers))
		for _, s := range r.catalog.Servers {
			if p.Detailed {
				out = append(out, map[string]string{"name": s.Name, "description": s.Description})
			} else {
				out = append(out, s.Name)
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
		name := deref(p.Name, p.Server)
		s := r.catalog.find(name)
		if s == nil {
			return nil, unknownServer(name)
		}
		if method == protocol.MethodListTools {
			return map[string]any{"tools": rawTools(s)}, nil
		}
		return map[string]any{"server": describe(s)}, nil
	case protocol.MethodSearchToolDocs:
		var p struct {
			Query  string `json:"query"`
			Limit  int    `json:"limit"`
			Detail string `json:"detail"`
		}
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		return map[string]any{"results": []any{}}, nil
	case protocol.MethodQueryToolDocs:
		var p struct {
			Server string  `json:"server"`
			Tool   *string `json:"tool"`
			Detail string  `json:"detail"`
		}
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		if r.catalog.find(p.Server) == nil {
			return nil, unknownServer(p.Server)
		}
		return map[string]any{"docs": []any{}}, nil
	case protocol.MethodSuggestTools:
		var p struct {
			Server string `json:"server"`
			Name   string `json:"name"`
		}
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		return map[string]any{"suggestions": []string{}}, nil
	case protocol.MethodCallTool:
		var p struct {
			Server    string          `json:"server"`
			Tool      string          `json:"tool"`
			Arguments json.RawMessage `json:"arguments"`
		}
		if err := decodeParams(method, params, &p); err != nil {
			return nil, err
		}
		if !contains(scope.Servers, p.Server) || r.catalog.find(p.Server) == nil {
			return nil, LinkError(protocol.CodeNotAvailable, protocol.KindNotAvailable, fmt.Sprintf("Server '%s' is not available", p.Server))
		}
		return nil, LinkError(protocol.CodeServerError, protocol.KindServerError, fmt.Sprintf("Server '%s' has no client", p.Server))
	}
	return nil, &jsonrpc2.Error{Code: protocol.CodeMethodNotFound, Message: fmt.Sprintf("Unknown method %q", method)}
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

func rawTools(s *CatalogServer) []map[string]any {
	out := make([]map[string]any, 0, len(s.Tools))
	for _, t := range s.Tools {
		m := map[string]any{"name": t.Name, "description": t.Description, "inputSchema": t.InputSchema}
		if len(t.OutputSchema) > 0 {
			m["outputSchema"] = t.OutputSchema
		}
		out = append(out, m)
	}
	return out
}

func describe(s *CatalogServer) map[string]any {
	tools := make([]map[string]any, 0, len(s.Tools))
	for _, t := range s.Tools {
		tools = append(tools, map[string]any{"name": t.Name, "alias": t.Alias, "description": t.Description, "input_schema": t.InputSchema})
	}
	return map[string]any{
		"name": s.Name, "alias": s.Alias, "description": s.Description, "transport": s.Transport,
		"status": "configured", "cwd": s.Cwd, "tools": tools,
	}
}
