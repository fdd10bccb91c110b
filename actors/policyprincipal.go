package actors

import "fmt"

// CheckFor returns an error when the policy refuses server.tool to
// principal: the top-level rules apply to everyone, and a principal with
// its own grants (the file's "principals") is held to both, so a grant
// can only narrow what the top level allows. A principal's grants list the
// servers it may reach: a server named in neither its map nor its "*" is
// refused, so a new server is not open to a restricted principal.
func (p *Policy) CheckFor(principal, server, tool string) error {
	if err := p.Check(server, tool); err != nil || p == nil || principal == "" {
		return err
	}
	if pp := p.Principals[principal]; pp != nil {
		_, named := pp.rules[server]
		_, all := pp.rules["*"]
		if !named && !all {
			return fmt.Errorf("Server %s is not granted to principal %s by the policy (%s)", server, principal, p.Source)
		}
		if err := pp.Check(server, tool); err != nil {
			return fmt.Errorf("%w (principal %s)", err, principal)
		}
	}
	return nil
}

// WithPrincipals sets the per-principal grants, each compiled with the
// same matcher as the top level; the error names the principal at fault.
func (p *Policy) WithPrincipals(grants map[string]map[string]ServerPolicy) error {
	if len(grants) == 0 {
		return nil
	}
	p.Principals = map[string]*Policy{}
	for name, servers := range grants {
		pp, err := NewPolicy(p.Source, 0, servers)
		if err != nil {
			return fmt.Errorf("principal %q: %w", name, err)
		}
		p.Principals[name] = pp
	}
	return nil
}
