package engine

import (
	"github.com/bridge-mcp/bridge/actors"
	"github.com/bridge-mcp/bridge/engine/config"
)

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
