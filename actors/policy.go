package actors

import (
	"fmt"
	"path"
	"time"
)

// Policy restricts proxied tool calls (docs/SECURITY.md): allow and deny
// rules per server and tool, a cap on tool calls per run_python execution,
// and per-tool timeouts. The zero value allows everything.
type Policy struct {
	// Source is the policy file, for error messages; "" when there is none.
	Source string
	// Err is set when the file could not be read or parsed: every tool call
	// is then refused (fail closed).
	Err error
	// MaxCalls caps tool calls per execution; 0 means no cap.
	MaxCalls int
	// Servers holds rules by server name; "*" applies to every server.
	Servers map[string]ServerPolicy
}

// ServerPolicy is the rules for one server. Patterns are globs over tool
// names (path.Match syntax). With Allow set, only matching tools may be
// called; Deny wins over Allow.
type ServerPolicy struct {
	Allow    []string           `json:"allow,omitempty"`
	Deny     []string           `json:"deny,omitempty"`
	Timeouts map[string]float64 `json:"timeouts,omitempty"` // seconds, by tool name or pattern
}

// Check returns an error when the policy refuses server.tool.
func (p *Policy) Check(server, tool string) error {
	if p == nil {
		return nil
	}
	if p.Err != nil {
		return fmt.Errorf("Tool calls are disabled: the policy file %s is invalid: %v", p.Source, p.Err)
	}
	for _, key := range []string{"*", server} {
		sp, ok := p.Servers[key]
		if !ok {
			continue
		}
		if matchAny(sp.Deny, tool) {
			return fmt.Errorf("Tool %s.%s is denied by the policy (%s)", server, tool, p.Source)
		}
		if len(sp.Allow) > 0 && !matchAny(sp.Allow, tool) {
			return fmt.Errorf("Tool %s.%s is not allowed by the policy (%s)", server, tool, p.Source)
		}
	}
	return nil
}

// Timeout returns the policy's timeout for server.tool, the server's rule
// winning over "*"; ok is false when none applies.
func (p *Policy) Timeout(server, tool string) (d time.Duration, ok bool) {
	if p == nil {
		return 0, false
	}
	for _, key := range []string{server, "*"} {
		sp := p.Servers[key]
		if secs, found := sp.Timeouts[tool]; found {
			return time.Duration(secs * float64(time.Second)), true
		}
		for pat, secs := range sp.Timeouts {
			if m, _ := path.Match(pat, tool); m {
				return time.Duration(secs * float64(time.Second)), true
			}
		}
	}
	return 0, false
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if m, _ := path.Match(p, name); m {
			return true
		}
	}
	return false
}
