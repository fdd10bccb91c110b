package container

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// SetCPUWeight implements actors.CPUWeighter: `podman|docker update
// --cpu-shares` on the running container. Shares are cgroup v1's weight;
// on cgroup v2 both engines convert them to cpu.weight. Where cgroups
// enforce no limits (rootless podman on cgroup v1) there is nothing to
// set: weights are off and this does nothing.
func (b *box) SetCPUWeight(ctx context.Context, weight int) error {
	argv := b.l.WeightArgv(b.name, weight)
	if argv == nil {
		return nil
	}
	out, err := b.l.RuntimeCommand(ctx, argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("update --cpu-shares: %w: %s", err, firstLine(strings.TrimSpace(string(out))))
	}
	return nil
}

// WeightArgv is the command that sets the CPU shares of the running
// container name; nil where weights are off (an unresolved runtime, or
// cgroups that enforce no limits).
func (l *Launcher) WeightArgv(name string, weight int) []string {
	cli, podman, _, err := l.resolve()
	if err != nil || name == "" || !l.limitFacts(podman).CgroupLimits() {
		return nil
	}
	return append(append([]string{cli}, l.GlobalArgs()...), "update", "--cpu-shares", strconv.Itoa(weight), name)
}
