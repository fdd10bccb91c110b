package image

// image_test.go is over 500 lines on purpose: one test per build step (mirror,
// containerfile, bootstrap argv, purge list, hooks, report), sharing fakes.

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestMirrorFromList(t *testing.T) {
	tests := []struct {
		name, content, want string
	}{
		{"plain", "deb http://deb.debian.org/debian bookworm main\n", "http://deb.debian.org/debian"},
		{"trailing slash", "deb http://ftp.de.debian.org/debian/ bookworm main contrib\n", "http://ftp.de.debian.org/debian"},
		{"options", "deb [arch=amd64 signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] https://mirror.example.org/debian bookworm main\n",
			"https://mirror.example.org/debian"},
		{"comments and deb-src first", "# deb http://old.example.org/debian bookworm main\ndeb-src http://src.example.org/debian bookworm main\ndeb http://deb.debian.org/debian bookworm main # trailing\n",
			"http://deb.debian.org/debian"},
		{"security skipped", "deb http://security.debian.org/debian-security bookworm-security main\ndeb http://deb.debian.org/debian bookworm main\n",
			"http://deb.debian.org/debian"},
		{"old security layout skipped", "deb http://security.debian.org/debian bookworm/updates main\n", ""},
		{"third party skipped", "deb https://packages.cloud.google.com/apt cloud-sdk-bookworm main\n", ""},
		{"ubuntu skipped", "deb http://archive.ubuntu.com/ubuntu jammy main\n", ""},
		{"cdrom skipped", "deb cdrom:[Debian GNU/Linux 12]/ bookworm main\n", ""},
		{"snapshot", "deb http://snapshot.debian.org/archive/debian/20250520T000000Z bookworm main\n",
			"http://snapshot.debian.org/archive/debian/20250520T000000Z"},
		{"updates suite only", "deb http://deb.debian.org/debian bookworm-updates main\n", "http://deb.debian.org/debian"},
		{"empty", "", ""},
		{"truncated", "deb http://deb.debian.org/debian\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mirrorFromList(tt.content); got != tt.want {
				t.Errorf("mirrorFromList() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMirrorFromDeb822(t *testing.T) {
	tests := []struct {
		name, content, want string
	}{
		{"debian default", `Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
`, "http://deb.debian.org/debian"},
		{"security first", `Types: deb
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main

Types: deb deb-src
URIs: https://mirror.example.org/debian/
Suites: bookworm
Components: main
`, "https://mirror.example.org/debian"},
		{"deb-src only", `Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
`, ""},
		{"disabled", `Enabled: no
Types: deb
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
`, ""},
		{"several uris", `types: deb
uris: https://packages.example.com/apt http://ftp.fr.debian.org/debian
suites: bookworm
components: main
`, "http://ftp.fr.debian.org/debian"},
		{"continuation line", `Types: deb
URIs:
 http://ftp.nl.debian.org/debian
Suites: bookworm
Components: main
`, "http://ftp.nl.debian.org/debian"},
		{"nodesource", `Types: deb
URIs: https://deb.nodesource.com/node_20.x
Suites: nodistro
Components: main
`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mirrorFromDeb822(tt.content); got != tt.want {
				t.Errorf("mirrorFromDeb822() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMirrorFromDir(t *testing.T) {
	write := func(t *testing.T, dir, name, content string) {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("sources.list first", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "sources.list", "deb http://one.example.org/debian bookworm main\n")
		write(t, dir, "sources.list.d/debian.sources", "Types: deb\nURIs: http://two.example.org/debian\nSuites: bookworm\n")
		if got := mirrorFromDir(dir); got != "http://one.example.org/debian" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("sources.list.d in name order, other suffixes ignored", func(t *testing.T) {
		dir := t.TempDir()
		write(t, dir, "sources.list", "# nothing here\n")
		write(t, dir, "sources.list.d/a.list.disabled", "deb http://disabled.example.org/debian bookworm main\n")
		write(t, dir, "sources.list.d/b-nodesource.sources", "Types: deb\nURIs: https://deb.nodesource.com/node_20.x\nSuites: nodistro\n")
		write(t, dir, "sources.list.d/c-debian.sources", "Types: deb\nURIs: http://three.example.org/debian\nSuites: bookworm\n")
		write(t, dir, "sources.list.d/d-debian.list", "deb http://four.example.org/debian bookworm main\n")
		if got := mirrorFromDir(dir); got != "http://three.example.org/debian" {
			t.Errorf("got %q", got)
		}
	})
	t.Run("nothing", func(t *testing.T) {
		if got := mirrorFromDir(t.TempDir()); got != "" {
			t.Errorf("got %q", got)
		}
	})
}

func TestHostMirrorNeverEmpty(t *testing.T) {
	if got := HostMirror(); !strings.HasPrefix(got, "http") {
		t.Errorf("HostMirror() = %q", got)
	}
}

func TestContainerfile(t *testing.T) {
	lines := strings.Split(Containerfile, "\n")
	has := func(prefix string) bool {
		return slices.ContainsFunc(lines, func(l string) bool { return strings.HasPrefix(strings.TrimSpace(l), prefix) })
	}
	for _, want := range []string{
		"FROM " + BaseImage,
		"ENV MPLBACKEND=Agg",
		"USER 65534:65534",
		"WORKDIR /workspace",
		"LABEL " + SchemaLabel,
		"RUN pip install --no-cache-dir",
	} {
		if !has(want) {
			t.Errorf("Containerfile lacks a line starting with %q", want)
		}
	}
	if !strings.HasSuffix(BaseImage, "/python:3.14-slim") {
		t.Errorf("BaseImage = %q, want python:3.14-slim", BaseImage)
	}
	for _, pkg := range []string{"numpy", "pandas", "scikit-learn", "matplotlib"} {
		if !regexp.MustCompile(`\s` + pkg + `==[0-9]+\.[0-9]+\.[0-9]+\s`).MatchString(Containerfile) {
			t.Errorf("Containerfile does not pin %s==X.Y.Z", pkg)
		}
	}
	// USER comes last among the RUN steps, so the install runs as root.
	if strings.LastIndex(Containerfile, "\nRUN ") > strings.Index(Containerfile, "\nUSER ") {
		t.Error("a RUN step follows USER")
	}
}

func TestWithDefaults(t *testing.T) {
	o, err := withDefaults(Options{})
	if err != nil {
		t.Fatal(err)
	}
	if o.Method != MethodAuto || o.Tag != "localhost/bridge-python:latest" || o.Suite != "trixie" ||
		o.Mirror != HostMirror() || o.CLI != "podman" || o.Stdout == nil || o.Stderr == nil || o.VerifyArgs == nil {
		t.Errorf("defaults: %+v", o)
	}
	if got, want := o.VerifyArgs("img"), DefaultVerifyArgs("img"); !slices.Equal(got, want) {
		t.Errorf("VerifyArgs = %q, want %q", got, want)
	}

	set := Options{Method: MethodDebian, Tag: "t", Suite: "trixie", Mirror: "http://m/debian", CLI: "docker"}
	o, err = withDefaults(set)
	if err != nil {
		t.Fatal(err)
	}
	if o.Method != "debian" || o.Tag != "t" || o.Suite != "trixie" || o.Mirror != "http://m/debian" || o.CLI != "docker" {
		t.Errorf("set values changed: %+v", o)
	}

	if _, err := withDefaults(Options{Method: "apt"}); err == nil || !strings.Contains(err.Error(), `"apt"`) {
		t.Errorf("unknown method: err = %v", err)
	}
	err = Build(context.Background(), Options{Method: "apt"})
	if err == nil || !strings.HasPrefix(err.Error(), "image: method: ") {
		t.Errorf("Build with unknown method: err = %v", err)
	}
}

func TestDefaultVerifyArgs(t *testing.T) {
	got := strings.Join(DefaultVerifyArgs("img:1"), " ")
	want := "run --rm --pull never --network none --read-only --cap-drop ALL --security-opt no-new-privileges " +
		"--user 65534:65534 --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 " +
		"--tmpfs /tmp:rw,noexec,nosuid,nodev,size=64m --log-driver none img:1"
	if got != want {
		t.Errorf("DefaultVerifyArgs =\n%s\nwant\n%s", got, want)
	}
	argv := verifyArgv(DefaultVerifyArgs, "img:1")
	if n := len(argv); n < 3 || argv[n-3] != "python3" || argv[n-2] != "-c" || argv[n-1] != VerifyScript {
		t.Errorf("verifyArgv tail = %q", argv[max(0, len(argv)-3):])
	}
}

func TestImportArgs(t *testing.T) {
	got := importArgs("/tmp/w/rootfs.tar", "localhost/bridge-python:latest", "trixie")
	want := []string{
		"import",
		"--change", `CMD ["python3"]`,
		"--change", "USER 65534:65534",
		"--change", "WORKDIR /workspace",
		"--change", "ENV MPLBACKEND=Agg",
		"--change", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"--change", "LABEL bridge.image.schema=3",
		"--change", "LABEL bridge.image.suite=trixie",
		"/tmp/w/rootfs.tar", "localhost/bridge-python:latest",
	}
	if !slices.Equal(got, want) {
		t.Errorf("importArgs =\n%q\nwant\n%q", got, want)
	}
}

func TestBuildArgs(t *testing.T) {
	got := buildArgs("/d/Containerfile", "/d", "tag:1")
	want := []string{"build", "--file", "/d/Containerfile", "--tag", "tag:1",
		"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024", "/d"}
	if !slices.Equal(got, want) {
		t.Errorf("buildArgs = %q, want %q", got, want)
	}
}

func TestMmdebstrapArgs(t *testing.T) {
	got := mmdebstrapArgs("bookworm", "http://m/debian", "/w/rootfs", "root", nil)
	for _, want := range []string{
		"--variant=essential", "--mode=root", "--format=directory",
		"--include=python3,python3-numpy,python3-pandas,python3-sklearn,python3-matplotlib,python3-scipy,python3-pil,python3-cloudpickle",
		"--dpkgopt=path-exclude=/usr/share/doc/*", "--dpkgopt=path-exclude=/usr/share/man/*",
		"--dpkgopt=path-exclude=/usr/share/locale/*",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("mmdebstrap args lack %q: %q", want, got)
		}
	}
	if tail := got[len(got)-3:]; !slices.Equal(tail, []string{"bookworm", "/w/rootfs", "http://m/debian"}) {
		t.Errorf("positional args = %q", tail)
	}
	if slices.ContainsFunc(got, func(a string) bool { return strings.HasPrefix(a, "--customize-hook") }) {
		t.Error("root mode passes hooks")
	}

	got = mmdebstrapArgs("bookworm", "http://m/debian", "/w/rootfs.tar", "unshare", rootfsHooks())
	if !slices.Contains(got, "--mode=unshare") || !slices.Contains(got, "--format=tar") {
		t.Errorf("unshare args: %q", got)
	}
	var hooks []string
	for _, a := range got {
		if h, ok := strings.CutPrefix(a, "--customize-hook="); ok {
			hooks = append(hooks, h)
		}
	}
	if len(hooks) != len(rootfsHooks()) {
		t.Fatalf("got %d hooks, want %d", len(hooks), len(rootfsHooks()))
	}
	for i, h := range rootfsHooks() {
		if !strings.HasPrefix(hooks[i], "echo '"+hookMarker+h.name+"' >&2 && sh -ec '") || !strings.HasSuffix(hooks[i], `' hook "$1"`) {
			t.Errorf("hook %d = %q", i, hooks[i])
		}
	}
}

func TestDebootstrapArgs(t *testing.T) {
	got := debootstrapArgs("bookworm", "http://m/debian", "/w/rootfs")
	want := []string{"--variant=minbase", "--include=python3,python3-numpy,python3-pandas,python3-sklearn,python3-matplotlib,python3-scipy,python3-pil,python3-cloudpickle",
		"bookworm", "/w/rootfs", "http://m/debian"}
	if !slices.Equal(got, want) {
		t.Errorf("debootstrapArgs = %q, want %q", got, want)
	}
}

// installedSample is a trimmed `dpkg-query -W` of a bookworm rootfs after the bootstrap.
var installedSample = strings.Fields(`base-files bash binutils binutils-common binutils-x86-64-linux-gnu coreutils cpp
cpp-12 dash dpkg g++ g++-12 gcc gcc-12 gcc-12-base init-system-helpers libasan8 libatomic1 libbinutils libblas3
libboost-dev libboost1.74-dev libc-bin libc-dev-bin libc6 libc6-dev libcc1-0 libcrypt-dev libctf-nobfd0 libctf0
libexpat1 libexpat1-dev libfile-find-rule-perl libgcc-12-dev libgcc-s1 libgdbm-compat4 libgdbm6 libgfortran5 libgomp1
libgprofng0 libisl23 libitm1 libjansson4 libjs-jquery libjs-sphinxdoc liblapack3 liblsan0 libmpc3 libmpfr6
libnumber-compare-perl libopenblas-dev libopenblas-pthread-dev libopenblas0 libopenblas0-pthread libperl5.36
libpython3-dev libpython3.11 libpython3.11-dev libpython3.11-stdlib libquadmath0 libstdc++-12-dev libstdc++6
libtext-glob-perl libtsan2 libubsan1 libxsimd-dev linux-libc-dev perl perl-base perl-modules-5.36 python3 python3-all
python3-all-dev python3-beniget python3-dev python3-distutils python3-gast python3-matplotlib python3-numpy
python3-pandas python3-pandas-lib python3-pil python3-ply python3-pythran python3-scipy python3-sklearn
python3-sklearn-lib python3.11 python3.11-dev python3.11-minimal rpcsvc-proto usrmerge usr-is-merged zlib1g
zlib1g-dev`)

func TestPurgeList(t *testing.T) {
	got := purgeList(installedSample)
	want := strings.Fields(`binutils binutils-common binutils-x86-64-linux-gnu cpp cpp-12 g++ g++-12 gcc gcc-12
libasan8 libbinutils libboost-dev libboost1.74-dev libc-dev-bin libc6-dev libcc1-0 libcrypt-dev libctf-nobfd0 libctf0
libexpat1-dev libfile-find-rule-perl libgcc-12-dev libgdbm-compat4 libgprofng0 libisl23 libitm1 libjansson4
libjs-sphinxdoc liblsan0 libmpc3 libmpfr6 libnumber-compare-perl libopenblas-dev libopenblas-pthread-dev libperl5.36
libpython3-dev libpython3.11-dev libstdc++-12-dev libtext-glob-perl libtsan2 libubsan1 libxsimd-dev linux-libc-dev
perl perl-modules-5.36 python3-all python3-all-dev python3-beniget python3-dev python3-gast python3-ply python3-pythran
python3.11-dev rpcsvc-proto usrmerge zlib1g-dev`)
	if !slices.Equal(got, want) {
		t.Errorf("purgeList:\n got %q\nwant %q", got, want)
	}
	for _, p := range keptPackages {
		if slices.Contains(got, p) {
			t.Errorf("purgeList removes kept package %s", p)
		}
	}
	for _, p := range []string{"perl-base", "gcc-12-base", "libgcc-s1", "libstdc++6", "libgomp1", "libgfortran5",
		"libquadmath0", "libopenblas0-pthread", "libpython3.11", "python3.11", "python3-distutils", "usr-is-merged"} {
		if slices.Contains(got, p) {
			t.Errorf("purgeList removes runtime package %s", p)
		}
	}
}

// TestPurgeRegexpMatchesGrep checks that the shell side of the purge (grep -xE) selects what purgeList selects.
func TestPurgeRegexpMatchesGrep(t *testing.T) {
	grep, err := exec.LookPath("grep")
	if err != nil {
		t.Skip("grep not found")
	}
	cmd := exec.Command(grep, "-xE", purgeRegexp())
	cmd.Stdin = strings.NewReader(strings.Join(installedSample, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Fields(string(out)), purgeList(installedSample); !slices.Equal(got, want) {
		t.Errorf("grep -xE selects\n%q\npurgeList selects\n%q", got, want)
	}
}

func TestScriptsAreValidShell(t *testing.T) {
	for _, h := range rootfsHooks() {
		if err := exec.Command("sh", "-n", "-c", h.script).Run(); err != nil {
			t.Errorf("%s: sh -n: %v\n%s", h.name, err, h.script)
		}
	}
	if !strings.Contains(trimScript(), "chown 65534:65534 workspace") {
		t.Error("trim script does not create /workspace for 65534")
	}
	if !strings.Contains(checkScript(), checkImports) {
		t.Error("check script does not import the four libraries")
	}
}

func TestRunHookOnDirectory(t *testing.T) {
	dir := t.TempDir()
	err := runHook(context.Background(), hook{"touch", `touch "$1/made"`}, dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "made")); err != nil {
		t.Errorf("hook did not get the rootfs as $1: %v", err)
	}
	err = runHook(context.Background(), hook{"fail", "false\ntouch \"$1/after\""}, dir)
	if err == nil {
		t.Error("a failing command did not stop the hook")
	}
	if _, err := os.Stat(filepath.Join(dir, "after")); err == nil {
		t.Error("hook went on after a failure (sh -e missing)")
	}
}

func TestFailedHook(t *testing.T) {
	tests := []struct{ stderr, want string }{
		{"I: downloading\nE: apt failed\n", "bootstrap rootfs"},
		{"I: running hook\nbridge-step: purge toolchain\nbridge-step: trim rootfs\nrm: cannot remove\n", "trim rootfs"},
		{"bridge-step: check imports\nModuleNotFoundError: No module named 'sklearn'\n", "check imports"},
		// mmdebstrap's own lines quote the hook command, marker included; they are not markers.
		{"bridge-step: check imports\n" +
			"I: running --customize-hook in shell: sh -c 'echo 'bridge-step: trim rootfs' >&2 && sh -ec 'x' hook \"$1\"' exec /tmp/m\n" +
			"E: setup failed: E: command failed: echo 'bridge-step: trim rootfs' >&2 && sh -ec 'x' hook \"$1\"\n", "check imports"},
	}
	for _, tt := range tests {
		if got := failedHook(tt.stderr); got != tt.want {
			t.Errorf("failedHook(%q) = %q, want %q", tt.stderr, got, tt.want)
		}
	}
}

func TestRunErrorCarriesStderrTail(t *testing.T) {
	script := `echo "dpkg: error processing package x" >&2; i=0; while [ $i -lt 20 ]; do echo "line $i" >&2; i=$((i+1)); done; exit 3`
	_, err := run(context.Background(), "sh", "-c", script)
	if err == nil {
		t.Fatal("no error")
	}
	msg := err.Error()
	for _, want := range []string{"sh: exit status 3", "dpkg: error processing package x", "line 19", "line 12"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	if !strings.Contains(stderrOf(err), "line 0\n") || stderrOf(errors.New("plain")) != "" {
		t.Errorf("stderrOf = %q", stderrOf(err))
	}
	if strings.Contains(msg, "line 11\n") {
		t.Errorf("error has more than %d tail lines:\n%s", stderrTailLines, msg)
	}

	out, err := run(context.Background(), "sh", "-c", "echo out; echo noise >&2")
	if err != nil || string(out) != "out\n" {
		t.Errorf("run = %q, %v", out, err)
	}
}

func TestRunHonoursContext(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := run(ctx, "sleep", "10")
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("err = %v, want deadline exceeded", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Errorf("run ignored the context for %s", time.Since(start))
	}
}

func TestTailBuffer(t *testing.T) {
	tb := &tailBuffer{max: 8}
	for _, s := range []string{"abc", "defgh", "ijk"} {
		if n, err := tb.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if got := tb.String(); got != "defghijk" {
		t.Errorf("tail = %q", got)
	}
}

func TestParseVersions(t *testing.T) {
	v, err := ParseVersions([]byte("warning\n{\"python\": \"3.11.2\", \"numpy\": \"1.24.2\", \"pandas\": \"1.5.3\", \"sklearn\": \"1.2.1\", \"matplotlib\": \"3.6.3\", \"scipy\": \"1.10.1\", \"pillow\": \"9.4.0\"}\n"))
	if err != nil || v["python"] != "3.11.2" || v["matplotlib"] != "3.6.3" {
		t.Errorf("ParseVersions = %v, %v", v, err)
	}
	for _, bad := range []string{"", "not json", `{"python": "3.11.2"}`} {
		if _, err := ParseVersions([]byte(bad)); err == nil {
			t.Errorf("ParseVersions(%q) did not fail", bad)
		}
	}
}

func TestWriteReport(t *testing.T) {
	var buf bytes.Buffer
	writeReport(&buf, "localhost/bridge-python:latest", "debian", 83*time.Second, VersionKeys, map[string]string{
		"python": "3.11.2", "numpy": "1.24.2", "pandas": "1.5.3", "sklearn": "1.2.1", "matplotlib": "3.6.3", "scipy": "1.10.1", "pillow": "9.4.0",
	}, 555193545)
	want := `built localhost/bridge-python:latest with the debian method in 1m23s
  python      3.11.2
  numpy       1.24.2
  pandas      1.5.3
  sklearn     1.2.1
  matplotlib  3.6.3
  scipy       1.10.1
  pillow      9.4.0
  size        555.2 MB (555193545 bytes)
`
	if buf.String() != want {
		t.Errorf("report =\n%s\nwant\n%s", buf.String(), want)
	}
}

// fakeCLI writes a shell script that stands in for podman: it logs each argv line to log and answers the
// subcommands Build uses. Newlines inside arguments are logged as spaces. failOn makes the subcommand with that name fail with a message on stderr.
func fakeCLI(t *testing.T, failOn string) (cli, log string) {
	t.Helper()
	dir := t.TempDir()
	log = filepath.Join(dir, "argv.log")
	cli = filepath.Join(dir, "podman")
	script := `#!/bin/sh
printf '%s\n' "$*" | tr '\n' ' ' >> '` + log + `'; echo >> '` + log + `'
while [ "$1" = --runtime ]; do shift 2; done
sub="$1"; [ "$1" = image ] && sub="image-$2"
if [ "$sub" = '` + failOn + `' ]; then echo "Error: $sub failed on purpose" >&2; exit 125; fi
case "$sub" in
build) [ -f "$3" ] && grep -q '^FROM ' "$3" || { echo "no Containerfile at $3" >&2; exit 1; }
  touch '` + dir + `/built' ;;
run) echo '{"python": "3.14.0", "numpy": "2.5.5", "pandas": "3.1.1", "sklearn": "1.9.1", "matplotlib": "3.11.2", "scipy": "1.16.0", "pillow": "11.3.0"}' ;;
image-inspect) case "$*" in
  *Size*) echo 1234567 ;;
  *` + BaseImage + `) echo sha256:base ;;
  *) [ -f '` + dir + `/built' ] && echo sha256:new || echo sha256:old ;;
  esac ;;
esac
`
	if err := os.WriteFile(cli, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return cli, log
}

func TestBuildContainerfileWithFakeCLI(t *testing.T) {
	cli, log := fakeCLI(t, "")
	var stdout, stderr bytes.Buffer
	err := Build(context.Background(), Options{
		Method: MethodContainerfile, Tag: "localhost/test:1", CLI: cli, GlobalArgs: []string{"--runtime", "runc"},
		VerifyArgs: func(image string) []string { return []string{"run", "--rm", "--flag", image} },
		Stdout:     &stdout, Stderr: &stderr,
	})
	if err != nil {
		t.Fatalf("Build: %v\nstderr:\n%s", err, stderr.String())
	}
	calls, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(calls)), "\n")
	wantPrefixes := []string{
		"--runtime runc image inspect --format {{.Id}} localhost/test:1",
		"--runtime runc image inspect --format {{.Id}} " + BaseImage,
		"--runtime runc build --file ",
		"--runtime runc run --rm --flag localhost/test:1 python3 -c import json, sys",
		"--runtime runc image inspect --format {{.Size}} localhost/test:1",
		"--runtime runc image inspect --format {{.Id}} localhost/test:1",
		"--runtime runc rmi sha256:old",
	}
	if len(lines) != len(wantPrefixes) {
		t.Fatalf("calls:\n%s", calls)
	}
	for i, p := range wantPrefixes {
		if !strings.HasPrefix(lines[i], p) {
			t.Errorf("call %d = %q, want prefix %q", i, lines[i], p)
		}
	}
	for _, want := range []string{"with the containerfile method", "python      3.14.0", "size        1.2 MB (1234567 bytes)"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "image: removed the previous image old\n") {
		t.Errorf("progress lacks the removal of the previous image:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "image: build Containerfile ...") {
		t.Errorf("progress lacks the build step:\n%s", stderr.String())
	}
}

func TestBuildNamesFailedStep(t *testing.T) {
	tests := []struct{ failOn, want string }{
		{"build", "image: containerfile: build Containerfile: podman: exit status 125\n    Error: build failed on purpose"},
		{"run", "image: containerfile: verify image: podman: exit status 125\n    Error: run failed on purpose"},
	}
	for _, tt := range tests {
		cli, _ := fakeCLI(t, tt.failOn)
		err := Build(context.Background(), Options{Method: MethodContainerfile, CLI: cli})
		if err == nil || err.Error() != tt.want {
			t.Errorf("fail on %s: err = %v, want %q", tt.failOn, err, tt.want)
		}
	}
}

func TestAutoFallsBackToDebian(t *testing.T) {
	cli, _ := fakeCLI(t, "pull")
	// inspect fails too: no local base image.
	script, _ := os.ReadFile(cli)
	patched := strings.Replace(string(script), "image-inspect) case", "image-inspect) exit 1; case", 1)
	if err := os.WriteFile(cli, []byte(patched), 0o755); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	got := chooseMethod(context.Background(), Options{CLI: cli, Stderr: &stderr})
	if got != MethodDebian {
		t.Errorf("chooseMethod = %q, want debian", got)
	}
	if n := strings.Count(stderr.String(), "\n"); n != 1 || !strings.Contains(stderr.String(), "(Error: pull failed on purpose); falling back to the debian method") {
		t.Errorf("note = %q", stderr.String())
	}

	cli, _ = fakeCLI(t, "")
	if got := chooseMethod(context.Background(), Options{CLI: cli, Stderr: &stderr}); got != MethodContainerfile {
		t.Errorf("chooseMethod with the base present = %q", got)
	}
}

func TestMountsUnder(t *testing.T) {
	info := `22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
310 22 0:5 / /tmp/bridge-image-1/rootfs/dev rw shared:2 - devtmpfs udev rw
311 22 0:21 / /tmp/bridge-image-1/rootfs/proc rw shared:3 - proc proc rw
312 22 0:21 / /tmp/bridge-image-10/rootfs/proc rw shared:4 - proc proc rw
313 22 0:30 / /tmp/bridge-image-1/with\040space rw shared:5 - tmpfs tmpfs rw
`
	got := mountsUnder(info, "/tmp/bridge-image-1/")
	want := []string{"/tmp/bridge-image-1/rootfs/dev", "/tmp/bridge-image-1/rootfs/proc", "/tmp/bridge-image-1/with space"}
	if !slices.Equal(got, want) {
		t.Errorf("mountsUnder = %q, want %q", got, want)
	}
	if got := mountsUnder(info, "/tmp/bridge-image-2"); got != nil {
		t.Errorf("mountsUnder(other) = %q", got)
	}
	if got := unescapeMountinfo(`a\134b\04`); got != `a\b\04` {
		t.Errorf("unescapeMountinfo = %q", got)
	}
}

func TestRemoveWorkDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "work")
	if err := os.MkdirAll(filepath.Join(dir, "rootfs", "usr"), 0o755); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	(&builder{opts: Options{Stderr: &stderr}}).removeWorkDir(dir)
	if _, err := os.Stat(dir); !os.IsNotExist(err) || stderr.Len() != 0 {
		t.Errorf("work dir not removed: %v, %q", err, stderr.String())
	}
}

func TestFirstErrorLine(t *testing.T) {
	tests := []struct{ stderr, want string }{
		{"Selecting previously unselected package libgpg-error0:amd64.\nE: setup failed\n", "E: setup failed"},
		{"I: ok\n[Errno 2] No such file: '/x'dpkg: error processing package p (--configure):\n", "[Errno 2] No such file: '/x'dpkg: error processing package p (--configure):"},
		{"Error: short-name resolution\n", "Error: short-name resolution"},
		{"all fine\n", ""},
	}
	for _, tt := range tests {
		if got := firstErrorLine(tt.stderr); got != tt.want {
			t.Errorf("firstErrorLine(%q) = %q, want %q", tt.stderr, got, tt.want)
		}
	}
	long := strings.Repeat("x", 1000)
	if got := lastLines(long, 1)[0]; len(got) != maxLineBytes+3 {
		t.Errorf("long line kept %d bytes", len(got))
	}
}

// TestTrimScriptKeepsWhatOthersNeed runs trimScript on a fake rootfs: apt's lock files and partial directories stay
// (mmdebstrap's cleanup in unshare mode runs apt after the hook), numpy._core.tests._natype stays (numpy 2's
// numpy.testing imports it), and everything else it targets goes.
func TestTrimScriptKeepsWhatOthersNeed(t *testing.T) {
	root := t.TempDir()
	files := []string{
		"var/lib/apt/lists/lock", "var/lib/apt/lists/partial/x", "var/lib/apt/lists/deb.debian.org_Packages",
		"var/cache/apt/archives/lock", "var/cache/apt/archives/partial/y", "var/cache/apt/pkgcache.bin",
		"usr/lib/python3/dist-packages/numpy/_core/tests/__init__.py",
		"usr/lib/python3/dist-packages/numpy/_core/tests/_natype.py",
		"usr/lib/python3/dist-packages/numpy/_core/tests/test_big.py",
		"usr/lib/python3/dist-packages/pandas/tests/test_x.py",
		"usr/share/doc/python3/copyright",
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
	script := strings.ReplaceAll(trimScript(), "chown 65534:65534 workspace", "true")
	if out, err := exec.Command("sh", "-ec", script, "hook", root).CombinedOutput(); err != nil {
		t.Fatalf("trimScript: %v\n%s", err, out)
	}
	kept := map[string]bool{
		"var/lib/apt/lists/lock": true, "var/lib/apt/lists/partial/x": true, "var/cache/apt/archives/lock": true,
		"var/cache/apt/archives/partial/y":                            true,
		"usr/lib/python3/dist-packages/numpy/_core/tests/__init__.py": true,
		"usr/lib/python3/dist-packages/numpy/_core/tests/_natype.py":  true,
	}
	for _, f := range files {
		_, err := os.Stat(filepath.Join(root, f))
		if got := err == nil; got != kept[f] {
			t.Errorf("%s exists: %v, want %v", f, got, kept[f])
		}
	}
}
