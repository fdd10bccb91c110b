package container

import (
	"os"

	"golang.org/x/sys/unix"
)

// localLimitFacts returns the facts fallbackLimits reads when they are
// known without asking the runtime: a local podman's rootless mode is its
// euid's and its cgroup version the host's, and on a cgroup v2 host every
// engine has cgroup limits (the zero facts say so). ok is false for a
// docker daemon on cgroup v1 (it may be rootless whatever the client's
// euid) and for a remote podman (CONTAINER_HOST). A variable for tests.
var localLimitFacts = func(podman bool) (f RuntimeFacts, ok bool) {
	var fs unix.Statfs_t
	v2 := unix.Statfs("/sys/fs/cgroup", &fs) == nil && fs.Type == unix.CGROUP2_SUPER_MAGIC
	switch {
	case podman && os.Getenv("CONTAINER_HOST") == "":
		f = RuntimeFacts{Engine: "podman", Rootless: os.Geteuid() != 0, Cgroup: "1"}
		if v2 {
			f.Cgroup = "2"
		}
		return f, true
	case v2:
		return RuntimeFacts{}, true
	}
	return RuntimeFacts{}, false
}

// hybridCgroups reports whether a local engine runs on hybrid cgroups: v1
// controllers at /sys/fs/cgroup with a v2 hierarchy at
// /sys/fs/cgroup/unified (systemd's hybrid layout), which crun refuses. A
// remote podman (CONTAINER_HOST) runs on another host. A variable for
// tests.
var hybridCgroups = func() bool {
	if os.Getenv("CONTAINER_HOST") != "" || os.Getenv("CONTAINER_CONNECTION") != "" {
		return false
	}
	var root, unified unix.Statfs_t
	return unix.Statfs("/sys/fs/cgroup", &root) == nil && root.Type != unix.CGROUP2_SUPER_MAGIC &&
		unix.Statfs("/sys/fs/cgroup/unified", &unified) == nil && unified.Type == unix.CGROUP2_SUPER_MAGIC
}
