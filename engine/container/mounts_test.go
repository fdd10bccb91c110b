package container

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestParseMounts checks MCP_BRIDGE_MOUNTS parsing: defaults, modes,
// whitespace, symlink resolution, and the reason of each invalid entry.
func TestParseMounts(t *testing.T) {
	dir := t.TempDir()
	data, out := filepath.Join(dir, "data"), filepath.Join(dir, "out")
	state := filepath.Join(dir, "home", "MCPs")
	for _, d := range []string{data, out, filepath.Join(state, ".bridge", "x")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(data, link); err != nil {
		t.Fatal(err)
	}
	got, err := ParseMounts(data+":/data, "+out+":/mnt/out:rw ,"+link+":/workspace/in:ro", state, state)
	if err != nil {
		t.Fatal(err)
	}
	want := []Mount{{Host: data, Container: "/data"}, {Host: out, Container: "/mnt/out", RW: true}, {Host: data, Container: "/workspace/in"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if got, err := ParseMounts("  ", state, state); got != nil || err != nil {
		t.Errorf("blank: %v, %v", got, err)
	}
	bad := []struct{ spec, want string }{
		{"rel:/data", `an absolute host path, not "rel"`},
		{dir + "/nope:/data", "an existing host path: " + dir + "/nope does not exist"},
		{data + ":/", "a container path under"},
		{data + ":/usr", "not /usr"},
		{data + ":/dataset", "not /dataset"},
		{data + ":/workspace", "not /workspace"},
		{data + ":/workspace/.bridge/x", "not /workspace/.bridge/x"},
		{data + ":/data/", `an absolute, clean container path, not "/data/"`},
		{data + ":/data:RW", `mode ro or rw, not "RW"`},
		{data + ":/data,", "HOST:CONTAINER[:ro|rw] entries"},
		{data + `:/data"x`, "paths without quotes"},
		{data + ":/data," + out + ":/data", "each container path once: /data is mounted twice"},
		{state + ":/data", "neither is nor contains the bridge's state or config dir (" + state + ")"},
		{filepath.Join(state, ".bridge", "x") + ":/data", "neither is nor contains"},
		{filepath.Join(dir, "home") + ":/data", "neither is nor contains"},
	}
	for _, c := range bad {
		_, err := ParseMounts(c.spec, state, state)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("ParseMounts(%q) = %v, want one line containing %q", c.spec, err, c.want)
		}
	}
	// A host path inside the state dir, outside .bridge, is allowed.
	inside := filepath.Join(state, "datasets")
	if err := os.MkdirAll(inside, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseMounts(inside+":/data", state, state); err != nil {
		t.Errorf("a folder inside the state dir: %v", err)
	}
}

// TestMountArgs checks the mount flags: podman binds with nosuid, nodev and
// noexec and the keep-id mapping when rootless; docker --mount binds; none
// without mounts.
func TestMountArgs(t *testing.T) {
	ms := []Mount{{Host: "/h/a", Container: "/data"}, {Host: "/h/b", Container: "/mnt/b", RW: true}}
	cases := []struct {
		name           string
		podman, keepID bool
		user           string
		want           []string
	}{
		{"podman rootful", true, false, "65534:65534", []string{"--volume", "/h/a:/data:ro,nosuid,nodev,noexec", "--volume", "/h/b:/mnt/b:rw,nosuid,nodev,noexec"}},
		{"podman rootless", true, true, "65534:65534", []string{"--userns=keep-id:uid=65534,gid=65534", "--volume", "/h/a:/data:ro,nosuid,nodev,noexec", "--volume", "/h/b:/mnt/b:rw,nosuid,nodev,noexec"}},
		{"podman rootless named user", true, true, "nobody", []string{"--userns=keep-id", "--volume", "/h/a:/data:ro,nosuid,nodev,noexec", "--volume", "/h/b:/mnt/b:rw,nosuid,nodev,noexec"}},
		{"docker", false, true, "65534:65534", []string{"--mount", "type=bind,source=/h/a,target=/data,readonly", "--mount", "type=bind,source=/h/b,target=/mnt/b"}},
	}
	for _, c := range cases {
		if got := MountArgs(ms, c.podman, c.keepID, c.user); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %q\nwant %q", c.name, got, c.want)
		}
	}
	if got := MountArgs(nil, true, true, "65534:65534"); got != nil {
		t.Errorf("no mounts: got %q, want nothing", got)
	}
}
