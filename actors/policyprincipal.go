package actors

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// PrincipalRules is one principal's part of the policy file (bridge serve):
// the top level's keys, held on top of the top level's rules. Every key
// can only narrow: deny at either level denies; approve or
// approveDestructive at either level gates; resources false at either
// level wins; the smaller timeout and maxToolCallsPerExecution win; and a
// tool must pass both levels' allow lists.
type PrincipalRules struct {
	MaxCalls           int
	ApproveDestructive bool
	Servers            map[string]ServerPolicy
}

// principal returns the rules of principal, nil when it has none of its own.
func (p *Policy) principal(principal string) *Policy {
	if p == nil || principal == "" {
		return nil
	}
	return p.Principals[principal]
}

// CheckFor returns an error when the policy refuses server.tool to
// principal: the top-level rules apply to everyone, and a principal with
// its own grants (the file's "principals") is held to both, so a grant
// can only narrow what the top level allows. A principal's grants list the
// servers it may reach: a server named in neither its map nor its "*" is
// refused, so a new server is not open to a restricted principal.
func (p *Policy) CheckFor(principal, server, tool string) error {
	if err := p.Check(server, tool); err != nil {
		return err
	}
	return p.heldFor(principal, server, func(pp *Policy) error { return pp.Check(server, tool) })
}

// heldFor applies check to principal's own rules, when it has them, once
// they grant server; its error names the principal.
func (p *Policy) heldFor(principal, server string, check func(pp *Policy) error) error {
	pp := p.principal(principal)
	if pp == nil {
		return nil
	}
	if err := pp.grants(principal, server); err != nil {
		return err
	}
	if err := check(pp); err != nil {
		return fmt.Errorf("%w (principal %s)", err, principal)
	}
	return nil
}

// grants refuses a server the principal's own rules do not name.
func (p *Policy) grants(principal, server string) error {
	_, named := p.rules[server]
	_, all := p.rules["*"]
	if !named && !all {
		return fmt.Errorf("Server %s is not granted to principal %s by the policy (%s)", server, principal, p.Source)
	}
	return nil
}

// GateFor names the rule that makes a call of server.tool by principal
// wait for a human's approval, "" when none does: either level gates.
func (p *Policy) GateFor(principal, server, tool string, annotations []byte) string {
	if g := p.gate("", server, tool, annotations); g != "" {
		return g
	}
	return p.principal(principal).gate("principals."+principal+".", server, tool, annotations)
}

// TimeoutFor is the smaller of the two levels' timeouts for server.tool;
// ok is false when neither has one.
func (p *Policy) TimeoutFor(principal, server, tool string) (d time.Duration, ok bool) {
	d, ok = p.Timeout(server, tool)
	if pd, pok := p.principal(principal).Timeout(server, tool); pok && (!ok || pd < d) {
		return pd, true
	}
	return d, ok
}

// ResourcesAllowedFor refuses server's resources to principal when either
// level turns them off, or the principal's own rules do not grant server.
func (p *Policy) ResourcesAllowedFor(principal, server string) error {
	if err := p.ResourcesAllowed(server); err != nil {
		return err
	}
	return p.heldFor(principal, server, func(pp *Policy) error { return pp.ResourcesAllowed(server) })
}

// MaxCallsFor is the smaller of the two levels' caps on tool calls per
// execution, 0 when neither has one.
func (p *Policy) MaxCallsFor(principal string) int {
	if p == nil {
		return 0
	}
	n := p.MaxCalls
	if pp := p.principal(principal); pp != nil && pp.MaxCalls > 0 && (n == 0 || pp.MaxCalls < n) {
		n = pp.MaxCalls
	}
	return n
}

// WithPrincipals sets the per-principal rules, each compiled with the same
// matcher as the top level; the error names the principal at fault.
func (p *Policy) WithPrincipals(rules map[string]PrincipalRules) error {
	if len(rules) == 0 {
		return nil
	}
	p.Principals = map[string]*Policy{}
	for name, pr := range rules {
		if pr.MaxCalls < 0 {
			return fmt.Errorf(`principal %q: "maxToolCallsPerExecution" must be 0 (no cap) or more`, name)
		}
		pp, err := NewPolicy(p.Source, pr.MaxCalls, pr.Servers)
		if err != nil {
			return fmt.Errorf("principal %q: %w", name, err)
		}
		pp.ApproveDestructive = pr.ApproveDestructive
		p.Principals[name] = pp
	}
	return nil
}

// Summary says what the policy holds in one line for bridge doctor: how
// many servers and principals have rules, the approvals in force (the
// rules a team lead most needs to see), and the cap on tool calls.
func (p *Policy) Summary() string {
	if p == nil {
		return "no rules"
	}
	parts := []string{fmt.Sprintf("rules for %d server%s", len(p.Servers), plural(len(p.Servers)))}
	if n := len(p.Principals); n > 0 {
		parts[0] += fmt.Sprintf(" and %d principal%s", n, plural(n))
	}
	gates := p.gates("")
	names := make([]string, 0, len(p.Principals))
	for name := range p.Principals {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		gates = append(gates, p.Principals[name].gates("principal "+name+": ")...)
	}
	if len(gates) == 0 {
		parts = append(parts, "no call needs approval")
	} else {
		parts = append(parts, "approval asked for "+strings.Join(gates, ", "))
	}
	if p.MaxCalls > 0 {
		parts = append(parts, fmt.Sprintf("at most %d tool calls per execution", p.MaxCalls))
	} else {
		parts = append(parts, "no cap on tool calls per execution")
	}
	return strings.Join(parts, "; ")
}

// gates lists p's approval rules, each prefixed: server.pattern for an
// approve rule, and the destructive tools of the servers approveDestructive
// covers.
func (p *Policy) gates(prefix string) []string {
	var out []string
	servers := make([]string, 0, len(p.Servers))
	for s := range p.Servers {
		servers = append(servers, s)
	}
	sort.Strings(servers)
	for _, s := range servers {
		for _, pat := range p.Servers[s].Approve {
			out = append(out, prefix+s+"."+pat)
		}
	}
	var on, off []string // servers whose own approveDestructive differs from the top level's
	for _, s := range servers {
		if ad := p.Servers[s].ApproveDestructive; ad != nil && *ad != p.ApproveDestructive {
			if *ad {
				on = append(on, s)
			} else {
				off = append(off, s)
			}
		}
	}
	if p.ApproveDestructive {
		except := ""
		if len(off) > 0 {
			except = ", except on " + strings.Join(off, ", ")
		}
		out = append(out, prefix+"destructive tools (approveDestructive"+except+")")
	}
	for _, s := range on {
		out = append(out, prefix+"destructive tools of "+s+" (approveDestructive)")
	}
	return out
}
