package actors

import (
	"encoding/json"
	"strings"
	"sync"

	"github.com/bridge-mcp/bridge/protocol"
	"github.com/bridge-mcp/bridge/protocol/alias"
	"github.com/bridge-mcp/bridge/protocol/schema"
	"github.com/bridge-mcp/bridge/protocol/search"
)

// Catalog is an immutable snapshot of every discovered server, replaced
// whole on every change (SUP-1).
type Catalog struct {
	Servers []*CatalogServer
	byName  map[string]*CatalogServer
	refs    []toolRef // parallel to the index's docs
	index   *search.Index
	policy  *Policy // nil: no policy file
}

type toolRef struct {
	server *CatalogServer
	tool   int
}

// CatalogServer is one discovered server as the router knows it.
type CatalogServer struct {
	Spec   ServerSpec
	Client *Client
	// Tools are nil when unknown: the server never started and has no disk
	// catalog yet.
	Tools   []ToolInfo
	Aliases []string // parallel to Tools
	Known   bool
	// Skipped are the entries of its tools/list the bridge cannot use
	// (toolentry.go); they are in no other field.
	Skipped []SkippedTool

	checkers sync.Map // tool name → *schema.Checker (built on the tool's first call)
	// pairs are its principals' own connections (identity: principal,
	// identities.go); nil for a shared server.
	pairs *identities
}

// clientFor is the client principal's requests go through: their own pair
// for an identity: principal server, else the server's client. release
// ends the use; call it once the request is done.
func (cs *CatalogServer) clientFor(principal string) (c *Client, release func(), err error) {
	if cs.pairs == nil || principal == "" {
		return cs.Client, func() {}, nil
	}
	return cs.pairs.lease(principal)
}

// peek is the client whose state search reports for principal: their pair
// when they have one, else the server's client. It starts no pair.
func (cs *CatalogServer) peek(principal string) *Client {
	if cs.pairs != nil && principal != "" {
		if c := cs.pairs.existing(principal); c != nil {
			return c
		}
	}
	return cs.Client
}

// newCatalogServer is a server with its tool aliases (ALS-2); known says
// whether tools is its real list or it is not known yet. Every catalog
// server is built here, so the entries the bridge cannot use leave Tools
// here, before any alias is computed: they never reach the sandbox.
func newCatalogServer(spec ServerSpec, client *Client, tools []ToolInfo, known bool) *CatalogServer {
	cs := &CatalogServer{Spec: spec, Client: client, Known: known}
	if !known {
		return cs
	}
	tools, cs.Skipped = SplitTools(tools)
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	cs.Tools, cs.Aliases = tools, alias.Tools(names)
	return cs
}

// skipReason is why the bridge skipped the entry named name, "" when it
// skipped none of that name.
func (cs *CatalogServer) skipReason(name string) string {
	for _, s := range cs.Skipped {
		if s.name == name {
			return s.Reason
		}
	}
	return ""
}

// buildCatalog computes aliases and the search index for servers in config
// order. tools holds each server's latest known tool list.
func buildCatalog(specs []ServerSpec, clients map[string]*Client, tools map[string][]ToolInfo) *Catalog {
	c := &Catalog{byName: map[string]*CatalogServer{}}
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Name
	}
	aliases := alias.Servers(names)
	var docs []search.Doc
	for i, spec := range specs {
		spec.Alias = aliases[i]
		ts, known := tools[spec.Name]
		cs := newCatalogServer(spec, clients[spec.Name], ts, known)
		for j, t := range cs.Tools {
			docs = append(docs, search.Doc{Server: spec.Name, ServerAlias: spec.Alias, Tool: t.Name, ToolAlias: cs.Aliases[j], Description: t.Description})
			c.refs = append(c.refs, toolRef{cs, j})
		}
		c.Servers = append(c.Servers, cs)
		c.byName[spec.Name] = cs
	}
	c.index = search.NewIndex(docs)
	return c
}

// search returns the positions in refs of the tools best matching query,
// best first.
func (c *Catalog) search(query string, limit int) []int {
	hits := c.index.Search(query, limit)
	out := make([]int, len(hits))
	for i, h := range hits {
		out[i] = h.Doc
	}
	return out
}

// policyMaxCalls is the policy's cap on principal's tool calls per
// execution, 0 for none.
func (c *Catalog) policyMaxCalls(principal string) int {
	return c.policy.MaxCallsFor(principal)
}

// Server returns the server named name, nil when unknown.
func (c *Catalog) Server(name string) *CatalogServer {
	if c == nil {
		return nil
	}
	return c.byName[name]
}

// Names returns the server names in config order.
func (c *Catalog) Names() []string {
	out := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		out[i] = s.Spec.Name
	}
	return out
}

// findTool returns the index of the tool named or aliased name: its exact
// name first, then its exact alias (the proxy's name, which
// runtime.call_tool takes too), then, when loose, the name or alias
// case-insensitively; -1 when absent. A name wins over another tool's
// alias, so a tool named like an alias stays reachable.
func (cs *CatalogServer) findTool(name string, loose bool) int {
	for i, t := range cs.Tools {
		if t.Name == name {
			return i
		}
	}
	for i, a := range cs.Aliases {
		if a == name {
			return i
		}
	}
	if !loose {
		return -1
	}
	for i, t := range cs.Tools {
		if strings.EqualFold(t.Name, name) || strings.EqualFold(cs.Aliases[i], name) {
			return i
		}
	}
	return -1
}

// protocolServer is the server as an exec frame carries it.
func (cs *CatalogServer) protocolServer() protocol.Server {
	ps := protocol.Server{Name: cs.Spec.Name, Alias: cs.Spec.Alias, Description: cs.Spec.Description, Tools: make([]protocol.Tool, len(cs.Tools))}
	for i, t := range cs.Tools {
		ps.Tools[i] = protocol.Tool{Name: t.Name, Alias: cs.Aliases[i], Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema}
	}
	return ps
}

// validate checks args against the tool's input schema (PXY-6, and the
// names rule of issue 35); the checker is built once per tool. The error's
// text is the reason and the tool's signature. It runs on the host, so no
// code in the sandbox can skip it: the proxies leave every name check to it,
// and the messages are the same whichever way the tool was called.
func (cs *CatalogServer) validate(tool int, args json.RawMessage) error {
	name := cs.Tools[tool].Name
	v, ok := cs.checkers.Load(name)
	if !ok {
		v, _ = cs.checkers.LoadOrStore(name, schema.New(cs.Aliases[tool], cs.Tools[tool].InputSchema))
	}
	return v.(*schema.Checker).Check(args, closestName)
}

// closestName is the candidate nearest a wrong argument name, "" when none
// is near enough: the "Did you mean" ranking of tool names (PRX-4).
func closestName(name string, candidates []string) string {
	if s := search.Suggest(name, candidates, 1); len(s) > 0 {
		return s[0]
	}
	return ""
}

// serverName is the name of the server named or aliased name (the name
// first), name itself when neither: runtime.call_tool takes the alias
// that the proxies (mcp_<alias>) and search show.
func (c *Catalog) serverName(name string) string {
	if c.Server(name) != nil {
		return name
	}
	for _, s := range c.Servers {
		if s.Spec.Alias == name {
			return s.Spec.Name
		}
	}
	return name
}

// toolDoc is a doc dict (§9.2) in its documented key order.
type toolDoc struct {
	Server       string          `json:"server"`
	ServerAlias  string          `json:"serverAlias"`
	Tool         string          `json:"tool"`
	ToolAlias    string          `json:"toolAlias"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema,omitempty"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
}

// doc renders a tool's doc dict at detail: name, summary (any other value)
// or full.
func (cs *CatalogServer) doc(tool int, detail string) toolDoc {
	t := cs.Tools[tool]
	d := toolDoc{Server: cs.Spec.Name, ServerAlias: cs.Spec.Alias, Tool: t.Name, ToolAlias: cs.Aliases[tool]}
	if detail == "name" {
		return d
	}
	d.Description = t.Description
	if detail == "full" {
		d.InputSchema, d.OutputSchema, d.Annotations = t.InputSchema, t.OutputSchema, t.Annotations
	}
	return d
}
