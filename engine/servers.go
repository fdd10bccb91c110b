package engine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"github.com/santhosh-tekuri/jsonschema/v6"

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

// compileSchema compiles a tool's input schema; nil when it does not
// compile (PXY-6 skips such schemas).
func compileSchema(schema json.RawMessage) func(json.RawMessage) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		return nil
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("tool.json", doc); err != nil {
		return nil
	}
	sch, err := c.Compile("tool.json")
	if err != nil {
		return nil
	}
	return func(args json.RawMessage) error {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(args))
		if err != nil {
			return fmt.Errorf("arguments are not JSON: %w", err)
		}
		if err := sch.Validate(v); err != nil {
			return fmt.Errorf("%s", lastLine(err.Error()))
		}
		return nil
	}
}

// lastLine is the most specific line of a multi-line validation error.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimPrefix(strings.TrimSpace(lines[len(lines)-1]), "- ")
}

// Signature renders a tool's Python-style signature from its input schema:
// required parameters, then optional ones defaulting to None, each group in
// the schema's property order.
func Signature(alias string, schema json.RawMessage) string {
	var s struct {
		Properties json.RawMessage `json:"properties"`
		Required   []string        `json:"required"`
	}
	_ = json.Unmarshal(schema, &s)
	req := map[string]bool{}
	for _, r := range s.Required {
		req[r] = true
	}
	var first, rest []string
	for _, p := range orderedProps(s.Properties) {
		var spec struct {
			Type any `json:"type"`
		}
		_ = json.Unmarshal(p.value, &spec)
		typ := "any"
		switch t := spec.Type.(type) {
		case string:
			typ = t
		case []any:
			parts := make([]string, len(t))
			for i, x := range t {
				parts[i] = fmt.Sprint(x)
			}
			typ = strings.Join(parts, " | ")
		}
		if req[p.key] {
			first = append(first, p.key+": "+typ)
		} else {
			rest = append(rest, p.key+": "+typ+" = None")
		}
	}
	return alias + "(" + strings.Join(append(first, rest...), ", ") + ")"
}

type prop struct {
	key   string
	value json.RawMessage
}

// orderedProps returns an object's members in their JSON order.
func orderedProps(obj json.RawMessage) []prop {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var out []prop
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return out
		}
		key, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return out
		}
		out = append(out, prop{key, v})
	}
	return out
}

// catalogStore keeps each server's tools/list under
// <state>/.bridge/catalog/<config hash>.json (PXY-8).
type catalogStore struct {
	dir string
	log zerolog.Logger
}

type catalogFile struct {
	FetchedAt time.Time         `json:"fetchedAt"`
	Version   string            `json:"version"`
	Tools     []json.RawMessage `json:"tools"`
}

func (s *catalogStore) path(hash string) string { return filepath.Join(s.dir, hash+".json") }

// Load implements actors.CatalogStore.
func (s *catalogStore) Load(hash string) ([]actors.ToolInfo, bool) {
	data, err := os.ReadFile(s.path(hash))
	if err != nil {
		return nil, false
	}
	var f catalogFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, false
	}
	tools := make([]actors.ToolInfo, 0, len(f.Tools))
	for _, raw := range f.Tools {
		if t, err := actors.ParseTool(raw); err == nil {
			tools = append(tools, t)
		}
	}
	return tools, true
}

// Save implements actors.CatalogStore: an atomic write with mode 0600.
func (s *catalogStore) Save(hash, version string, tools []actors.ToolInfo) {
	f := catalogFile{FetchedAt: time.Now().UTC(), Version: version, Tools: make([]json.RawMessage, len(tools))}
	for i, t := range tools {
		f.Tools[i] = t.Raw
	}
	data, err := json.Marshal(f)
	if err == nil {
		err = writeAtomic(s.path(hash), data)
	}
	if err != nil {
		s.log.Warn().Err(err).Msg("catalog cache not written")
	}
}

// Prune deletes cache entries older than 30 days whose hash matches no
// configured server.
func (s *catalogStore) Prune(live map[string]bool) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		hash := strings.TrimSuffix(e.Name(), ".json")
		info, err := e.Info()
		if err != nil || live[hash] || time.Since(info.ModTime()) < 30*24*time.Hour {
			continue
		}
		_ = os.Remove(filepath.Join(s.dir, e.Name()))
	}
}

func writeAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
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
