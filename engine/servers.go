package engine

import (
	"github.com/bridge-mcp/bridge/actors"
	"github.com/bridge-mcp/bridge/engine/config"
	"github.com/bridge-mcp/bridge/engine/search"
)

// catalogFuncs are the pure helpers the router and catalog use.
func catalogFuncs() *actors.CatalogFuncs {
	return &actors.CatalogFuncs{
		ServerAliases: config.ServerAliases,
		ToolAliases:   config.ToolAliases,
		Index: func(docs []actors.SearchDoc) func(string, int) []int {
			sd := make([]search.Doc, len(docs))
			for i, d := range docs {
				sd[i] = search.Doc{Server: d.Server, ServerAlias: d.ServerAlias, Tool: d.Tool, ToolAlias: d.ToolAlias, Description: d.Description}
			}
			ix := search.NewIndex(sd)
			return func(q string, limit int) []int {
				hits := ix.Search(q, limit)
				out := make([]int, len(hits))
				for i, h := range hits {
					out[i] = h.Doc
				}
				return out
			}
		},
		Suggest:   search.Suggest,
		Validator: compileSchema,
		Signature: Signature,
	}
}

// specsFrom converts loaded config entries to server specs with each
// child's explicit environment (ENV-1).
func specsFrom(set config.Set, getenv func(string) string) []actors.ServerSpec {
	out := make([]actors.ServerSpec, 0, len(set.Entries))
	for _, e := range set.Entries {
		spec := actors.ServerSpec{
			Name: e.Name, Description: e.Description, Type: e.Type, Command: e.Command, Args: e.Args,
			Cwd: e.Cwd, URL: e.URL, Headers: e.Headers, Hash: e.Hash,
		}
		if e.Type == "stdio" {
			spec.Env = config.ChildEnv(e, getenv)
		}
		out = append(out, spec)
	}
	return out
}
