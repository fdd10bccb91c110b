package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/bridge-mcp/bridge/actors"
)

// PolicyFile is the policy's name inside the config directory. It is not a
// *.json name, so the server config loader never reads it as a server file.
const PolicyFile = "bridge.policy"

// policyDoc is the file's format.
type policyDoc struct {
	MaxToolCallsPerExecution int                            `json:"maxToolCallsPerExecution"`
	Servers                  map[string]actors.ServerPolicy `json:"servers"`
}

// LoadPolicy reads <dir>/bridge.policy. A missing file is no policy; a file
// that cannot be read or parsed yields a policy with Err set, which refuses
// every tool call (fail closed).
func LoadPolicy(dir string) *actors.Policy {
	p := filepath.Join(dir, PolicyFile)
	data, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	pol := &actors.Policy{Source: p}
	if err != nil {
		pol.Err = err
		return pol
	}
	var doc policyDoc
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		pol.Err = fmt.Errorf("policy: %w", err)
		return pol
	}
	if doc.MaxToolCallsPerExecution < 0 {
		pol.Err = errors.New(`policy: "maxToolCallsPerExecution" must be 0 (no cap) or more`)
		return pol
	}
	for server, sp := range doc.Servers {
		for _, pat := range append(append(append([]string{}, sp.Allow...), sp.Deny...), keys(sp.Timeouts)...) {
			if _, err := path.Match(pat, ""); err != nil {
				pol.Err = fmt.Errorf("policy: server %q: bad pattern %q: %w", server, pat, err)
				return pol
			}
		}
		for tool, secs := range sp.Timeouts {
			if secs <= 0 {
				pol.Err = fmt.Errorf("policy: server %q: timeout of %q must be above 0 seconds", server, tool)
				return pol
			}
		}
	}
	pol.MaxCalls, pol.Servers = doc.MaxToolCallsPerExecution, doc.Servers
	return pol
}

func keys(m map[string]float64) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
