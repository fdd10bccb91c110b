package actors

// toolentry.go decides which entries of a server's tools/list the bridge can
// use (issue 34). An entry it cannot use is kept, marked with the reason, so
// the disk catalog holds the raw list (PXY-8) and doctor, describe_server and
// the log can name it; the catalog keeps it out of everything else (search,
// calls, and above all the sandbox's proxy builder).

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/bridge-mcp/bridge/actors/mcpwire"
	"github.com/bridge-mcp/bridge/protocol/alias"
)

// maxToolName bounds a tool name in bytes. The MCP spec recommends names of
// 1 to 128 ASCII characters, so every name it recommends fits twice over;
// a longer one is junk that would only bloat every doc and message.
const maxToolName = 256

// maxToolDepth bounds how deep a tool entry nests (the entry itself is
// level 1). Real schemas nest a few levels; the sandbox's json decoder
// raises RecursionError near 1,000 levels, which would end its frame
// reader, so a deeper entry must never reach it.
const maxToolDepth = 100

// ParseTools reads one tools/list's entries, in order. Every entry comes
// back with its Raw; one the bridge cannot use has Skip set. A usable
// entry whose name an earlier usable entry already has is skipped too: the
// first one keeps the name, as a call by name would reach only one of them.
func ParseTools(raws []json.RawMessage) []ToolInfo {
	out := make([]ToolInfo, len(raws))
	seen := make(map[string]bool, len(raws))
	for i, raw := range raws {
		t := ParseTool(raw)
		if t.Skip == "" && seen[t.Name] {
			t.Skip = "an earlier tool has the same name"
		}
		if t.Skip == "" {
			seen[t.Name] = true
		}
		out[i] = t
	}
	return out
}

// ParseTool reads the fields the bridge uses from one raw tools/list entry.
// An entry the bridge cannot use has Skip set (toolProblem) and, when its
// name is a string, Name. A description, outputSchema or annotations of the
// wrong JSON type is dropped: the tool works without it.
func ParseTool(raw json.RawMessage) ToolInfo {
	t := ToolInfo{Raw: raw}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		t.Skip = fmt.Sprintf("the entry is %s, not an object", mcpwire.TypeOf(raw))
		if err != nil && mcpwire.TypeOf(raw) == "an object" { // nested past encoding/json's limit
			t.Skip = "the entry does not parse"
		}
		return t
	}
	if json.Unmarshal(m["name"], &t.Name) != nil {
		t.Name = "" // a name of another type is no name
	}
	if t.Skip = toolProblem(raw, m, t.Name); t.Skip != "" {
		return t
	}
	t.InputSchema = m["inputSchema"]
	if mcpwire.IsNull(t.InputSchema) {
		t.InputSchema = json.RawMessage(`{"type":"object"}`)
	}
	if json.Unmarshal(m["description"], &t.Description) != nil {
		t.Description = ""
	}
	t.OutputSchema = objectOrNil(m["outputSchema"])
	t.Annotations = objectOrNil(m["annotations"])
	return t
}

// toolProblem says why the bridge cannot use a tool entry (raw, decoded: m,
// named name), "" when it can: the name (nameProblem), nesting deeper than
// maxToolDepth, an inputSchema that is not an object (absent or null is
// fine: it means no arguments), or its properties that are not an object.
// Those two are what the proxy's signature is built from.
func toolProblem(raw json.RawMessage, m map[string]json.RawMessage, name string) string {
	if why := nameProblem(m["name"], name); why != "" {
		return why
	}
	if d := mcpwire.Depth(raw); d > maxToolDepth {
		return fmt.Sprintf("it nests %d levels deep, over the %d the bridge allows", d, maxToolDepth)
	}
	in := m["inputSchema"]
	if mcpwire.IsNull(in) {
		return ""
	}
	if k := mcpwire.TypeOf(in); k != "an object" {
		return fmt.Sprintf("inputSchema is %s, not an object", k)
	}
	var schema map[string]json.RawMessage
	if json.Unmarshal(in, &schema) != nil {
		return "inputSchema does not parse" // cannot happen: TypeOf saw an object
	}
	if p := schema["properties"]; !mcpwire.IsNull(p) && mcpwire.TypeOf(p) != "an object" {
		return fmt.Sprintf("inputSchema.properties is %s, not an object", mcpwire.TypeOf(p))
	}
	return ""
}

// nameProblem says why the sandbox cannot bind a tool whose raw name is raw
// (decoded: name), "" when it can. A name must be a non-empty string of at
// most maxToolName bytes, valid UTF-8 (Go decodes invalid bytes and lone
// surrogates to U+FFFD, so a call would send the server another name), with
// no control or bidirectional formatting characters (they make a name show
// as something else in docs, errors and logs), whose alias is not a Python
// special name such as __init__ or __class__ (a proxy module or object
// already has those, and some cannot be set at all).
func nameProblem(raw json.RawMessage, name string) string {
	switch {
	case raw == nil:
		return "name is missing"
	case mcpwire.TypeOf(raw) != "a string":
		return fmt.Sprintf("name is %s, not a string", mcpwire.TypeOf(raw))
	case name == "":
		return "name is empty"
	case len(name) > maxToolName:
		return fmt.Sprintf("name is %d bytes long, over the %d the bridge allows", len(name), maxToolName)
	case strings.ContainsRune(name, utf8.RuneError):
		return "name is not valid UTF-8"
	case strings.ContainsFunc(name, func(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) }):
		return "name has control characters"
	}
	if a := alias.ToolBase(name); len(a) > 4 && strings.HasPrefix(a, "__") && strings.HasSuffix(a, "__") {
		return fmt.Sprintf("its Python name %s is one of Python's special names", a)
	}
	return ""
}

// objectOrNil is raw when it is a JSON object, nil otherwise.
func objectOrNil(raw json.RawMessage) json.RawMessage {
	if mcpwire.IsNull(raw) || mcpwire.TypeOf(raw) != "an object" {
		return nil
	}
	return raw
}

// SkippedTool is a tools/list entry the bridge cannot use, as doctor,
// describe_server and the log name it.
type SkippedTool struct {
	Name   string // for display: escaped and cut short (displayName); "" when the entry has no name
	Entry  int    // its position in tools/list, from 1
	Reason string
	name   string // as the server sent it
}

// label is the tool as a message names it: its quoted name, or its
// position when it has none.
func (s SkippedTool) label() string {
	if s.Name == "" {
		return fmt.Sprintf("entry %d", s.Entry)
	}
	return "'" + s.Name + "'"
}

// SplitTools separates the tools the bridge can use from the entries it
// skips. tools is returned as it is when it skips none.
func SplitTools(tools []ToolInfo) ([]ToolInfo, []SkippedTool) {
	var skipped []SkippedTool
	for i, t := range tools {
		if t.Skip != "" {
			skipped = append(skipped, SkippedTool{Name: displayName(t.Name), Entry: i + 1, Reason: t.Skip, name: t.Name})
		}
	}
	if len(skipped) == 0 {
		return tools, nil
	}
	usable := make([]ToolInfo, 0, len(tools)-len(skipped))
	for _, t := range tools {
		if t.Skip == "" {
			usable = append(usable, t)
		}
	}
	return usable, skipped
}

// maxSkipNamed bounds the entries one summary names.
const maxSkipNamed = 10

// SkipSummary is one line naming the skipped entries and why, "" for none:
// "skipped 2 tools the bridge cannot use: 'bad' (inputSchema is a string,
// not an object), entry 4 (name is missing)".
func SkipSummary(skipped []SkippedTool) string {
	if len(skipped) == 0 {
		return ""
	}
	parts := make([]string, 0, min(len(skipped), maxSkipNamed)+1)
	for _, s := range skipped[:min(len(skipped), maxSkipNamed)] {
		parts = append(parts, fmt.Sprintf("%s (%s)", s.label(), s.Reason))
	}
	if more := len(skipped) - maxSkipNamed; more > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", more))
	}
	noun := "tools"
	if len(skipped) == 1 {
		noun = "tool"
	}
	return fmt.Sprintf("skipped %d %s the bridge cannot use: %s", len(skipped), noun, strings.Join(parts, ", "))
}

// displayMax bounds, in characters, a name shown in a message.
const displayMax = 60

// displayName is name as a message may show it: Go-escaped (control and
// bidi characters, invalid bytes, quotes), and cut after displayMax
// characters with "...".
func displayName(name string) string {
	n := 0
	for i := range name {
		if n == displayMax {
			name = name[:i] + "..."
			break
		}
		n++
	}
	q := strconv.Quote(name)
	return q[1 : len(q)-1]
}

// logSkipped warns about the entries of tools the bridge cannot use: at
// every start (before is nil), and after a list_changed only when they
// differ from before's, so a server that lists the same junk is named once
// per start, never per call.
func (c *Client) logSkipped(before, tools []ToolInfo) {
	_, skipped := SplitTools(tools)
	line := SkipSummary(skipped)
	if line == "" {
		return
	}
	if before != nil {
		if _, old := SplitTools(before); SkipSummary(old) == line {
			return
		}
	}
	c.log.Warn().Int("skipped", len(skipped)).Msg(line)
}
