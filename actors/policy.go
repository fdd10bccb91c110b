package actors

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Policy restricts proxied tool calls (docs/SECURITY.md): allow and deny
// rules per server and tool, a cap on tool calls per run_python execution,
// and per-tool timeouts. The zero value allows everything; build a policy
// with rules through NewPolicy, which compiles its patterns once.
type Policy struct {
	// Source is the policy file, for error messages; "" when there is none.
	Source string
	// Err is set when the file could not be read or parsed: every tool call
	// is then refused (fail closed).
	Err error
	// MaxCalls caps tool calls per execution; 0 means no cap.
	MaxCalls int
	// ApproveDestructive gates the tools whose annotations say
	// destructiveHint: true, on servers that do not override it.
	ApproveDestructive bool
	// Servers holds rules by server name; "*" applies to every server.
	Servers map[string]ServerPolicy
	// Principals holds each principal's own grants (bridge serve),
	// checked on top of these rules (CheckFor).
	Principals map[string]*Policy
	// rules is Servers compiled, by server name.
	rules map[string]serverRules
}

// ServerPolicy is the rules for one server, as the file writes them.
// Patterns are ToolPattern syntax over tool names. With Allow set, only
// matching tools may be called; Deny wins over Allow.
type ServerPolicy struct {
	Allow    []string           `json:"allow,omitempty"`
	Deny     []string           `json:"deny,omitempty"`
	Timeouts map[string]float64 `json:"timeouts,omitempty"` // seconds, by tool name or pattern
	// Approve names the tools a human approves call by call (approve.go);
	// a tool it names may be called even when Allow does not name it.
	Approve []string `json:"approve,omitempty"`
	// ApproveDestructive overrides the top-level setting for this server.
	ApproveDestructive *bool `json:"approveDestructive,omitempty"`
	// Resources false refuses the server's resources (list and read);
	// unset or true allows them (resources.go).
	Resources *bool `json:"resources,omitempty"`
}

// serverRules is one ServerPolicy compiled.
type serverRules struct {
	allow, deny, approve []ToolPattern
	exact                map[string]time.Duration // timeouts by exact tool name
	timeouts             []timeoutRule            // pattern timeouts, most specific first
}

type timeoutRule struct {
	pattern ToolPattern
	d       time.Duration
}

// NewPolicy compiles servers' patterns; the error names the server and the
// pattern at fault.
func NewPolicy(source string, maxCalls int, servers map[string]ServerPolicy) (*Policy, error) {
	p := &Policy{Source: source, MaxCalls: maxCalls, Servers: servers, rules: map[string]serverRules{}}
	for name, sp := range servers {
		var r serverRules
		var err error
		if r.allow, err = compilePatterns(sp.Allow); err != nil {
			return nil, fmt.Errorf("server %q: allow: %w", name, err)
		}
		if r.deny, err = compilePatterns(sp.Deny); err != nil {
			return nil, fmt.Errorf("server %q: deny: %w", name, err)
		}
		if r.approve, err = compilePatterns(sp.Approve); err != nil {
			return nil, fmt.Errorf("server %q: approve: %w", name, err)
		}
		r.exact = map[string]time.Duration{}
		for pat, secs := range sp.Timeouts {
			if secs <= 0 {
				return nil, fmt.Errorf("server %q: timeout of %q must be above 0 seconds", name, pat)
			}
			tp, err := CompileToolPattern(pat)
			if err != nil {
				return nil, fmt.Errorf("server %q: timeouts: %w", name, err)
			}
			d := time.Duration(secs * float64(time.Second))
			r.exact[pat] = d
			if strings.ContainsAny(pat, "*?") {
				r.timeouts = append(r.timeouts, timeoutRule{tp, d})
			}
		}
		// The longest pattern is the most specific; ties go by text, so
		// the rule that applies never depends on map order.
		sort.Slice(r.timeouts, func(i, j int) bool {
			a, b := r.timeouts[i].pattern.String(), r.timeouts[j].pattern.String()
			if len(a) != len(b) {
				return len(a) > len(b)
			}
			return a < b
		})
		p.rules[name] = r
	}
	return p, nil
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
		r, ok := p.rules[key]
		if !ok {
			continue
		}
		if matchAny(r.deny, tool) {
			return fmt.Errorf("Tool %s.%s is denied by the policy (%s)", server, tool, p.Source)
		}
		if len(r.allow) > 0 && !matchAny(r.allow, tool) && !p.approved(server, tool) {
			return fmt.Errorf("Tool %s.%s is not allowed by the policy (%s)", server, tool, p.Source)
		}
	}
	return nil
}

// Timeout returns the policy's timeout for server.tool, the server's rule
// winning over "*", and within one an exact name over patterns; ok is
// false when none applies.
func (p *Policy) Timeout(server, tool string) (d time.Duration, ok bool) {
	if p == nil {
		return 0, false
	}
	for _, key := range []string{server, "*"} {
		r := p.rules[key]
		if d, found := r.exact[tool]; found {
			return d, true
		}
		for _, t := range r.timeouts {
			if t.pattern.Match(tool) {
				return t.d, true
			}
		}
	}
	return 0, false
}

// approved reports whether an approve rule ("*" or the server's) names
// server.tool.
func (p *Policy) approved(server, tool string) bool {
	return matchAny(p.rules["*"].approve, tool) || matchAny(p.rules[server].approve, tool)
}

// NeedsApproval reports whether a human must approve a call of server.tool
// that Check allowed: an approve rule names it, or approveDestructive is on
// for the server (its own setting over "*"'s over the top level) and the
// tool's annotations say destructiveHint: true. Only an explicit true
// counts: the spec's default for a tool without annotations is
// "destructive", which would gate every unannotated tool, and annotations
// come from the server itself, so the operator decides how far to trust
// them, per server.
func (p *Policy) NeedsApproval(server, tool string, annotations []byte) bool {
	return p.gate("", server, tool, annotations) != ""
}

// gate names the rule of p that gates server.tool (NeedsApproval), as the
// file spells its place under prefix ("" at the top level,
// "principals.bob." for a principal's own rules); "" when none does.
func (p *Policy) gate(prefix, server, tool string, annotations []byte) string {
	if p == nil || p.Err != nil {
		return ""
	}
	for _, key := range []string{server, "*"} {
		if matchAny(p.rules[key].approve, tool) {
			return fmt.Sprintf("approve in %sservers.%s", prefix, key)
		}
	}
	on, where := p.ApproveDestructive, prefix+"approveDestructive"
	for _, key := range []string{"*", server} {
		if sp, ok := p.Servers[key]; ok && sp.ApproveDestructive != nil {
			on, where = *sp.ApproveDestructive, fmt.Sprintf("approveDestructive in %sservers.%s", prefix, key)
		}
	}
	if on && destructive(annotations) {
		return where + " (the tool's annotations say destructiveHint: true)"
	}
	return ""
}

// destructive reports whether annotations hold destructiveHint: true.
func destructive(annotations []byte) bool {
	var a struct {
		Destructive *bool `json:"destructiveHint"`
	}
	if len(annotations) == 0 || json.Unmarshal(annotations, &a) != nil {
		return false
	}
	return a.Destructive != nil && *a.Destructive
}
