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

	validators sync.Map // tool name → func(json.RawMessage) error (compiled lazily)
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

// policyMaxCalls is the policy's cap on tool calls per execution, 0 for none.
func (c *Catalog) policyMaxCalls() int {
	if c.policy == nil {
		return 0
	}
	return c.policy.MaxCalls
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

// findTool returns the index of the tool named or aliased name (exact name
// first, then case-insensitive name or alias), -1 when absent.
func (cs *CatalogServer) findTool(name string, loose bool) int {
	for i, t := range cs.Tools {
		if t.Name == name {
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

// validate checks args against the tool's input schema; the compiled
// validator is cached per tool.
func (cs *CatalogServer) validate(tool int, args json.RawMessage) error {
	name := cs.Tools[tool].Name
	v, ok := cs.validators.Load(name)
	if !ok {
		v, _ = cs.validators.LoadOrStore(name, schema.Compile(cs.Tools[tool].InputSchema))
	}
	if fn, _ := v.(func(json.RawMessage) error); fn != nil {
		return fn(args)
	}
	return nil
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
