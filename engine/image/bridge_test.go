package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/binary"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestBridgeRefs(t *testing.T) {
	tests := []struct {
		tag, version string
		want         []string
	}{
		{"localhost/bridge", "v1.2.3", []string{"localhost/bridge:latest", "localhost/bridge:v1.2.3"}},
		{"localhost/bridge", "0.1.0-dev", []string{"localhost/bridge:latest"}},
		{"localhost/bridge", "", []string{"localhost/bridge:latest"}},
		{"localhost/bridge", "v0.0.0-20260101120000-0123456789ab+dirty", []string{"localhost/bridge:latest"}},
		{"localhost/bridge", "v0.0.0-20260101120000-0123456789ab", []string{"localhost/bridge:latest", "localhost/bridge:v0.0.0-20260101120000-0123456789ab"}},
		{"localhost/bridge", "latest", []string{"localhost/bridge:latest"}},
		{"registry.example.com:5000/team/bridge", "1.0.0", []string{"registry.example.com:5000/team/bridge:latest", "registry.example.com:5000/team/bridge:1.0.0"}},
		{"registry.example.com:5000/team/bridge:1", "1.0.0", []string{"registry.example.com:5000/team/bridge:1"}},
		{"bridge@sha256:0123", "1.0.0", []string{"bridge@sha256:0123"}},
		{"bridge", "1.0.0", []string{"bridge:latest", "bridge:1.0.0"}},
	}
	for _, tt := range tests {
		if got := bridgeRefs(tt.tag, tt.version); !slices.Equal(got, tt.want) {
			t.Errorf("bridgeRefs(%q, %q) = %q, want %q", tt.tag, tt.version, got, tt.want)
		}
	}
}

func TestVersionTag(t *testing.T) {
	tests := []struct{ version, want string }{
		{"1.2.3", "1.2.3"},
		{"v1.2.3-rc.1", "v1.2.3-rc.1"},
		{"1.2.3+build.5", "1.2.3-build.5"},
		{"1.2 3", "1.2-3"},
		{"0.1.0-dev", ""},
		{"(devel)", ""},
		{"v1.2.3+dirty", ""},
		{"", ""},
		{".hidden", ""},
		{"+x", ""},
		{strings.Repeat("9", 200), strings.Repeat("9", 128)},
	}
	for _, tt := range tests {
		if got := versionTag(tt.version); got != tt.want {
			t.Errorf("versionTag(%q) = %q, want %q", tt.version, got, tt.want)
		}
	}
}

func TestLabelValue(t *testing.T) {
	tests := []struct{ in, want string }{
		{"0.1.0-dev", "0.1.0-dev"},
		{"v0.0.0-20260101-abc+dirty", "v0.0.0-20260101-abc+dirty"},
		{`1.0 "x"`, "1.0__x_"},
		{"", "unknown"},
	}
	for _, tt := range tests {
		if got := labelValue(tt.in); got != tt.want {
			t.Errorf("labelValue(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestBridgeWithDefaults(t *testing.T) {
	o, err := withDefaults(Options{Bridge: true})
	if err != nil {
		t.Fatal(err)
	}
	if o.Method != MethodDebian || o.Tag != "localhost/bridge" || o.Suite != "trixie" {
		t.Errorf("bridge defaults: method %q, tag %q, suite %q", o.Method, o.Tag, o.Suite)
	}
	o, err = withDefaults(Options{Bridge: true, Method: MethodAuto, Tag: "r.example/b:1"})
	if err != nil || o.Method != MethodDebian || o.Tag != "r.example/b:1" {
		t.Errorf("bridge auto: %+v, %v", o, err)
	}
	err = Build(context.Background(), Options{Bridge: true, Method: MethodContainerfile})
	if want := `image: method: the bridge image is built with the debian method only, not "containerfile"`; err == nil || err.Error() != want {
		t.Errorf("Build(bridge, containerfile): err = %v, want %q", err, want)
	}
}

func TestPasswdLines(t *testing.T) {
	if got, want := passwdLine(), "bridge:*:65532:65532:bridge:/state:/usr/sbin/nologin"; got != want {
		t.Errorf("passwdLine() = %q, want %q", got, want)
	}
	if got, want := groupLine(), "bridge:*:65532:"; got != want {
		t.Errorf("groupLine() = %q, want %q", got, want)
	}
}

// elfFixture writes a minimal x86-64 ELF executable and returns its path: one PT_LOAD segment, a PT_INTERP segment
// naming interp when interp is set, and a dynamic section needing libs when libs are given.
func elfFixture(t *testing.T, interp string, libs []string) string {
	t.Helper()
	const ehsize, phentsize, shentsize = 64, 56, 64
	phnum := 1
	if interp != "" {
		phnum++
	}
	// The data after the program headers: interpreter, .dynstr, .dynamic, .shstrtab; then the section headers.
	var data bytes.Buffer
	base := uint64(ehsize + phentsize*phnum)
	interpOff := base + uint64(data.Len())
	if interp != "" {
		data.WriteString(interp + "\x00")
	}
	dynstrOff := base + uint64(data.Len())
	data.WriteByte(0)
	var dyns []elf.Dyn64
	for _, l := range libs {
		dyns = append(dyns, elf.Dyn64{Tag: int64(elf.DT_NEEDED), Val: uint64(data.Len()) - (dynstrOff - base)})
		data.WriteString(l + "\x00")
	}
	dynstrSize := base + uint64(data.Len()) - dynstrOff
	for data.Len()%8 != 0 {
		data.WriteByte(0)
	}
	dynamicOff := base + uint64(data.Len())
	if len(libs) > 0 {
		for _, d := range append(dyns, elf.Dyn64{Tag: int64(elf.DT_NULL)}) {
			_ = binary.Write(&data, binary.LittleEndian, d)
		}
	}
	dynamicSize := base + uint64(data.Len()) - dynamicOff
	shstrOff := base + uint64(data.Len())
	shstr := "\x00.dynstr\x00.dynamic\x00.shstrtab\x00"
	data.WriteString(shstr)
	for data.Len()%8 != 0 {
		data.WriteByte(0)
	}
	shoff := base + uint64(data.Len())
	var sections []elf.Section64
	if len(libs) > 0 {
		sections = []elf.Section64{
			{},
			{Name: 1, Type: uint32(elf.SHT_STRTAB), Off: dynstrOff, Size: dynstrSize, Addralign: 1},
			{Name: 9, Type: uint32(elf.SHT_DYNAMIC), Off: dynamicOff, Size: dynamicSize, Link: 1, Entsize: 16, Addralign: 8},
			{Name: 18, Type: uint32(elf.SHT_STRTAB), Off: shstrOff, Size: uint64(len(shstr)), Addralign: 1},
		}
	} else {
		sections = []elf.Section64{{}, {Name: 18, Type: uint32(elf.SHT_STRTAB), Off: shstrOff, Size: uint64(len(shstr)), Addralign: 1}}
	}
	for _, s := range sections {
		_ = binary.Write(&data, binary.LittleEndian, s)
	}

	var ident [elf.EI_NIDENT]byte
	copy(ident[:], elf.ELFMAG)
	ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	var out bytes.Buffer
	_ = binary.Write(&out, binary.LittleEndian, elf.Header64{
		Ident: ident, Type: uint16(elf.ET_EXEC), Machine: uint16(elf.EM_X86_64), Version: uint32(elf.EV_CURRENT),
		Entry: 0x401000, Phoff: ehsize, Shoff: shoff, Ehsize: ehsize, Phentsize: phentsize, Phnum: uint16(phnum),
		Shentsize: shentsize, Shnum: uint16(len(sections)), Shstrndx: uint16(len(sections) - 1),
	})
	_ = binary.Write(&out, binary.LittleEndian, elf.Prog64{Type: uint32(elf.PT_LOAD), Flags: uint32(elf.PF_R | elf.PF_X),
		Vaddr: 0x400000, Paddr: 0x400000, Filesz: 64, Memsz: 64, Align: 0x1000})
	if interp != "" {
		_ = binary.Write(&out, binary.LittleEndian, elf.Prog64{Type: uint32(elf.PT_INTERP), Flags: uint32(elf.PF_R),
			Off: interpOff, Filesz: uint64(len(interp) + 1), Memsz: uint64(len(interp) + 1), Align: 1})
	}
	out.Write(data.Bytes())
	path := filepath.Join(t.TempDir(), "bridge")
	if err := os.WriteFile(path, out.Bytes(), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCheckStatic(t *testing.T) {
	static := elfFixture(t, "", nil)
	interp := elfFixture(t, "/lib64/ld-linux-x86-64.so.2", []string{"libc.so.6"})
	needed := elfFixture(t, "", []string{"libc.so.6", "libm.so.6"})
	script := filepath.Join(t.TempDir(), "bridge.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"+strings.Repeat("# not an ELF file\n", 8)), 0o755); err != nil {
		t.Fatal(err)
	}
	// The reason debug/elf gives for a file that is no ELF is its own; only the start and the end are checked.
	tests := []struct{ path, want, wantEnd string }{
		{static, "", ""},
		{interp, interp + " is dynamically linked (interpreter /lib64/ld-linux-x86-64.so.2): build it with CGO_ENABLED=0 go build ./cmd/bridge", ""},
		{needed, needed + " is dynamically linked (needs libc.so.6, libm.so.6): build it with CGO_ENABLED=0 go build ./cmd/bridge", ""},
		{script, script + " is not a Linux ELF binary (bad magic number", "): build it with CGO_ENABLED=0 go build ./cmd/bridge"},
	}
	for _, tt := range tests {
		err := checkStatic(tt.path)
		got := ""
		if err != nil {
			got = err.Error()
		}
		ok := got == tt.want
		if tt.wantEnd != "" {
			ok = strings.HasPrefix(got, tt.want) && strings.HasSuffix(got, tt.wantEnd)
		}
		if !ok || strings.Contains(got, "\n") {
			t.Errorf("checkStatic(%s) = %q, want %q...%q", filepath.Base(tt.path), got, tt.want, tt.wantEnd)
		}
	}

	dir := t.TempDir()
	path, sum, err := bridgeBinary(static, dir)
	content, _ := os.ReadFile(static)
	copied, _ := os.ReadFile(path)
	want := sha256.Sum256(content)
	if err != nil || filepath.Dir(path) != dir || !bytes.Equal(copied, content) || sum != hex.EncodeToString(want[:]) {
		t.Errorf("bridgeBinary(static) = %q, %q, %v; want a copy in %s and %x", path, sum, err, dir, want)
	}
	err = Build(context.Background(), Options{Bridge: true, Binary: interp, CLI: "/nonexistent/podman"})
	if err == nil || !strings.HasPrefix(err.Error(), "image: bridge: check binary: "+interp+" is dynamically linked") {
		t.Errorf("Build with a dynamic binary: err = %v", err)
	}
}

func TestBridgeImportArgs(t *testing.T) {
	got := bridgeImportArgs("/w/rootfs.tar", "localhost/bridge:latest", "trixie", "0.1.0-dev", "ab12")
	want := []string{
		"import",
		"--change", `ENTRYPOINT ["/usr/local/bin/bridge"]`,
		"--change", `CMD ["serve"]`,
		"--change", "USER 65532:65532",
		"--change", "WORKDIR /state",
		"--change", "ENV HOME=/state",
		"--change", "ENV npm_config_cache=/state/.npm",
		"--change", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"--change", "LABEL bridge.image.kind=bridge",
		"--change", "LABEL bridge.version=0.1.0-dev",
		"--change", "LABEL bridge.binary.sha256=ab12",
		"--change", "LABEL bridge.image.suite=trixie",
		"/w/rootfs.tar", "localhost/bridge:latest",
	}
	if !slices.Equal(got, want) {
		t.Errorf("bridgeImportArgs =\n%q\nwant\n%q", got, want)
	}
	if slices.ContainsFunc(got, func(a string) bool { return strings.Contains(a, SchemaKey) }) {
		t.Error("the bridge image carries the sandbox schema label")
	}
}

func TestBridgeRunArgs(t *testing.T) {
	common := "run --rm --pull never --network none --read-only --cap-drop ALL --security-opt no-new-privileges " +
		"--user 65532:65532 --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 --volume /state " +
		"--tmpfs /tmp:rw,noexec,nosuid,nodev,size=64m --log-driver none "
	tests := []struct {
		entrypoint string
		args       []string
		want       string
	}{
		{"", []string{"--version"}, common + "img:1 --version"},
		{"/bin/sh", []string{"-ec", "true"}, common + "--entrypoint /bin/sh img:1 -ec true"},
	}
	for _, tt := range tests {
		if got := strings.Join(bridgeRunArgs("img:1", tt.entrypoint, tt.args...), " "); got != tt.want {
			t.Errorf("bridgeRunArgs(%q) =\n%s\nwant\n%s", tt.entrypoint, got, tt.want)
		}
	}
}

func TestBridgeMmdebstrapArgs(t *testing.T) {
	got := mmdebstrapPackageArgs(bridgePackages, dpkgExcludes, "trixie", "http://m/debian", "/w/rootfs.tar", "unshare", bridgeHooks("/b/bridge"))
	for _, want := range []string{"--variant=essential", "--mode=unshare", "--include=ca-certificates,nodejs,npm,netbase,tzdata",
		"--dpkgopt=path-exclude=/usr/share/doc/*", "--skip=cleanup/apt"} {
		if !slices.Contains(got, want) {
			t.Errorf("mmdebstrap args lack %q: %q", want, got)
		}
	}
	var names []string
	for _, a := range got {
		if h, ok := strings.CutPrefix(a, "--customize-hook=echo '"+hookMarker); ok {
			names = append(names, h[:strings.Index(h, "'")])
		}
	}
	if want := []string{"purge unused packages", "trim rootfs", "add user", "add bridge binary", "check node"}; !slices.Equal(names, want) {
		t.Errorf("hooks = %q, want %q", names, want)
	}
	if tail := got[len(got)-3:]; !slices.Equal(tail, []string{"trixie", "/w/rootfs.tar", "http://m/debian"}) {
		t.Errorf("positional args = %q", tail)
	}
}

func TestBridgeScriptsAreValidShell(t *testing.T) {
	for _, h := range bridgeHooks("/path with 'quote/bridge") {
		if err := exec.Command("sh", "-n", "-c", h.script).Run(); err != nil {
			t.Errorf("%s: sh -n: %v\n%s", h.name, err, h.script)
		}
	}
	if s := bridgeBinaryScript("/path with 'quote/bridge"); !strings.Contains(s, `cp '/path with '\''quote/bridge' "$1/usr/local/bin/bridge"`) {
		t.Errorf("binary script does not quote the path:\n%s", s)
	}
}

// statusSample is dpkg-query output in statusFormat: an essential base, npm with the virtual node-cssesc that
// node-css-loader provides and its webpack tree, node-gyp with gyp and python3 (whose prerm needs its stdlib), a
// dependency cycle nothing keeps, a package satisfied by a later alternative, and one removed but not purged.
var statusSample = func() string {
	var sb strings.Builder
	// status, package, Depends, Pre-Depends, Provides, Essential
	for _, p := range [][6]string{
		{"ii ", "base-files", "", "", "", "yes"},
		{"ii ", "libc6", "", "", "", ""},
		{"ii ", "bash", "base-files", "libc6 (>= 2.36)", "", "yes"},
		{"ii ", "libpython3.13-stdlib", "libc6", "", "", ""},
		{"ii ", "python3.13", "libpython3.13-stdlib (= 3.13.5-2), libc6 (>= 2.38)", "", "", ""},
		{"ii ", "python3", "python3.13 (>= 3.13.5-1~)", "", "python3-any", ""},
		{"ii ", "gyp", "python3:any", "", "", ""},
		{"ii ", "node-lodash", "", "", "", ""},
		{"ii ", "eslint", "node-lodash", "", "", ""},
		{"ii ", "webpack", "eslint, node-lodash", "", "", ""},
		{"ii ", "node-css-loader", "webpack", "", "node-cssesc (= 3.0.0), node-icss-utils", ""},
		{"ii ", "libssl-dev", "libc6", "", "", ""},
		{"ii ", "libnode115", "libc6", "", "", ""},
		{"ii ", "libnode-dev", "libssl-dev | libssl1.1-dev, libnode115 (= 20.19.2)", "", "", ""},
		{"ii ", "node-gyp", "gyp, libnode-dev, nodejs:any", "", "", ""},
		{"ii ", "nodejs", "libnode115 (= 20.19.2)", "", "", ""},
		{"ii ", "npm", "nodejs:any, node-cssesc, node-gyp, ca-certificates", "", "", ""},
		{"ii ", "ca-certificates", "openssl (>= 1.1.1)", "", "", ""},
		{"ii ", "openssl", "missing-lib | libc6", "", "", ""},
		{"ii ", "cyc-a", "cyc-b", "", "", ""},
		{"ii ", "cyc-b", "cyc-a", "", "", ""},
		{"rc ", "old-config", "libc6", "", "", ""},
	} {
		// dpkg-query prints the statusFormat fields "${Depends}, ${Pre-Depends}" as one.
		sb.WriteString(strings.Join([]string{p[0], p[1], p[2] + ", " + p[3], p[4], p[5]}, "\t") + "\n")
	}
	return sb.String()
}()

func TestKeepAwk(t *testing.T) {
	awk, err := exec.LookPath("awk")
	if err != nil {
		t.Skip("awk not found")
	}
	cmd := exec.Command(awk, "-v", "roots=npm nodejs ca-certificates", "-v", "cuts="+strings.Join(bridgeCuts, " "), keepAwk)
	cmd.Stdin = strings.NewReader(statusSample)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("awk: %v\n%s", err, out)
	}
	got := strings.Fields(string(out))
	// Dependents first: gyp before python3 before python3.13 before its stdlib, webpack before eslint before lodash;
	// the cycle last, in input order.
	want := []string{"gyp", "webpack", "libnode-dev", "python3", "eslint", "libssl-dev", "python3.13", "node-lodash",
		"libpython3.13-stdlib", "cyc-a", "cyc-b"}
	if !slices.Equal(got, want) {
		t.Errorf("keepAwk purges\n%q\nwant\n%q", got, want)
	}
}

// TestBridgePurgeScriptKeepsWhatNpmNeeds runs the purge on the statusSample packages with stand-ins for chroot,
// dpkg-query and dpkg, and checks what reaches dpkg --purge, in order.
func TestBridgePurgeScriptKeepsWhatNpmNeeds(t *testing.T) {
	if _, err := exec.LookPath("awk"); err != nil {
		t.Skip("awk not found")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "status"), []byte(statusSample), 0o644); err != nil {
		t.Fatal(err)
	}
	purged := filepath.Join(dir, "purged")
	fakes := map[string]string{
		// chroot ROOT CMD...: runs CMD from the stand-ins.
		"chroot": `shift; exec "$@"`,
		// dpkg-query -W -f FORMAT [PKG]: the sample for a listing, installed for one of the bridge packages.
		"dpkg-query": `if [ $# -le 3 ]; then cat '` + dir + `/status'; else printf 'ii '; fi`,
		"dpkg":       `shift 2; printf '%s\n' "$@" >'` + purged + `'`,
	}
	for name, body := range fakes {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("sh", "-ec", bridgePurgeScript(), "hook", filepath.Join(dir, "rootfs"))
	cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("purge script: %v\n%s", err, out)
	}
	data, err := os.ReadFile(purged)
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Fields(string(data))
	for _, keep := range []string{"npm", "nodejs", "node-css-loader", "node-gyp", "libnode115", "ca-certificates", "openssl", "libc6", "bash"} {
		if slices.Contains(got, keep) {
			t.Errorf("purge removes %s: %q", keep, got)
		}
	}
	if i, j := slices.Index(got, "python3"), slices.Index(got, "libpython3.13-stdlib"); i < 0 || j < 0 || i > j {
		t.Errorf("python3 is not purged before its stdlib: %q", got)
	}
}

// TestBridgeUserScript runs the user step on a fake rootfs: the entries are appended, /state is made, and a rootfs
// that already has the id is refused.
func TestBridgeUserScript(t *testing.T) {
	script := bridgeUserScript()
	if os.Geteuid() != 0 {
		script = strings.ReplaceAll(script, "chown 65532:65532 ./state", "true")
	}
	setup := func(t *testing.T, passwd string) string {
		t.Helper()
		root := t.TempDir()
		if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, content := range map[string]string{"etc/passwd": passwd, "etc/group": "root:*:0:\n"} {
			if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return root
	}
	root := setup(t, "root:*:0:0:root:/root:/bin/bash\n")
	if out, err := exec.Command("sh", "-ec", script, "hook", root).CombinedOutput(); err != nil {
		t.Fatalf("user script: %v\n%s", err, out)
	}
	for name, want := range map[string]string{
		"etc/passwd": "root:*:0:0:root:/root:/bin/bash\nbridge:*:65532:65532:bridge:/state:/usr/sbin/nologin\n",
		"etc/group":  "root:*:0:\nbridge:*:65532:\n",
	} {
		if got, _ := os.ReadFile(filepath.Join(root, name)); string(got) != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(root, "state")); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o750 {
		t.Errorf("/state: %v, %v", fi, err)
	}

	root = setup(t, "root:*:0:0:root:/root:/bin/bash\nnonroot:*:65532:65532::/home/nonroot:/bin/sh\n")
	out, err := exec.Command("sh", "-ec", script, "hook", root).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "etc/passwd already has the name bridge or the id 65532") {
		t.Errorf("a taken id: err = %v, output %q", err, out)
	}
}

// TestBridgeTrimScript runs the trim step on a fake rootfs: source maps and TypeScript files go, a module directory
// named like them (lodash.map) and its code stay, apt's lock files stay.
func TestBridgeTrimScript(t *testing.T) {
	root := t.TempDir()
	files := []string{
		"usr/share/nodejs/agent-base/dist/index.js", "usr/share/nodejs/agent-base/dist/index.js.map",
		"usr/share/nodejs/agent-base/dist/index.d.ts", "usr/share/nodejs/lodash.map/index.js",
		"usr/share/doc/npm/copyright", "usr/include/node/node.h", "var/log/dpkg.log",
		"var/lib/apt/lists/lock", "var/lib/apt/lists/deb.debian.org_Packages", "var/cache/apt/archives/lock",
	}
	for _, f := range files {
		p := filepath.Join(root, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := exec.Command("sh", "-ec", bridgeTrimScript(), "hook", root).CombinedOutput(); err != nil {
		t.Fatalf("trim script: %v\n%s", err, out)
	}
	kept := map[string]bool{
		"usr/share/nodejs/agent-base/dist/index.js": true, "usr/share/nodejs/lodash.map/index.js": true,
		"var/lib/apt/lists/lock": true, "var/cache/apt/archives/lock": true,
	}
	for _, f := range files {
		_, err := os.Stat(filepath.Join(root, f))
		if got := err == nil; got != kept[f] {
			t.Errorf("%s exists: %v, want %v", f, got, kept[f])
		}
	}
}

func TestParseBridgeVersions(t *testing.T) {
	good := "bridge 1.2.3 (0123456789ab, go1.26.8)\nnode v20.19.2\nnpm 9.2.0\nnpx 9.2.0\ncache /state/.npm\n"
	v, err := parseBridgeVersions([]byte(good), "1.2.3")
	if err != nil || v["bridge"] != "1.2.3 (0123456789ab, go1.26.8)" || v["node"] != "v20.19.2" || v["npx"] != "9.2.0" {
		t.Errorf("parseBridgeVersions(good) = %v, %v", v, err)
	}
	tests := []struct{ out, version, want string }{
		{strings.Replace(good, "npx 9.2.0\n", "", 1), "1.2.3", "versions: npx missing in "},
		{good, "1.2", `versions: the image's bridge is "1.2.3 (0123456789ab, go1.26.8)", want 1.2`},
		{strings.Replace(good, "/state/.npm", "/state/.npm-x", 1), "", `versions: npm's cache is "/state/.npm-x", want /state/.npm`},
	}
	for _, tt := range tests {
		if _, err := parseBridgeVersions([]byte(tt.out), tt.version); err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("parseBridgeVersions(%q, %q): err = %v, want %q", tt.out, tt.version, err, tt.want)
		}
	}
}

// TestVerifyBridgeWithFakeCLI runs the bridge image's check against a stand-in podman and checks the calls and the
// report.
func TestVerifyBridgeWithFakeCLI(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "argv.log")
	cli := filepath.Join(dir, "podman")
	script := `#!/bin/sh
printf '%s\n' "$*" | tr '\n' ' ' >> '` + log + `'; echo >> '` + log + `'
case "$*" in
run*--entrypoint*) printf 'node v20.19.2\nnpm 9.2.0\nnpx 9.2.0\ncache /state/.npm\n' ;;
run*--version) echo 'bridge 1.2.3 (0123456789ab, go1.26.8)' ;;
image\ inspect*Size*) echo 223684066 ;;
*) echo "unexpected: $*" >&2; exit 1 ;;
esac
`
	if err := os.WriteFile(cli, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	b := &builder{opts: Options{CLI: cli, Tag: "localhost/bridge:latest", Version: "1.2.3", Stdout: &stdout, Stderr: &stderr}}
	err := b.verifyBridge(context.Background(), []string{"localhost/bridge:latest", "localhost/bridge:1.2.3"}, 118*time.Second)
	if err != nil {
		t.Fatalf("verifyBridge: %v\n%s", err, stderr.String())
	}
	want := `built localhost/bridge:latest, localhost/bridge:1.2.3 with the debian method in 1m58s
  bridge      1.2.3 (0123456789ab, go1.26.8)
  node        v20.19.2
  npm         9.2.0
  npx         9.2.0
  size        223.7 MB (223684066 bytes)
`
	if stdout.String() != want {
		t.Errorf("report =\n%s\nwant\n%s", stdout.String(), want)
	}
	calls, _ := os.ReadFile(log)
	lines := strings.Split(strings.TrimSpace(string(calls)), "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	if len(lines) != 3 || !strings.HasSuffix(lines[0], "--user 65532:65532 --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 --volume /state --tmpfs /tmp:rw,noexec,nosuid,nodev,size=64m --log-driver none localhost/bridge:latest --version") ||
		!strings.Contains(lines[1], "--entrypoint /bin/sh localhost/bridge:latest -ec printf 'node %s") {
		t.Errorf("calls:\n%s", calls)
	}
}
