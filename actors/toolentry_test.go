package actors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/sourcegraph/jsonrpc2"

	"github.com/bridge-mcp/bridge/protocol"
)

// TestParseTool: each kind of tools/list entry the bridge cannot use is
// skipped with its reason; a usable one keeps its fields, with a null or
// absent inputSchema meaning no arguments, and a description, outputSchema
// or annotations of the wrong JSON type dropped.
func TestParseTool(t *testing.T) {
	deep := `{"name":"deep","inputSchema":{"type":"object","properties":{"x":` + strings.Repeat(`{"items":`, 100) + `{}` + strings.Repeat(`}`, 100) + `}}}`
	cases := []struct {
		name, raw, want string // want: the Skip reason, "" for usable
	}{
		{"plain", `{"name":"ok","inputSchema":{"type":"object","properties":{"a":{"type":"string"}}}}`, ""},
		{"no schema", `{"name":"ok"}`, ""},
		{"null schema", `{"name":"ok","inputSchema":null}`, ""},
		{"null properties", `{"name":"ok","inputSchema":{"type":"object","properties":null}}`, ""},
		{"boolean property schema", `{"name":"ok","inputSchema":{"type":"object","properties":{"a":true}}}`, ""},
		{"unicode name", `{"name":"café-日本","inputSchema":{}}`, ""},
		{"name of 256 bytes", `{"name":"` + strings.Repeat("x", 256) + `"}`, ""},
		{"odd optional fields", `{"name":"ok","description":5,"outputSchema":"x","annotations":[1]}`, ""},
		{"escaped braces in strings", `{"name":"ok","description":"` + strings.Repeat(`{[\"`, 200) + `"}`, ""},

		{"number schema", `{"name":"bad","inputSchema":5}`, "inputSchema is a number, not an object"},
		{"string schema", `{"name":"bad","inputSchema":"x"}`, "inputSchema is a string, not an object"},
		{"array schema", `{"name":"bad","inputSchema":[]}`, "inputSchema is an array, not an object"},
		{"boolean schema", `{"name":"bad","inputSchema":true}`, "inputSchema is a boolean, not an object"},
		{"array properties", `{"name":"bad","inputSchema":{"type":"object","properties":["a"]}}`, "inputSchema.properties is an array, not an object"},
		{"string properties", `{"name":"bad","inputSchema":{"properties":"a"}}`, "inputSchema.properties is a string, not an object"},
		{"no name", `{"inputSchema":{}}`, "name is missing"},
		{"null name", `{"name":null}`, "name is null, not a string"},
		{"number name", `{"name":5}`, "name is a number, not a string"},
		{"object name", `{"name":{"a":1}}`, "name is an object, not a string"},
		{"empty name", `{"name":""}`, "name is empty"},
		{"long name", `{"name":"` + strings.Repeat("x", 257) + `"}`, "name is 257 bytes long, over the 256 the bridge allows"},
		{"invalid UTF-8", "{\"name\":\"a\xff\"}", "name is not valid UTF-8"},
		{"lone surrogate", `{"name":"a\ud800"}`, "name is not valid UTF-8"},
		{"NUL", `{"name":"a\u0000b"}`, "name has control characters"},
		{"newline", `{"name":"a\nb"}`, "name has control characters"},
		{"C1 control", `{"name":"a\u009bb"}`, "name has control characters"},
		{"bidi override", `{"name":"a\u202eb"}`, "name has control characters"},
		{"special name", `{"name":"__init__"}`, "its Python name __init__ is one of Python's special names"},
		{"special after aliasing", `{"name":"-_Class_-"}`, "its Python name __class__ is one of Python's special names"},
		{"too deep", deep, "it nests 104 levels deep, over the 100 the bridge allows"},
		{"past the decoder's limit", `{"name":"x","a":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, "the entry does not parse"},
		{"not an object", `5`, "the entry is a number, not an object"},
		{"null entry", `null`, "the entry is null, not an object"},
		{"array entry", `[{"name":"x"}]`, "the entry is an array, not an object"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ParseTool(json.RawMessage(c.raw))
			if got.Skip != c.want {
				t.Errorf("ParseTool(%.80s).Skip = %q, want %q", c.raw, got.Skip, c.want)
			}
			if string(got.Raw) != c.raw {
				t.Errorf("Raw = %.80s, want the entry as it came", got.Raw)
			}
		})
	}
}

// TestParseToolFields: what a usable entry keeps and what it drops.
func TestParseToolFields(t *testing.T) {
	cases := []struct {
		name, raw string
		want      ToolInfo // Raw and Skip are not compared
	}{
		{"defaults", `{"name":"a"}`, ToolInfo{Name: "a", InputSchema: json.RawMessage(`{"type":"object"}`)}},
		{"all kept", `{"name":"a","description":"d","inputSchema":{"type":"object"},"outputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}`,
			ToolInfo{Name: "a", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`), OutputSchema: json.RawMessage(`{"type":"object"}`), Annotations: json.RawMessage(`{"readOnlyHint":true}`)}},
		{"wrong types dropped", `{"name":"a","description":["d"],"outputSchema":"x","annotations":5}`,
			ToolInfo{Name: "a", InputSchema: json.RawMessage(`{"type":"object"}`)}},
		{"nulls dropped", `{"name":"a","description":null,"outputSchema":null,"annotations":null}`,
			ToolInfo{Name: "a", InputSchema: json.RawMessage(`{"type":"object"}`)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := ParseTool(json.RawMessage(c.raw))
			got.Raw = nil
			if got.Skip != "" || got.Name != c.want.Name || got.Description != c.want.Description ||
				string(got.InputSchema) != string(c.want.InputSchema) || string(got.OutputSchema) != string(c.want.OutputSchema) ||
				string(got.Annotations) != string(c.want.Annotations) {
				t.Errorf("ParseTool(%s) = %+v, want %+v", c.raw, got, c.want)
			}
		})
	}
}

// TestParseToolsDuplicates: the first usable entry of a name keeps it; a
// later one of that name is skipped, even on another page; an unusable
// first entry does not take the name from a later usable one.
func TestParseToolsDuplicates(t *testing.T) {
	raws := []json.RawMessage{
		json.RawMessage(`{"name":"a","inputSchema":5}`),
		json.RawMessage(`{"name":"a","description":"first usable"}`),
		json.RawMessage(`{"name":"b"}`),
		json.RawMessage(`{"name":"a","description":"second"}`),
		json.RawMessage(`{"name":"A"}`), // another name: aliases tell them apart
	}
	var got []string
	for _, ti := range ParseTools(raws) {
		got = append(got, ti.Name+":"+ti.Skip)
	}
	want := []string{"a:inputSchema is a number, not an object", "a:", "b:", "a:an earlier tool has the same name", "A:"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("ParseTools = %q, want %q", got, want)
	}
}

// TestSkipSummary: the one line doctor and the log show, with names
// escaped and cut short, entries without a name by position, and at most
// ten named.
func TestSkipSummary(t *testing.T) {
	var many []ToolInfo
	for i := range 12 {
		many = append(many, ToolInfo{Name: fmt.Sprint("t", i), Skip: "why"})
	}
	cases := []struct {
		name  string
		tools []ToolInfo
		want  string
	}{
		{"none", []ToolInfo{{Name: "ok"}}, ""},
		{"one", []ToolInfo{{Name: "ok"}, {Name: "bad", Skip: "inputSchema is a string, not an object"}},
			"skipped 1 tool the bridge cannot use: 'bad' (inputSchema is a string, not an object)"},
		{"escaped, by position", []ToolInfo{{Name: "a\x1b[2J\u202e\xff", Skip: "r1"}, {Name: "ok"}, {Skip: "name is missing"}},
			`skipped 2 tools the bridge cannot use: 'a\x1b[2J\u202e\xff' (r1), entry 3 (name is missing)`},
		{"cut short", []ToolInfo{{Name: strings.Repeat("é", 100), Skip: "r"}},
			"skipped 1 tool the bridge cannot use: '" + strings.Repeat("é", 60) + "...' (r)"},
		{"at most ten", many, "skipped 12 tools the bridge cannot use: 't0' (why), 't1' (why), 't2' (why), 't3' (why), 't4' (why), " +
			"'t5' (why), 't6' (why), 't7' (why), 't8' (why), 't9' (why), and 2 more"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, skipped := SplitTools(c.tools)
			if got := SkipSummary(skipped); got != c.want {
				t.Errorf("SkipSummary = %q, want %q", got, c.want)
			}
		})
	}
}

// TestCatalogKeepsSkippedOut: the catalog server holds only the usable
// tools (aliases computed over them alone), the sandbox's server frame
// carries only those, and describe_server names the skipped ones.
func TestCatalogKeepsSkippedOut(t *testing.T) {
	tools := ParseTools([]json.RawMessage{
		json.RawMessage(`{"name":"get-x"}`),
		json.RawMessage(`{"name":"get_x","inputSchema":"x"}`),
		json.RawMessage(`{"inputSchema":{}}`),
		json.RawMessage(`{"name":"get_x"}`),
	})
	cs := newCatalogServer(ServerSpec{Name: "s", Alias: "s"}, nil, tools, true)
	if got, want := fmt.Sprint(cs.Aliases), "[get_x get_x_2]"; got != want {
		t.Errorf("aliases = %s, want %s", got, want)
	}
	var sent []string
	for _, pt := range cs.protocolServer().Tools {
		sent = append(sent, pt.Name)
	}
	if got, want := fmt.Sprint(sent), "[get-x get_x]"; got != want {
		t.Errorf("the sandbox gets %s, want %s", got, want)
	}
	d := describe(cs, true)
	got, _ := json.Marshal(d["skipped"])
	want := `[{"entry":2,"name":"get_x","reason":"inputSchema is a string, not an object"},{"entry":3,"name":null,"reason":"name is missing"}]`
	if string(got) != want {
		t.Errorf("describe skipped = %s, want %s", got, want)
	}
	if got, want := d["note"], "skipped 2 tools the bridge cannot use: 'get_x' (inputSchema is a string, not an object), entry 3 (name is missing)"; got != want {
		t.Errorf("describe note = %v, want %q", got, want)
	}
	if _, ok := describe(newCatalogServer(ServerSpec{Name: "t"}, nil, tools[:1], true), true)["skipped"]; ok {
		t.Error("describe of a server that skipped nothing has a skipped key")
	}
}

// junkToolsDial is a scripted server whose tools/list holds a usable tool
// and junk.
func junkToolsDial(wg *sync.WaitGroup) func(context.Context, *serverConn) error {
	return scriptedDial(wg, func(id json.RawMessage, method string) string {
		var result string
		switch method {
		case "initialize":
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"junk","version":"1"}}`
		case "tools/list":
			result = `{"tools":[{"name":"good","inputSchema":{"type":"object"}},{"name":"bad","inputSchema":"x"},` +
				`{"name":"props","inputSchema":{"type":"object","properties":[]}},{"name":"nl\nname"},5,{"name":"good"}]}`
		default:
			result = `{"content":[{"type":"text","text":"called"}]}`
		}
		return fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
	})
}

// TestJunkToolsNamedOnce: a server whose tools/list holds junk starts; its
// start logs one warn line naming every skipped entry; describe_server
// names them; a call by a skipped name says why it cannot be called; the
// usable tool works.
func TestJunkToolsNamedOnce(t *testing.T) {
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // last: after the client's cleanup closed its pipes
	var logs syncBuffer
	deps := &ClientDeps{StartTimeout: 5 * time.Second, CallTimeout: 5 * time.Second, Store: knownStore{},
		OnTools: func(string, string, []ToolInfo) {}, Log: zerolog.New(&logs), dial: junkToolsDial(&wg)}
	c := NewClient(ServerSpec{Name: "junk", Type: "stdio", Hash: "j"}, deps)
	sup := quietSupervisor("client-test")
	sup.Add(c)
	serveUntilCleanup(t, sup)
	r := NewRouter()
	r.CallTimeout = 5 * time.Second
	r.Log = zerolog.Nop()
	rsup := quietSupervisor("router-test")
	rsup.Add(r)
	serveUntilCleanup(t, rsup)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	tools, err := c.Tools(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Tools(ctx); err != nil { // a second use logs nothing more
		t.Fatal(err)
	}
	summary := "skipped 5 tools the bridge cannot use: 'bad' (inputSchema is a string, not an object), " +
		"'props' (inputSchema.properties is an array, not an object), 'nl\\nname' (name has control characters), " +
		"entry 5 (the entry is a number, not an object), 'good' (an earlier tool has the same name)"
	var warned []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var e struct{ Level, Message string }
		if json.Unmarshal([]byte(line), &e) == nil && e.Level == "warn" {
			warned = append(warned, e.Message)
		}
	}
	if len(warned) != 1 || warned[0] != summary {
		t.Errorf("warn lines = %q, want one: %q", warned, summary)
	}

	<-r.publish(catalogSource{specs: []ServerSpec{c.Spec()}, clients: map[string]*Client{"junk": c}, tools: map[string][]ToolInfo{"junk": tools}})
	scope := Scope{Servers: []string{"junk"}}
	got, err := r.ServeSandbox(ctx, scope, protocol.MethodDescribeServer, json.RawMessage(`{"name":"junk"}`))
	if err != nil {
		t.Fatal(err)
	}
	d := got.(map[string]any)["server"].(map[string]any)
	if d["note"] != summary || len(d["tools"].([]map[string]any)) != 1 {
		t.Errorf("describe_server: note %q with %d tools, want %q with 1", d["note"], len(d["tools"].([]map[string]any)), summary)
	}
	_, err = r.ServeSandbox(ctx, scope, protocol.MethodCallTool, json.RawMessage(`{"server":"junk","tool":"bad"}`))
	var je *jsonrpc2.Error
	if want := "Server 'junk' lists a tool 'bad' the bridge cannot use: inputSchema is a string, not an object."; !errors.As(err, &je) || je.Message != want {
		t.Errorf("call of a skipped tool: %v, want %q", err, want)
	}
	if _, err := r.ServeSandbox(ctx, scope, protocol.MethodCallTool, json.RawMessage(`{"server":"junk","tool":"good"}`)); err != nil {
		t.Errorf("call of the usable tool: %v", err)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
