package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// machine describes where the run happened: OS, CPU, memory, kernel, the
// container runtime and the Go toolchain.
func machine(ctx context.Context, cli string) string {
	parts := []string{fmt.Sprintf("%s/%s", runtime.GOOS, runtime.GOARCH)}
	if v := osRelease(); v != "" {
		parts = append(parts, v)
	}
	if v, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		parts = append(parts, "kernel "+strings.TrimSpace(string(v)))
	}
	cpu := fmt.Sprintf("%d cores", runtime.NumCPU())
	if m := cpuModel(); m != "" {
		cpu += " " + m
	}
	parts = append(parts, cpu)
	if kb := meminfo("MemTotal"); kb > 0 {
		parts = append(parts, fmt.Sprintf("%.1f GiB RAM", float64(kb)/(1<<20)))
	}
	if cli != "" {
		parts = append(parts, containerRuntime(ctx, cli))
	}
	return strings.Join(append(parts, runtime.Version()), ", ")
}

func cpuModel() string {
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "model name"); ok {
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
		}
	}
	return ""
}

func osRelease() string {
	data, err := os.ReadFile("/etc/os-release")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "PRETTY_NAME="); ok {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// meminfo returns a /proc/meminfo field in kB.
func meminfo(field string) int64 {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// containerRuntime names the engine, its version, OCI runtime, cgroup
// version and rootless mode (podman, docker), else the CLI's version line.
func containerRuntime(ctx context.Context, cli string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	name := filepath.Base(cli)
	if name == "podman" {
		out, err := exec.CommandContext(ctx, cli, "info", "--format",
			"{{.Version.Version}} {{.Host.OCIRuntime.Name}} cgroups {{.Host.CgroupsVersion}} rootless={{.Host.Security.Rootless}}").Output()
		if err == nil {
			return "podman " + strings.TrimSpace(string(out))
		}
	}
	if name == "docker" {
		// The daemon's facts, not the client's version: the two differ (a 28.x client against a 20.10 engine).
		out, err := exec.CommandContext(ctx, cli, "info", "--format",
			"{{.ServerVersion}} {{.DefaultRuntime}} cgroups v{{.CgroupVersion}} {{.SecurityOptions}}").Output()
		if err == nil {
			f := strings.TrimSpace(string(out))
			mode := "rootless=false"
			if strings.Contains(f, "name=rootless") {
				mode = "rootless=true"
			}
			if i := strings.Index(f, " ["); i > 0 {
				f = f[:i]
			}
			return "docker engine " + f + " " + mode
		}
	}
	out, err := exec.CommandContext(ctx, cli, "--version").Output()
	if err != nil {
		return name
	}
	return strings.TrimSpace(string(out))
}
