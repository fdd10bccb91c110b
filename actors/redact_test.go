package actors

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestScopedError checks issue 13's error-text rule: a start failure shows
// its reason and stderr tail only to a call that grants the server; other
// errors pass unchanged.
func TestScopedError(t *testing.T) {
	c := &Client{spec: ServerSpec{Name: "broken"}}
	start := c.startError(`cwd "/home/u/secret-project" does not exist`, "error withheld", "API_KEY=sk-123 rejected")
	wrapped := fmt.Errorf("search: %w", start)
	const withheld = "Server 'broken' failed to start: error withheld; last stderr: (withheld: add the server to the servers argument of run_python to see it)"
	const full = `Server 'broken' failed to start: cwd "/home/u/secret-project" does not exist; last stderr: API_KEY=sk-123 rejected`
	tests := []struct {
		name    string
		servers []string
		err     error
		want    string
	}{
		{"granted", []string{"other", "broken"}, start, full},
		{"not granted", nil, start, withheld},
		{"granted another server", []string{"other"}, start, withheld},
		{"wrapped, not granted", []string{}, wrapped, withheld},
		{"other error", nil, errors.New("Server 'broken' was stopped"), "Server 'broken' was stopped"},
	}
	for _, tt := range tests {
		if got := scopedError(Scope{Servers: tt.servers}, "broken", tt.err); got != tt.want {
			t.Errorf("%s:\n got %s\nwant %s", tt.name, got, tt.want)
		}
	}
	exited := c.startError("exit status 1", "exit status 1", "boom")
	if got := RedactedError(exited); !strings.HasPrefix(got, "Server 'broken' failed to start: exit status 1; last stderr: (withheld") {
		t.Errorf("RedactedError = %q, want the exit status kept", got)
	}
}

// TestDescribeHidesCwd checks that describe_server shows a server's host
// directory only to calls that grant it.
func TestDescribeHidesCwd(t *testing.T) {
	s := &CatalogServer{Spec: ServerSpec{Name: "fs", Cwd: "/home/u/project"}}
	if got := describe(s, true)["cwd"]; got != "/home/u/project" {
		t.Errorf("granted cwd = %v, want the path", got)
	}
	if got := describe(s, false)["cwd"]; got != hiddenCwd {
		t.Errorf("ungranted cwd = %v, want %q", got, hiddenCwd)
	}
	s.Spec.Cwd = ""
	if got := describe(s, false)["cwd"]; got != nil {
		t.Errorf("ungranted unset cwd = %v, want nil (None: the bridge's own directory)", got)
	}
}
