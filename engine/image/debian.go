package image

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// debianPackages are installed into the rootfs (IMG-3).
var debianPackages = []string{"python3", "python3-numpy", "python3-pandas", "python3-sklearn", "python3-matplotlib",
	"python3-scipy", "python3-pil", "python3-cloudpickle"}

// keptPackages must still be installed after the toolchain purge. python3-scipy is listed because python3-sklearn
// needs it and it is what pulls in python3-pythran and, through it, the toolchain.
var keptPackages = append(append([]string{}, debianPackages...), "python3-sklearn-lib",
	"python3-pandas-lib")

// purgePatterns select, by whole package name, what the toolchain purge removes: the compilers and binutils, every
// -dev package (headers, boost, openblas-dev, libpython3-dev), the pythran stack, and usrmerge with the perl it
// needs. The patterns are POSIX extended regular expressions (for grep -xE) that are also valid Go regexps.
var purgePatterns = []string{
	`(gcc|g\+\+|cpp)(-[0-9]+)?`,
	`lib(asan|tsan|lsan|ubsan|hwasan|itm|cc1-|isl|mpc|mpfr|ctf|ctf-nobfd|gprofng|jansson|sframe)[0-9.]*`,
	`binutils(-.+)?`,
	`libbinutils`,
	`.+-dev`,
	`.+-dev-bin`,
	`rpcsvc-proto`,
	`python3-all`,
	`python3-(pythran|beniget|gast|ply)`,
	`libjs-sphinxdoc`,
	`usrmerge`,
	`lib(file-find-rule|number-compare|text-glob)-perl`,
	`perl`,
	`perl-modules-.+`,
	`libperl5\..+`,
	`libgdbm-compat[0-9]+`,
}

// purgeRegexp is purgePatterns as one ERE alternation, to be matched against whole names.
func purgeRegexp() string {
	return strings.Join(purgePatterns, "|")
}

// purgeList returns the installed packages that the toolchain purge removes, in the order given: the Go form of the
// grep -xE selection in purgeScript, which the tests check against each other and against a real package list.
func purgeList(installed []string) []string {
	re := regexp.MustCompile(`^(?:` + purgeRegexp() + `)$`)
	var out []string
	for _, p := range installed {
		if re.MatchString(p) {
			out = append(out, p)
		}
	}
	return out
}

// dpkgExcludes are paths dpkg never unpacks during the bootstrap: docs, man pages, locales, headers and compiler
// internals. The trim step deletes them as well, for debootstrap. Python test suites cannot be excluded here (the
// packages' py3compile postinst fails on missing files); the trim step deletes them.
var dpkgExcludes = []string{
	"/usr/share/doc/*",
	"/usr/share/man/*",
	"/usr/share/info/*",
	"/usr/share/locale/*",
	"/usr/share/lintian/*",
	"/usr/include/*",
	"/usr/lib/gcc/*",
	"/usr/libexec/gcc/*",
}

// checkImports is the Python statement run inside the rootfs (IMG-3 step 3).
const checkImports = "import numpy, pandas, sklearn, matplotlib, scipy, PIL"

// hook is one step that runs on the rootfs as a shell script with the rootfs path in $1, in the same form as an
// mmdebstrap --customize-hook.
type hook struct {
	name   string
	script string
}

// rootfsHooks are the steps that run on a bootstrapped rootfs, in order.
func rootfsHooks() []hook {
	return []hook{
		{"purge toolchain", purgeScript()},
		{"trim rootfs", trimScript()},
		{"check imports", checkScript()},
	}
}

// purgeScript removes the purgeList packages with dpkg --force-depends (apt would take python3-scipy and
// python3-sklearn along, since python3-scipy depends on python3-pythran), then fails unless every kept package is
// still installed.
func purgeScript() string {
	return `pkgs=$(chroot "$1" dpkg-query -W -f '${Package}\n' | grep -xE '` + purgeRegexp() + `' || true)
if [ -n "$pkgs" ]; then
  chroot "$1" dpkg --purge --force-depends $pkgs >/dev/null
fi
for p in ` + strings.Join(keptPackages, " ") + `; do
  s=$(chroot "$1" dpkg-query -W -f '${db:Status-Abbrev}' "$p" 2>/dev/null || true)
  case "$s" in
    ii*) ;;
    *) echo "package $p is not installed after the purge (status '$s')" >&2; exit 1 ;;
  esac
done
`
}

// trimScript drops docs, man pages, locales, headers, Python test suites, apt lists and caches and logs, and creates
// /workspace owned by 65534:65534 with mode 1777: podman gives a tmpfs mounted there the mode of the image's
// directory (not its owner), so 1777 keeps a --tmpfs /workspace writable for any --user.
//
// apt's lock files and partial directories stay: in unshare mode this runs as a customize hook, and mmdebstrap's own
// cleanup afterwards runs apt, which fails without them ("Could not open lock file /var/lib/apt/lists/lock"). numpy
// 2's numpy.testing imports numpy._core.tests._natype, so that one module of the test suites stays.
func trimScript() string {
	return `cd "$1"
rm -rf usr/share/doc/* usr/share/man/* usr/share/info/* usr/share/locale/* usr/share/lintian/* \
  usr/include/* usr/lib/gcc usr/libexec/gcc \
  var/cache/debconf/*-old var/lib/dpkg/*-old var/log/* \
  tmp/* var/tmp/* root/.cache
for d in var/lib/apt/lists var/cache/apt var/cache/apt/archives; do
  [ -d "$d" ] && find "$d" -mindepth 1 -maxdepth 1 ! -name lock ! -name partial ! -name archives -exec rm -rf {} +
done
find usr/lib/python3/dist-packages -type d -name tests ! -path '*/numpy/_core/tests' -prune -exec rm -rf {} +
if [ -d usr/lib/python3/dist-packages/numpy/_core/tests ]; then
  find usr/lib/python3/dist-packages/numpy/_core/tests -mindepth 1 ! -name __init__.py ! -name _natype.py -exec rm -rf {} +
fi
mkdir -p workspace
chown 65534:65534 workspace
chmod 1777 workspace
`
}

// checkScript imports the four libraries with the rootfs's python3 in a clean environment, leaving nothing behind.
func checkScript() string {
	return `chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp MPLCONFIGDIR=/tmp/bridge-check \
  MPLBACKEND=Agg PYTHONDONTWRITEBYTECODE=1 python3 -c '` + checkImports + `'
rm -rf "$1/tmp/bridge-check"
`
}

// debianImage is one image the Debian method builds: the packages bootstrapped, the paths dpkg does not unpack
// (mmdebstrap only), the steps run on the rootfs, and the argv (after CLI and GlobalArgs) of the import of the rootfs
// tarball.
type debianImage struct {
	packages   []string
	excludes   []string
	hooks      []hook
	importArgs func(tarball string) []string
}

// buildDebian runs the Debian method (IMG-3) for the sandbox image.
func (b *builder) buildDebian(ctx context.Context) error {
	return b.buildRootfsImage(ctx, debianImage{
		packages:   debianPackages,
		excludes:   dpkgExcludes,
		hooks:      rootfsHooks(),
		importArgs: func(tarball string) []string { return importArgs(tarball, b.opts.Tag, b.opts.Suite) },
	})
}

// buildRootfsImage bootstraps, customizes and imports img. As root, each step runs on a rootfs directory; otherwise
// mmdebstrap runs in unshare mode with the rootfs steps as customize hooks and writes the tarball itself.
func (b *builder) buildRootfsImage(ctx context.Context, img debianImage) error {
	work, err := os.MkdirTemp("", "bridge-image-")
	if err != nil {
		return errStep("create work dir", err)
	}
	defer b.removeWorkDir(work)
	tarball := filepath.Join(work, "rootfs.tar")
	if os.Geteuid() == 0 {
		rootfs := filepath.Join(work, "rootfs")
		if err := b.step("bootstrap rootfs", func() error { return b.bootstrap(ctx, rootfs, img) }); err != nil {
			return err
		}
		for _, h := range img.hooks {
			if err := b.step(h.name, func() error { return runHook(ctx, h, rootfs) }); err != nil {
				return err
			}
		}
		if err := b.step("write tarball", func() error { return writeTarball(ctx, rootfs, tarball) }); err != nil {
			return err
		}
	} else if err := b.bootstrapUnshare(ctx, tarball, img); err != nil {
		return err
	}
	return b.step("import image", func() error {
		defer os.Remove(tarball)
		_, err := b.cli(ctx, img.importArgs(tarball)...)
		return err
	})
}

// bootstrap builds the rootfs directory of img with mmdebstrap, else debootstrap.
func (b *builder) bootstrap(ctx context.Context, rootfs string, img debianImage) error {
	if _, err := exec.LookPath("mmdebstrap"); err == nil {
		_, err := run(ctx, "mmdebstrap", mmdebstrapPackageArgs(img.packages, img.excludes, b.opts.Suite, b.opts.Mirror, rootfs, "root", nil)...)
		return err
	}
	if _, err := exec.LookPath("debootstrap"); err == nil {
		_, err := run(ctx, "debootstrap", debootstrapPackageArgs(img.packages, b.opts.Suite, b.opts.Mirror, rootfs)...)
		return err
	}
	return errNoBootstrapper
}

// bootstrapUnshare builds the image tarball of img without root: mmdebstrap in unshare mode, running img's hooks as
// customize hooks. Each hook first prints a step marker, so an error names the step that failed.
func (b *builder) bootstrapUnshare(ctx context.Context, tarball string, img debianImage) error {
	if _, err := exec.LookPath("mmdebstrap"); err != nil {
		return errStep("bootstrap rootfs", errors.New("without root the debian method needs mmdebstrap (unshare mode); install mmdebstrap or run as root"))
	}
	b.progress("bootstrap rootfs (mmdebstrap --mode=unshare), then %s ...", hookNames(img.hooks))
	_, err := run(ctx, "mmdebstrap", mmdebstrapPackageArgs(img.packages, img.excludes, b.opts.Suite, b.opts.Mirror, tarball, "unshare", img.hooks)...)
	if err != nil {
		return errStep(failedHook(stderrOf(err)), err)
	}
	return nil
}

// hookMarker starts the line each customize hook prints to stderr before it runs.
const hookMarker = "bridge-step: "

// hookNames lists the names of hooks, comma-separated.
func hookNames(hooks []hook) string {
	var names []string
	for _, h := range hooks {
		names = append(names, h.name)
	}
	return strings.Join(names, ", ")
}

// failedHook returns the step named by the last hook marker in stderr, or "bootstrap rootfs" when no hook had started.
func failedHook(stderr string) string {
	step := "bootstrap rootfs"
	for _, line := range strings.Split(stderr, "\n") {
		// Only whole marker lines: mmdebstrap also echoes each hook's command, marker included.
		if name, ok := strings.CutPrefix(strings.TrimSpace(line), hookMarker); ok {
			step = strings.TrimSpace(name)
		}
	}
	return step
}

// mmdebstrapArgs is the argv of mmdebstrap for the sandbox image: an essential rootfs with debianPackages, dpkgExcludes
// applied, written to target (a directory for mode "root", a tar file for mode "unshare"), with hooks as customize
// hooks.
func mmdebstrapArgs(suite, mirror, target, mode string, hooks []hook) []string {
	return mmdebstrapPackageArgs(debianPackages, dpkgExcludes, suite, mirror, target, mode, hooks)
}

// mmdebstrapPackageArgs is mmdebstrapArgs with packages and excludes in place of debianPackages and dpkgExcludes.
func mmdebstrapPackageArgs(packages, excludes []string, suite, mirror, target, mode string, hooks []hook) []string {
	format := "directory"
	if mode != "root" {
		format = "tar"
	}
	args := []string{
		"--variant=essential",
		"--mode=" + mode,
		"--format=" + format,
		"--include=" + strings.Join(packages, ","),
		`--aptopt=Acquire::Retries "3"`,
	}
	if mode != "root" {
		// The trim hook empties the package lists and the apt cache; mmdebstrap's own cleanup would run apt again
		// after the hooks, which fails in unshare mode ("Could not open lock file /var/lib/apt/lists/lock").
		args = append(args, "--skip=cleanup/apt")
	}
	for _, p := range excludes {
		args = append(args, "--dpkgopt=path-exclude="+p)
	}
	for _, h := range hooks {
		script := "echo " + shellQuote(hookMarker+h.name) + " >&2 && sh -ec " + shellQuote(h.script) + ` hook "$1"`
		args = append(args, "--customize-hook="+script)
	}
	return append(args, suite, target, mirror)
}

// debootstrapArgs is the argv of debootstrap for the sandbox image, the fallback when mmdebstrap is missing.
func debootstrapArgs(suite, mirror, rootfs string) []string {
	return debootstrapPackageArgs(debianPackages, suite, mirror, rootfs)
}

// debootstrapPackageArgs is debootstrapArgs with packages in place of debianPackages.
func debootstrapPackageArgs(packages []string, suite, mirror, rootfs string) []string {
	return []string{"--variant=minbase", "--include=" + strings.Join(packages, ","), suite, rootfs, mirror}
}

// runHook runs h on the rootfs directory, as mmdebstrap would: `sh -ec <script> hook <rootfs>`.
func runHook(ctx context.Context, h hook, rootfs string) error {
	_, err := run(ctx, "sh", "-ec", h.script, "hook", rootfs)
	return err
}

// writeTarball writes rootfs into the tar file tarball (a file: a pipe into import is about 3× slower), then removes
// rootfs to bound the disk used.
func writeTarball(ctx context.Context, rootfs, tarball string) error {
	if _, err := run(ctx, "tar", "--numeric-owner", "-C", rootfs, "-cf", tarball, "."); err != nil {
		return err
	}
	return os.RemoveAll(rootfs)
}

// importArgs is the argv (after CLI and GlobalArgs) of the import step, with the IMG-1 settings as --change.
func importArgs(tarball, tag, suite string) []string {
	return []string{
		"import",
		"--change", `CMD ["python3"]`,
		"--change", "USER 65534:65534",
		"--change", "WORKDIR /workspace",
		"--change", "ENV MPLBACKEND=Agg",
		"--change", "ENV PATH=" + imagePath,
		"--change", "LABEL " + SchemaLabel,
		"--change", "LABEL " + SuiteLabel + "=" + suite,
		tarball, tag,
	}
}

// imagePath is the PATH of the imported image (an imported image has no environment of its own).
const imagePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// shellQuote quotes s for POSIX sh as one word.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
