package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/engine"
	"github.com/bridge-mcp/bridge/engine/audit"
	"github.com/bridge-mcp/bridge/protocol/printable"
)

// replayCmd is `bridge replay ID` and `bridge replay --since T --tool NAME`:
// recorded calls run again against their recorded answers (engine.Replay).
func (m *Main) replayCmd(ctx context.Context, args []string) int {
	flags := flag.NewFlagSet("replay", flag.ContinueOnError)
	timeout := flags.Int("timeout", 0, "extend each call's recorded timeout to `SECONDS`")
	since := flags.String("since", "", "replay every recorded call since `WHEN` (a time like 2026-11-28T09:00:00Z or an age like 36h, 7d) that used --tool")
	tool := flags.String("tool", "", "with --since: the calls that called `NAME`, a server's tool or a saved tool")
	asJSON := flags.Bool("json", false, "one JSON object per replayed call: id, verdict, detail, status, exit_code, output, prior_calls, notes")
	rest, code, ok := m.parse("replay", flags, args, -1)
	if !ok {
		return code
	}
	switch {
	case len(rest) == 1 && *since == "" && *tool == "":
	case len(rest) == 0 && *since != "" && *tool != "":
	case len(rest) > 1:
		return m.usage("replay: one record ID at a time, or --since and --tool for many")
	default:
		return m.usage("replay: want a record ID (bridge audit show lists them), or both --since and --tool")
	}
	if *timeout < 0 {
		return m.usage("replay: invalid value %d for --timeout: want seconds, at least 1", *timeout)
	}
	env, ok := m.loadEnv()
	if !ok {
		return 2
	}
	dir := engine.AuditDir(env.StateDir)
	var targets []*audit.Record
	var err error
	if len(rest) == 1 {
		var t *audit.Record
		if t, err = findRecord(dir, rest[0]); err == nil {
			targets = []*audit.Record{t}
		}
	} else {
		t, ok := parseSince(*since, time.Now())
		if !ok {
			return m.usage("replay: invalid value %q for --since: want a time like 2026-11-28T09:00:00Z or an age like 36h or 7d", *since)
		}
		targets, err = usingTool(dir, t, *tool)
		if err == nil && len(targets) == 0 {
			fmt.Fprintf(m.Stderr, "bridge: replay: no recorded call since %s used %s\n", t.Format(time.RFC3339), *tool)
			return 0
		}
	}
	if err != nil {
		fmt.Fprintf(m.Stderr, "bridge: replay: %v\n", err)
		return 2
	}
	env.Audit = "off" // a replay is not a client's call
	failed := false
	for _, t := range targets {
		prior, err := priorCalls(dir, t)
		if err != nil {
			fmt.Fprintf(m.Stderr, "bridge: replay: %v\n", err)
			return 2
		}
		e := engine.New(env, Version(), m.logger(env, m.levelFromEnv(env, zerolog.WarnLevel)), m.Getenv, false)
		got, err := e.Replay(ctx, t, prior, time.Duration(*timeout)*time.Second)
		if err != nil {
			fmt.Fprintf(m.Stderr, "bridge: replay: %v\n", err)
			if errors.Is(err, engine.ErrNotReplayable) {
				failed = true
				continue
			}
			return 2
		}
		failed = failed || got.Verdict != engine.VerdictSame
		m.printReplay(e, env, got, *asJSON)
	}
	if failed {
		return 1
	}
	return 0
}

// printReplay prints one replayed call: its output as exec prints it, then
// the notes on the calls before it and the verdict; or, with asJSON, one
// line of JSON.
func (m *Main) printReplay(e *engine.Engine, env engine.Env, r engine.Replayed, asJSON bool) {
	text := unfence(textOf(e.Render(r.Result)), env.OutputMode)
	if asJSON {
		b, err := json.Marshal(struct {
			engine.Replayed
			Status   string `json:"status"`
			ExitCode *int   `json:"exit_code"`
			Output   string `json:"output"`
		}{r, r.Result.Status, r.Result.ExitCode, text})
		if err != nil {
			fmt.Fprintf(m.Stderr, "bridge: replay: %v\n", err)
			return
		}
		fmt.Fprintln(m.Stdout, string(b))
		return
	}
	if isTerminal(m.Stdout) {
		text = printable.String(text)
	}
	fmt.Fprintln(m.Stdout, text)
	if r.Prior > 0 {
		fmt.Fprintf(m.Stdout, "replay: re-ran the %d earlier calls of session %q first, from the audit trail\n", r.Prior, r.Session)
	}
	for _, n := range r.Notes {
		fmt.Fprintln(m.Stdout, "replay: note: "+printable.String(n))
	}
	fmt.Fprintln(m.Stdout, printable.String(engine.ReplayOne(r)))
}

// findRecord is the call record whose id is id, or starts with it when that
// prefix (8 characters at least) names one record only.
func findRecord(dir, id string) (*audit.Record, error) {
	var found []*audit.Record
	err := audit.Read(dir, audit.Filter{}, func(r *audit.Record) bool {
		if r.ID == id || len(id) >= 8 && strings.HasPrefix(r.ID, id) {
			found = append(found, r)
		}
		return true
	})
	switch {
	case err != nil:
		return nil, err
	case len(found) == 0:
		return nil, fmt.Errorf("no call record %q in %s (bridge audit show lists them)", id, dir)
	case len(found) > 1:
		return nil, fmt.Errorf("%d call records start with %q: give more of the id", len(found), id)
	}
	return found[0], nil
}

// priorCalls are the calls of t's session (same principal and session)
// recorded before it, oldest first.
func priorCalls(dir string, t *audit.Record) ([]*audit.Record, error) {
	var out []*audit.Record
	err := audit.Read(dir, audit.Filter{Principal: t.Principal, ExactPrincipal: true, Session: t.Session}, func(r *audit.Record) bool {
		if r.Seq >= t.Seq {
			return false
		}
		out = append(out, r)
		return true
	})
	return out, err
}

// usingTool are the calls since since that called tool: a server's tool
// (an inner call named tool, or server.tool), or a saved tool the code
// calls by name.
func usingTool(dir string, since time.Time, tool string) ([]*audit.Record, error) {
	name := regexp.QuoteMeta(tool)
	called := regexp.MustCompile(`(^|[^\w.])` + name + `\s*\(`)
	defined := regexp.MustCompile(`\bdef\s+` + name + `\s*\(`) // its definition is no call
	var out []*audit.Record
	err := audit.Read(dir, audit.Filter{Since: since}, func(r *audit.Record) bool {
		uses := slices.ContainsFunc(r.Inner, func(in audit.Inner) bool {
			return in.Tool != "" && (in.Tool == tool || in.Server+"."+in.Tool == tool)
		})
		if uses || r.Code != nil && called.MatchString(defined.ReplaceAllString(*r.Code, "")) {
			out = append(out, r)
		}
		return true
	})
	return out, err
}
