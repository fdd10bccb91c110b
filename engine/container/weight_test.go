package container

import (
	"slices"
	"testing"
)

// TestWeightArgv: the CPU weight is `update --cpu-shares N name` on podman
// and docker where cgroups enforce limits, and nothing at all where they
// do not (rootless podman on cgroup v1): no command that could fail on
// every call.
func TestWeightArgv(t *testing.T) {
	here := localLimitFacts
	defer func() { localLimitFacts = here }()
	for _, tt := range []struct {
		name  string
		cli   string
		facts RuntimeFacts
		want  []string // after the CLI and its global flags; nil: no command
	}{
		{"rootful podman, cgroup v1", "podman", RuntimeFacts{Engine: "podman", Cgroup: "1"}, []string{"update", "--cpu-shares", "256", "box"}},
		{"rootless podman, cgroup v2", "podman", RuntimeFacts{Engine: "podman", Rootless: true, Cgroup: "2"}, []string{"update", "--cpu-shares", "256", "box"}},
		{"docker", "docker", RuntimeFacts{Engine: "docker", Cgroup: "2"}, []string{"update", "--cpu-shares", "256", "box"}},
		{"rootless podman, cgroup v1", "podman", RuntimeFacts{Engine: "podman", Rootless: true, Cgroup: "1"}, nil},
	} {
		localLimitFacts = func(bool) (RuntimeFacts, bool) { return tt.facts, true }
		l, cli := testLauncher(t, tt.cli, nil)
		got := l.WeightArgv("box", 256)
		if tt.want == nil {
			if got != nil {
				t.Errorf("%s: WeightArgv = %q, want none", tt.name, got)
			}
			continue
		}
		if len(got) < len(tt.want)+1 || got[0] != cli || !slices.Equal(got[len(got)-len(tt.want):], tt.want) {
			t.Errorf("%s: WeightArgv = %q, want %q after the CLI and global flags", tt.name, got, tt.want)
		}
	}
}
