package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"github.com/bridge-mcp/bridge/engine"
	"github.com/bridge-mcp/bridge/engine/audit"
	"github.com/bridge-mcp/bridge/engine/snapshot"
)

// auditCmd is `bridge audit verify|show`: the audit trail of the state dir.
func (m *Main) auditCmd(_ context.Context, args []string) int {
	flags := flag.NewFlagSet("audit", flag.ContinueOnError)
	principal := flags.String("principal", "", "only the calls of `PRINCIPAL` (show)")
	session := flags.String("session", "", "only the calls in `SESSION` (show)")
	since := flags.String("since", "", "only the calls since `WHEN`: a time (2026-11-28T09:00:00Z) or an age (36h, 7d) (show)")
	server := flags.String("server", "", "only the calls that called a tool of `SERVER` (show)")
	tool := flags.String("tool", "", "only the calls that called `TOOL` (show)")
	asJSON := flags.Bool("json", false, "one record per line, as stored (show)")
	switch {
	case len(args) == 0:
		return m.usage("audit: want a subcommand: verify or show (bridge audit --help)")
	case args[0] == "-h" || args[0] == "--help" || args[0] == "-help":
		m.commandHelp("audit", flags)
		return 0
	case args[0] != "verify" && args[0] != "show":
		return m.usage("audit: unknown subcommand %q: want verify or show (bridge audit --help)", args[0])
	}
	sub := args[0]
	if _, code, ok := m.parse("audit "+sub, flags, args[1:], 0); !ok {
		return code
	}
	env, ok := m.loadEnv()
	if !ok {
		return 2
	}
	dir := engine.AuditDir(env.StateDir)
	if sub == "verify" {
		return m.auditVerify(env, dir)
	}
	f := audit.Filter{Principal: *principal, Session: *session, Server: *server, Tool: *tool}
	if *since != "" {
		t, ok := parseSince(*since, time.Now())
		if !ok {
			return m.usage("audit show: invalid value %q for --since: want a time like 2026-11-28T09:00:00Z or an age like 36h or 7d", *since)
		}
		f.Since = t
	}
	var err error
	n := 0
	if err = audit.Read(dir, f, func(r *audit.Record) bool {
		n++
		if *asJSON {
			b, _ := json.Marshal(r)
			fmt.Fprintf(m.Stdout, "%s\n", b)
		} else {
			fmt.Fprintln(m.Stdout, showLine(r))
		}
		return true
	}); errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	if err != nil {
		fmt.Fprintf(m.Stderr, "bridge: audit show: %v\n", err)
		return 1
	}
	if n == 0 && !*asJSON {
		fmt.Fprintf(m.Stderr, "no audit records match in %s\n", dir)
	}
	return 0
}

// auditVerify checks the chain: exit 0 when intact, 1 naming the first
// record edited, removed or reordered, 2 when it cannot be checked.
func (m *Main) auditVerify(env engine.Env, dir string) int {
	key, _, err := snapshot.ReadKey(env.KeyFile)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(m.Stderr, "bridge: audit verify: no key file %s: the records are chained with it (MCP_BRIDGE_KEY_FILE names the one the bridge used)\n", env.KeyFile)
		return 2
	}
	if err != nil {
		fmt.Fprintf(m.Stderr, "bridge: audit verify: %v\n", err)
		return 2
	}
	rep, err := audit.Verify(dir, key)
	var broken *audit.Broken
	switch {
	case errors.As(err, &broken):
		fmt.Fprintf(m.Stdout, "chain broken at %v\n", broken)
		return 1
	case errors.Is(err, fs.ErrNotExist):
		fmt.Fprintf(m.Stdout, "0 records in %s (MCP_BRIDGE_AUDIT=on, or bridge serve, writes them)\n", dir)
		return 0
	case err != nil:
		fmt.Fprintf(m.Stderr, "bridge: audit verify: %v\n", err)
		return 2
	}
	fmt.Fprintf(m.Stdout, "%d records, chain intact\n", rep.Records)
	if rep.From > 1 {
		fmt.Fprintf(m.Stdout, "note: the chain starts at the checkpoint of record %d: the files before it were removed by MCP_BRIDGE_AUDIT_RETENTION\n", rep.From)
	}
	for _, f := range rep.Incomplete {
		fmt.Fprintf(m.Stdout, "note: %s ends in an incomplete line: a crash while it was written (not tampering)\n", filepath.Base(f))
	}
	return 0
}

// showLine is one call record for people: when, who, where, how it ended,
// the code's digest and the inner calls.
func showLine(r *audit.Record) string {
	who := r.Principal
	if who == "" {
		who = "-"
	}
	var inner []string
	for _, in := range r.Inner {
		name := in.Method
		if in.Server != "" {
			name = in.Server + "." + in.Tool
		}
		if in.Outcome != "ok" {
			name += " (error)"
		}
		inner = append(inner, name)
	}
	for _, a := range r.Approvals {
		inner = append(inner, fmt.Sprintf("approval %s.%s: %s", a.Server, a.Tool, a.Decision))
	}
	line := fmt.Sprintf("%s  %s  %s #%d  %s  %dms  code %s  id %s", r.Time.Format(time.RFC3339), who, r.Session, r.Call, r.Status, r.DurMs, r.CodeSHA[:12], r.ID)
	if len(inner) > 0 {
		line += "  [" + strings.Join(inner, ", ") + "]"
	}
	return line
}

// parseSince reads --since: an RFC 3339 time, or an age before now (a Go
// duration, or Nd days).
func parseSince(s string, now time.Time) (time.Time, bool) {
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, true
	}
	d, ok := engine.ParseAge(s)
	return now.Add(-d), ok
}
