package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/bridge-mcp/bridge/actors"
)

// PolicyFile is the policy's name inside the config directory. It is not a
// *.json name, so the server config loader never reads it as a server file.
const PolicyFile = "bridge.policy"

// policyDoc is the file's format.
type policyDoc struct {
	MaxToolCallsPerExecution int                            `json:"maxToolCallsPerExecution"`
	ApproveDestructive       bool                           `json:"approveDestructive"`
	Servers                  map[string]actors.ServerPolicy `json:"servers"`
	// Principals narrows the rules per principal of bridge serve.
	Principals map[string]principalDoc `json:"principals"`
}

// principalDoc is one principal's rules: the top level's keys, which can
// only narrow the top level's (actors.PrincipalRules).
type principalDoc struct {
	MaxToolCallsPerExecution int                            `json:"maxToolCallsPerExecution"`
	ApproveDestructive       bool                           `json:"approveDestructive"`
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
	compiled, err := actors.NewPolicy(p, doc.MaxToolCallsPerExecution, doc.Servers)
	if err != nil {
		pol.Err = fmt.Errorf("policy: %w", err)
		return pol
	}
	compiled.ApproveDestructive = doc.ApproveDestructive
	grants := map[string]actors.PrincipalRules{}
	for name, pd := range doc.Principals {
		grants[name] = actors.PrincipalRules{MaxCalls: pd.MaxToolCallsPerExecution, ApproveDestructive: pd.ApproveDestructive, Servers: pd.Servers}
	}
	if err := compiled.WithPrincipals(grants); err != nil {
		pol.Err = fmt.Errorf("policy: %w", err)
		return pol
	}
	return compiled
}
