package bench

import "testing"

func TestCgroupCPUFile(t *testing.T) {
	for _, c := range []struct{ name, text, want string }{
		{"v1", "9:name=systemd:/libpod_parent/libpod-ab\n2:cpuacct:/libpod_parent/libpod-ab\n1:cpu:/libpod_parent/libpod-ab\n0::/libpod_parent/libpod-ab\n",
			"/sys/fs/cgroup/cpuacct/libpod_parent/libpod-ab/cpuacct.usage"},
		{"v1 joined controllers", "4:cpu,cpuacct:/docker/ab\n", "/sys/fs/cgroup/cpuacct/docker/ab/cpuacct.usage"},
		{"private namespace", "0::/\n", ""},
		{"v2 path not on this host", "0::/no-such-group-for-the-bench-test\n", ""},
		{"empty", "", ""},
	} {
		if got := cgroupCPUFile(c.text); got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}
