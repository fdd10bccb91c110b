package alias

import (
	"slices"
	"testing"
)

// TestServerAliases checks ALS-1 and the ALS-3 table.
func TestServerAliases(t *testing.T) {
	cases := []struct {
		name string
		in   []string
		want []string
	}{
		{"ALS-3 table", []string{"demo-server", "Other Server!", "class", "9lives"},
			[]string{"demo_server", "other_server_", "class_", "_9lives"}},
		{"empty falls back", []string{""}, []string{"server"}},
		{"only symbols", []string{"!!!"}, []string{"_"}},
		{"keywords", []string{"import", "None", "False", "async", "match", "type", "lambda"},
			[]string{"import_", "none", "false", "async_", "match", "type", "lambda_"}},
		{"keyword after digits check", []string{"1if"}, []string{"_1if"}},
		{"runs collapse", []string{"a--b..c", "GitHub/MCP"}, []string{"a_b_c", "github_mcp"}},
		{"non-ascii", []string{"café", "日本"}, []string{"caf_", "_"}},
		{"collisions in order", []string{"a-b", "a_b", "a.b"}, []string{"a_b", "a_b_2", "a_b_3"}},
		{"suffix skips a real base", []string{"x", "x_2", "x"}, []string{"x", "x_2", "x_3"}},
		{"real base later", []string{"x", "x", "x_2"}, []string{"x", "x_3", "x_2"}},
		{"empty names", []string{"", "", "server"}, []string{"server", "server_2", "server_3"}},
		{"keyword collision", []string{"class", "class_", "Class"}, []string{"class_", "class__2", "class__3"}},
		{"generated never equals a base", []string{"a", "a", "a_2_2", "a_2", "a_2"},
			[]string{"a", "a_3", "a_2_2", "a_2", "a_2_3"}},
		{"none", nil, []string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Servers(c.in); !slices.Equal(got, c.want) {
				t.Errorf("Servers(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

// TestToolAliases checks ALS-2: the same rules with fallback "tool", tools
// order, and "list_tools" reserved.
func TestToolAliases(t *testing.T) {
	cases := []struct {
		name string
		in   []string
		want []string
	}{
		{"table", []string{"get-sum", "read_file", "Echo", "class", "2fa"},
			[]string{"get_sum", "read_file", "echo", "class_", "_2fa"}},
		{"empty falls back", []string{"", "?"}, []string{"tool", "_"}},
		{"real x_2 keeps it", []string{"x", "x_2", "x"}, []string{"x", "x_2", "x_3"}},
		{"reserved", []string{"list_tools", "list-tools", "List Tools", "list_tools_"},
			[]string{"list_tools_", "list_tools__2", "list_tools__3", "list_tools__4"}},
		{"other reserved-looking names", []string{"list_tool", "call_tool"}, []string{"list_tool", "call_tool"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Tools(c.in); !slices.Equal(got, c.want) {
				t.Errorf("Tools(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

// TestToolBase: the alias a name asks for is what Tools gives its first
// holder.
func TestToolBase(t *testing.T) {
	for _, name := range []string{"get-sum", "", "class", "9lives", "list_tools", "List Tools", "__init__", "-_Class_-", "日本"} {
		if got, want := ToolBase(name), Tools([]string{name})[0]; got != want {
			t.Errorf("ToolBase(%q) = %q, want %q", name, got, want)
		}
	}
}
