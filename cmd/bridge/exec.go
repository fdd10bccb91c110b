package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/actors"
	"github.com/bridge-mcp/bridge/engine"
)

// execCmd runs code through the same engine from a terminal and prints the
// text form. Exit codes: 0 success, 1 error, 2 validation or usage, 124 timeout.
func (m *Main) execCmd(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	servers := fs.String("servers", "", "comma-separated servers the code may call")
	session := fs.String("session", "", "session name")
	timeout := fs.Int("timeout", 0, "timeout in seconds")
	output := fs.String("output", "", "compact, toon or json")
	if err := fs.Parse(args); err != nil {
		return m.usage("exec: %v", err)
	}
	if fs.NArg() != 1 {
		return m.usage("exec: want exactly one CODE argument, or - to read code from stdin")
	}
	code := fs.Arg(0)
	if code == "-" {
		b, err := io.ReadAll(m.Stdin)
		if err != nil {
			return m.usage("exec: read stdin: %v", err)
		}
		code = string(b)
	}
	env, ok := m.loadEnv()
	if !ok {
		return 2
	}
	if *output != "" {
		switch mode := strings.ToLower(*output); mode {
		case "compact", "toon", "json":
			env.OutputMode = mode
		default:
			return m.usage("exec: invalid --output %q: want compact, toon or json", *output)
		}
	}
	raw := map[string]any{"code": code}
	if *servers != "" {
		raw["servers"] = strings.Split(*servers, ",")
	}
	if *session != "" {
		raw["session"] = *session
	}
	if *timeout != 0 {
		raw["timeout"] = *timeout
	}
	rawJSON, _ := json.Marshal(raw)
	e := engine.New(env, Version(), m.logger(m.levelFromEnv(env, zerolog.WarnLevel)), m.Getenv, false)
	a, msg := e.Validate(rawJSON)
	var res actors.Result
	emit := func(r actors.Result) {
		res = r
		fmt.Fprintln(m.Stdout, textOf(e.Render(r)))
	}
	if msg != "" {
		emit(actors.Result{Status: actors.StatusValidation, Error: msg, Session: actors.DefaultSession})
	} else {
		e.Exec(ctx, a, emit)
	}
	switch res.Status {
	case actors.StatusSuccess:
		return 0
	case actors.StatusValidation:
		return 2
	case actors.StatusTimeout:
		return 124
	}
	return 1
}

func textOf(r *mcp.CallToolResult) string {
	if len(r.Content) == 0 {
		return ""
	}
	if t, ok := r.Content[0].(mcp.TextContent); ok {
		return t.Text
	}
	return ""
}
