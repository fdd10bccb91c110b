package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

func TestAskForm(t *testing.T) {
	schema := map[string]any{
		"type": "object",
		"properties": map[string]any{
			"decision": map[string]any{"type": "string", "enum": []string{"once", "run", "deny"}},
			"count":    map[string]any{"type": "integer", "default": 3},
			"note":     map[string]any{"type": "string"},
		},
		"required": []string{"decision"},
	}
	for _, tc := range []struct {
		name, input string
		want        mcp.ElicitationResponseAction
		content     map[string]any
	}{
		{"answered, defaults taken", "run\n\n\n", mcp.ElicitationResponseActionAccept, map[string]any{"decision": "run", "count": 3}},
		{"all given", "once\n7\nhi\n", mcp.ElicitationResponseActionAccept, map[string]any{"decision": "once", "count": int64(7), "note": "hi"}},
		{"required empty", "\n", mcp.ElicitationResponseActionDecline, nil},
		{"not in enum", "yes\n", mcp.ElicitationResponseActionDecline, nil},
		{"end of input", "", mcp.ElicitationResponseActionDecline, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			res, err := askForm(strings.NewReader(tc.input), &out, mcp.ElicitationParams{Message: "Approve x.y?\x1b[2J", RequestedSchema: schema})
			if err != nil {
				t.Fatal(err)
			}
			if res.Action != tc.want {
				t.Fatalf("action %q, want %q", res.Action, tc.want)
			}
			if strings.Contains(out.String(), "\x1b") {
				t.Errorf("the message reached the terminal with its escape: %q", out.String())
			}
			if tc.content != nil {
				got, _ := res.Content.(map[string]any)
				for k, v := range tc.content {
					if got[k] != v {
						t.Errorf("%s = %#v, want %#v", k, got[k], v)
					}
				}
				if len(got) != len(tc.content) {
					t.Errorf("content %v, want %v", got, tc.content)
				}
			}
		})
	}
}

// TestTTYHumanWithoutTerminal: bridge exec with no terminal declines.
func TestTTYHumanWithoutTerminal(t *testing.T) {
	h := &ttyHuman{open: func() (io.ReadWriteCloser, error) { return nil, errors.New("no tty") }}
	res, err := h.Elicit(context.Background(), mcp.ElicitationRequest{Params: mcp.ElicitationParams{Message: "m", RequestedSchema: map[string]any{}}})
	if err != nil || res.Action != mcp.ElicitationResponseActionDecline {
		t.Errorf("got %v, %v; want a decline", res, err)
	}
}
