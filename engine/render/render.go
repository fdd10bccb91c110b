// Package render turns the result of one run_python call into the MCP tool
// result for the configured output mode (SPEC §8.2, §8.3, §8.5).
package render

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/bridge-mcp/bridge/engine/toon"
	"github.com/bridge-mcp/bridge/protocol/result"
	"github.com/mark3labs/mcp-go/mcp"
)

// Output modes, as MCP_BRIDGE_OUTPUT_MODE names them.
const (
	modeCompact = "compact"
	modeTOON    = "toon"
	modeJSON    = "json"
)

// defaultSession is the session name used when the call names none.
const defaultSession = "default"

// lossTimeout is the loss reason of a session replaced because its cell
// ignored the timeout's interrupt (TMO-2).
const lossTimeout = "timeout"

// Render builds the tool result of r for mode, which the caller has
// validated: "compact", "toon" or "json" (anything else renders as compact).
// The result has one text content followed by the call's images (image
// content, in the order they were made), the payload as an ordered
// structuredContent object, and IsError set when the status is not success.
func Render(mode string, r result.Result) *mcp.CallToolResult {
	v := newView(r)
	var text string
	var structured toon.Object
	switch mode {
	case modeTOON:
		structured = v.full()
		enc, err := toon.Encode(structured, toon.Options{})
		if err != nil {
			// Unreachable: the payload holds only strings, ints, bools and
			// string lists. Fall back to the compact text rather than fail.
			text = v.compactText()
			break
		}
		text = "```toon\n" + enc + "\n```"
	case modeJSON:
		structured = v.full()
		text = "```json\n" + indentJSON(structured) + "\n```"
	default: // modeCompact
		structured = v.compact()
		text = v.compactText()
	}
	content := make([]mcp.Content, 0, 1+len(r.Images))
	content = append(content, mcp.NewTextContent(text))
	for _, img := range r.Images {
		content = append(content, mcp.NewImageContent(img.Data, img.MIMEType))
	}
	return &mcp.CallToolResult{
		Content:           content,
		StructuredContent: structured,
		IsError:           r.Status != result.StatusSuccess,
	}
}

// indentJSON returns the payload as JSON with a 2-space indent, keys in
// payload order.
func indentJSON(o toon.Object) string {
	raw, err := o.MarshalJSON()
	if err != nil {
		return "{}" // unreachable: see Render
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw) // unreachable: MarshalJSON writes valid JSON
	}
	return b.String()
}

// view is a Result with the derived values every form needs.
type view struct {
	r       result.Result
	session string
	stdout  []string // lines of the concatenated stdout chunks
	stderr  []string
	summary string
}

func newView(r result.Result) view {
	v := view{r: r, session: r.Session}
	if v.session == "" {
		v.session = defaultSession // an absent session argument means "default"
	}
	var out, errs strings.Builder
	for _, c := range r.Output {
		if c.Stream == result.StreamStderr {
			errs.WriteString(c.Data)
		} else {
			out.WriteString(c.Data)
		}
	}
	v.stdout = splitLines(out.String())
	v.stderr = splitLines(errs.String())
	v.summary = summaryOf(r, len(v.stdout) > 0 || len(v.stderr) > 0)
	return v
}

// splitLines splits s into lines on "\n" only (OUT-2). A final newline adds no
// empty element, and "" gives no lines; every other byte is kept.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// summaryOf returns the summary of r (§8.3); hasOutput says whether the call
// wrote anything to stdout or stderr.
func summaryOf(r result.Result, hasOutput bool) string {
	switch r.Status {
	case result.StatusSuccess:
		if hasOutput {
			return "Success"
		}
		return "Success (no output)"
	case result.StatusTimeout:
		return "Timeout: execution exceeded " + strconv.Itoa(r.TimeoutSeconds) + "s"
	case result.StatusValidation:
		return r.Error
	}
	if r.Internal {
		return "Unexpected failure"
	}
	return "Sandbox error: " + r.Error
}

// full returns the full payload (§8.2) of the toon and json modes: keys in
// the fixed order, each present per the "Full payload" column.
func (v view) full() toon.Object {
	r := v.r
	o := toon.Object{
		{Key: "status", Value: r.Status},
		{Key: "summary", Value: v.summary},
	}
	if r.ExitCode != nil {
		o = append(o, toon.Field{Key: "exitCode", Value: *r.ExitCode})
	}
	o = append(o, toon.Field{Key: "session", Value: v.session})
	o = v.appendShared(o)
	return append(o, toon.Field{Key: "durationMs", Value: r.DurationMs})
}

// compact returns the compact structuredContent (§8.2, "Compact" column).
func (v view) compact() toon.Object {
	r := v.r
	o := toon.Object{}
	if r.Status != result.StatusSuccess {
		o = append(o, toon.Field{Key: "status", Value: r.Status})
	}
	if r.Status != result.StatusSuccess || len(v.stdout) == 0 {
		o = append(o, toon.Field{Key: "summary", Value: v.summary})
	}
	if r.ExitCode != nil && *r.ExitCode != 0 {
		o = append(o, toon.Field{Key: "exitCode", Value: *r.ExitCode})
	}
	if v.session != defaultSession {
		o = append(o, toon.Field{Key: "session", Value: v.session})
	}
	return v.appendShared(o)
}

// appendShared appends the keys from servers to stateLost, whose presence
// rules are the same in both payloads.
func (v view) appendShared(o toon.Object) toon.Object {
	r := v.r
	if len(r.Servers) > 0 {
		o = append(o, toon.Field{Key: "servers", Value: r.Servers})
	}
	if len(v.stdout) > 0 {
		o = append(o, toon.Field{Key: "stdout", Value: v.stdout})
	}
	if len(v.stderr) > 0 {
		o = append(o, toon.Field{Key: "stderr", Value: v.stderr})
	}
	if r.Value != nil {
		o = append(o, toon.Field{Key: "result", Value: *r.Value})
	}
	if len(r.Images) > 0 {
		o = append(o, toon.Field{Key: "images", Value: len(r.Images)})
	}
	if len(r.ImageNotes) > 0 {
		o = append(o, toon.Field{Key: "imageNotes", Value: r.ImageNotes})
	}
	if r.Error != "" {
		o = append(o, toon.Field{Key: "error", Value: r.Error})
	}
	if r.Status == result.StatusTimeout {
		o = append(o, toon.Field{Key: "timeoutSeconds", Value: r.TimeoutSeconds})
	}
	if r.Truncated {
		o = append(o, toon.Field{Key: "truncated", Value: true})
	}
	if r.StateLost {
		o = append(o, toon.Field{Key: "stateLost", Value: true})
	}
	return o
}

// compactText returns the compact text form (§8.5), its parts joined by "\n".
func (v view) compactText() string {
	r := v.r
	var parts []string
	if r.Status != result.StatusSuccess {
		parts = append(parts, "status: "+r.Status)
	}
	if r.ExitCode != nil && *r.ExitCode != 0 {
		parts = append(parts, "exit: "+strconv.Itoa(*r.ExitCode))
	}
	block, hasOutput := outputBlock(r.Output)
	if hasOutput {
		parts = append(parts, block)
	}
	if r.Value != nil {
		parts = append(parts, *r.Value)
	}
	// A timeout's error says what its summary says, and more: the error
	// alone is shown.
	timeoutError := r.Status == result.StatusTimeout && r.Error != ""
	if !hasOutput && r.Value == nil && !timeoutError {
		parts = append(parts, v.summary)
	}
	if (r.Status == result.StatusTimeout || r.Status == result.StatusValidation) && r.Error != "" {
		parts = append(parts, "error: "+r.Error)
	}
	// A timeout's error says whether the session kept its state: a loss
	// the timeout caused is not noted again (structuredContent keeps
	// stateLost). An earlier loss this result reports still is.
	if r.StateLost && !(timeoutError && r.LossReason == lossTimeout) {
		note := "note: session state was lost"
		if r.LossReason != "" {
			note += " (" + r.LossReason + ")"
		}
		parts = append(parts, note)
	}
	for _, n := range r.ImageNotes {
		parts = append(parts, "note: "+n)
	}
	for _, n := range r.Notes {
		parts = append(parts, "note: "+n)
	}
	return strings.Join(parts, "\n")
}

// outputBlock returns the output of the compact text (§8.5) and whether any
// chunk had data. Chunks keep arrival order and their bytes. Each stderr run
// is preceded by a "stderr:" line, and a stdout run after a stderr run by a
// "stdout:" line; a leading stdout run has no marker. A marker always starts
// a line. Exactly one trailing "\n" of the block is dropped (OUT-1).
func outputBlock(chunks []result.Chunk) (string, bool) {
	var b strings.Builder
	prev := "" // stream of the previous non-empty chunk
	for _, c := range chunks {
		if c.Data == "" {
			continue
		}
		stream := result.StreamStdout
		if c.Stream == result.StreamStderr {
			stream = result.StreamStderr
		}
		if stream != prev && (stream == result.StreamStderr || prev != "") {
			if b.Len() > 0 && !strings.HasSuffix(b.String(), "\n") {
				b.WriteByte('\n')
			}
			b.WriteString(stream + ":\n")
		}
		b.WriteString(c.Data)
		prev = stream
	}
	if prev == "" {
		return "", false
	}
	return strings.TrimSuffix(b.String(), "\n"), true
}
