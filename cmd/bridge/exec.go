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

	"github.com/bridge-mcp/bridge/engine"
	"github.com/bridge-mcp/bridge/protocol/printable"
	"github.com/bridge-mcp/bridge/protocol/result"
)

// execCmd runs code through the same engine from a terminal and prints the
// text form. Exit codes: 0 success, 1 error, 2 validation or usage, 124 timeout.
func (m *Main) execCmd(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("exec", flag.ContinueOnError)
	servers := fs.String("servers", "", "comma-separated server `NAMES` the code may call")
	session := fs.String("session", "", "session `NAME` (default \"default\")")
	timeout := fs.Int("timeout", 0, "timeout in `SECONDS` (default MCP_BRIDGE_TIMEOUT)")
	output := fs.String("output", "", "`MODE`: compact, toon or json; json prints one JSON document, toon raw TOON (default MCP_BRIDGE_OUTPUT_MODE)")
	pos, exit, ok := m.parse("exec", fs, args, -1)
	if !ok {
		return exit
	}
	if len(pos) != 1 {
		if len(pos) > 1 {
			return m.usage("exec: want one CODE argument, got %d: quote the code as one argument, e.g. bridge exec 'print(1 + 1)' (bridge exec --help)", len(pos))
		}
		return m.usage("exec: want one CODE argument, or - to read code from stdin: bridge exec 'print(1)' (bridge exec --help)")
	}
	if *timeout < 0 {
		return m.usage("exec: invalid --timeout %d: want a number of seconds >= 1 (bridge exec --help)", *timeout)
	}
	code := pos[0]
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
			return m.usage("exec: invalid --output %q: want compact, toon or json (bridge exec --help)", *output)
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
	rawJSON, err := json.Marshal(raw)
	if err != nil {
		return m.usage("exec: arguments: %v", err)
	}
	e := engine.New(env, Version(), m.logger(env, m.levelFromEnv(env, zerolog.WarnLevel)), m.Getenv, false)
	m.lazySignIn(e)
	a, msg := e.Validate(rawJSON)
	// On a terminal, cell output could move the cursor, rewrite the
	// header, set the window title or write the clipboard (OSC 52): it is
	// rendered (printable.String), and a status line on stderr, after it,
	// is the last word.
	tty := isTerminal(m.Stdout)
	var res result.Result
	emit := func(r result.Result) {
		res = r
		if src := engine.SpillPath(r); src != "" {
			// The session's container is removed when exec exits: copy the
			// full output out first and point the marker at the copy.
			dst, err := e.FetchSpill(ctx, r)
			if err != nil {
				dst = "(lost when exec exits: " + err.Error() + "; raise MCP_BRIDGE_MAX_OUTPUT_BYTES, or write the output to a file and print it in parts)"
			}
			for i := range r.Output {
				r.Output[i].Data = strings.ReplaceAll(r.Output[i].Data, src, dst)
			}
		}
		var notes []string
		if env.OutputMode != "json" && env.OutputMode != "toon" {
			notes, r = takeNotes(r)
		}
		text := unfence(textOf(e.Render(r)), env.OutputMode)
		if env.OutputMode == "json" {
			text = withNotes(text, r.Notes)
		}
		if tty {
			text = printable.String(text)
		}
		defer func() {
			for _, n := range notes {
				fmt.Fprintln(m.Stderr, "note: "+printable.String(n))
			}
		}()
		if _, err := fmt.Fprintln(m.Stdout, text); err != nil {
			res.Status = result.StatusError
			fmt.Fprintf(m.Stderr, "bridge: exec: write result: %v\n", err)
		}
	}
	if msg != "" {
		emit(result.Result{Status: result.StatusValidation, Error: msg, Session: result.DefaultSession})
	} else {
		// Approvals and relayed questions are answered on the terminal.
		e.Exec(engine.WithHuman(ctx, newTTYHuman()), a, emit)
	}
	if tty {
		fmt.Fprintln(m.Stderr, statusLine(res))
	}
	switch res.Status {
	case result.StatusSuccess:
		return 0
	case result.StatusValidation:
		return 2
	case result.StatusTimeout:
		return 124
	}
	return 1
}

// statusLine restates the result's status and exit code, which the header
// on stdout shows too, where the cell's own output may have drawn over it.
// A result without an exit code (timeout, validation) has no exit part.
func statusLine(r result.Result) string {
	if r.ExitCode == nil {
		return fmt.Sprintf("bridge: status %s", r.Status)
	}
	return fmt.Sprintf("bridge: status %s, exit %d", r.Status, *r.ExitCode)
}

// takeNotes moves the notes out of r, for compact output: they go to
// stderr, so that stdout holds only what the code printed and returned
// (x=$(bridge exec 'print(2+2)') is 4). json and toon keep them inside
// their one document.
func takeNotes(r result.Result) ([]string, result.Result) {
	var notes []string
	if r.StateLost {
		n := "session state was lost"
		if r.LossReason != "" {
			n += " (" + r.LossReason + ")"
		}
		notes = append(notes, n)
		r.StateLost = false
	}
	notes = append(append(notes, r.ImageNotes...), r.Notes...)
	r.ImageNotes, r.Notes = nil, nil
	return notes, r
}

// withNotes adds notes to exec's JSON document as its last key, "notes":
// the MCP result's payload has a fixed key set (§8.2) without them, but
// exec prints one document, and its notes belong in it.
func withNotes(doc string, notes []string) string {
	body, ok := strings.CutSuffix(strings.TrimRight(doc, "\n"), "}")
	if len(notes) == 0 || !ok {
		return doc
	}
	list, err := json.MarshalIndent(notes, "  ", "  ")
	if err != nil {
		return doc
	}
	out := strings.TrimRight(body, "\n ") + ",\n  \"notes\": " + string(list) + "\n}"
	if !json.Valid([]byte(out)) {
		return doc
	}
	return out
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

// unfence returns the bare document of the json and toon forms, which the
// tool result wraps in a markdown fence for the model, so that the
// terminal's output pipes into jq or a TOON reader.
func unfence(text, mode string) string {
	if mode != "json" && mode != "toon" {
		return text
	}
	body, ok := strings.CutPrefix(text, "```"+mode+"\n")
	if !ok {
		return text
	}
	body, ok = strings.CutSuffix(body, "\n```")
	if !ok {
		return text
	}
	return body
}
