package image

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
)

// The bridge's own image (`bridge image build --bridge`) runs the bridge in a Kubernetes pod: the static bridge
// binary, CA certificates, and node with npm for the stdio MCP servers that npx starts beside it. It is built from
// Debian packages like the sandbox image (mmdebstrap, then import), never from a registry, and shares nothing with it.

// DefaultBridgeName is the name of the bridge image, tagged :latest and :VERSION.
const DefaultBridgeName = "localhost/bridge"

// Labels of the bridge image. It carries no SchemaLabel: that label marks a sandbox image, which this is not.
const (
	// KindLabel is "bridge" on the bridge image.
	KindLabel = "bridge.image.kind"
	// VersionLabel is the bridge's version.
	VersionLabel = "bridge.version"
	// BinaryLabel is the hex SHA-256 of the bridge binary in the image, which tells whether an image holds a given
	// build (`go tool task image:bridge` compares it with bin/bridge).
	BinaryLabel = "bridge.binary.sha256"
)

// The user the bridge runs as, its home (the state volume in the pod), and where its binary goes. 65532 is the
// runAsUser of the manifests (engine/kube/manifests/bridge.yaml).
const (
	bridgeUID        = 65532
	bridgeUser       = "bridge"
	bridgeHome       = "/state"
	bridgeBinaryPath = "/usr/local/bin/bridge"
	// bridgeNpmCache is npm's cache: on the state volume, since the pod's root filesystem is read-only.
	bridgeNpmCache = bridgeHome + "/.npm"
)

// bridgePackages are installed into the bridge rootfs: nodejs and npm for npx, CA certificates for HTTPS (the
// bridge's own remote servers and npm's registry), netbase (/etc/services, /etc/protocols) and tzdata (TZ), the small
// files programs expect of a base system.
var bridgePackages = []string{"ca-certificates", "nodejs", "npm", "netbase", "tzdata"}

// bridgeCuts are dependencies the purge does not follow when it computes what to keep, as "package>dependency" or
// "package>*" for all of them. Debian's npm depends on node-cssesc, a virtual package only node-css-loader provides,
// which pulls in webpack, eslint and babel (some 200 packages); npm needs only the cssesc module in node-css-loader
// itself, which requires nothing. node-gyp builds native addons with python3 (gyp), the node headers and a compiler
// the image lacks; npm only resolves its path when it loads, so the package stays and what it needs to run goes.
var bridgeCuts = []string{"node-css-loader>*", "node-gyp>*"}

// bridgeVersionKeys order the lines of the bridge image's report.
var bridgeVersionKeys = []string{"bridge", "node", "npm", "npx"}

// buildBridge builds the bridge image from o (with defaults) and verifies it. Errors name the step.
func buildBridge(ctx context.Context, o Options) error {
	start := time.Now()
	refs := bridgeRefs(o.Tag, o.Version)
	o.Tag = refs[0]
	b := &builder{opts: o}
	dir, err := os.MkdirTemp("", "bridge-binary-")
	if err != nil {
		return errStep("check binary", err)
	}
	defer os.RemoveAll(dir)
	// Readable by all: mmdebstrap's unshare mode maps the namespace's root to a subordinate uid, not to this user,
	// and its hook copies the binary from here.
	if err := os.Chmod(dir, 0o755); err != nil {
		return errStep("check binary", err)
	}
	var binary, sum string
	err = b.step("check binary", func() error {
		var err error
		binary, sum, err = bridgeBinary(o.Binary, dir)
		return err
	})
	if err != nil {
		return err
	}
	previous := b.imageID(ctx)
	err = b.buildRootfsImage(ctx, debianImage{
		packages: bridgePackages,
		excludes: dpkgExcludes,
		hooks:    bridgeHooks(binary),
		importArgs: func(tarball string) []string {
			return bridgeImportArgs(tarball, refs[0], o.Suite, o.Version, sum)
		},
	})
	if err != nil {
		return err
	}
	if len(refs) > 1 {
		err := b.step("tag image", func() error {
			// One tag per call: docker tag takes one target.
			for _, r := range refs[1:] {
				if _, err := b.cli(ctx, "tag", refs[0], r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	if err := b.verifyBridge(ctx, refs, time.Since(start)); err != nil {
		return err
	}
	b.removePrevious(ctx, previous)
	return nil
}

// bridgeRefs returns the references the bridge image gets, the one it is imported and verified as first: tag itself
// when it names a tag or digest; else tag:latest, then tag:VERSION when version makes a tag (versionTag).
func bridgeRefs(tag, version string) []string {
	if last := tag[strings.LastIndex(tag, "/")+1:]; strings.ContainsAny(last, ":@") {
		return []string{tag}
	}
	refs := []string{tag + ":latest"}
	if v := versionTag(version); v != "" && v != "latest" {
		refs = append(refs, tag+":"+v)
	}
	return refs
}

// versionTag returns the image tag for the bridge version v, or "" when v names no single build: empty, a development
// version (the bridge's fallback "0.1.0-dev", Go's "(devel)"), or a build of a modified tree (Go's "+dirty" suffix).
// Such a tag would name different binaries over time; the image's BinaryLabel tells builds apart instead. Characters
// a tag cannot hold become "-".
func versionTag(v string) string {
	if v == "" || strings.HasSuffix(v, "-dev") || strings.Contains(v, "(devel)") || strings.HasSuffix(v, "+dirty") {
		return ""
	}
	t := []byte(v)
	for i, c := range t {
		if !isTagByte(c) {
			t[i] = '-'
		}
	}
	// A tag starts with a letter, digit or underscore and has at most 128 characters.
	if t[0] == '.' || t[0] == '-' {
		return ""
	}
	return string(t[:min(len(t), 128)])
}

// isTagByte reports whether c may appear in an image tag.
func isTagByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
}

// labelValue makes v safe as the unquoted value of a LABEL change: whitespace, quotes and other specials become "_".
func labelValue(v string) string {
	if v == "" {
		return "unknown"
	}
	t := []byte(v)
	for i, c := range t {
		if !isTagByte(c) && c != '+' && c != '~' && c != ':' {
			t[i] = '_'
		}
	}
	return string(t)
}

// bridgeBinary resolves the bridge binary (path, else the running executable), copies it into dir, checks that the
// copy is static, and returns the copy's path and hex SHA-256. The build uses the copy: what it checked, labelled
// and adds stays the same while the original is rebuilt in the minutes the bootstrap takes.
func bridgeBinary(path, dir string) (string, string, error) {
	if path == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", "", fmt.Errorf("find the running bridge binary: %w", err)
		}
		path = exe
	}
	if err := checkStatic(path); err != nil {
		return "", "", err
	}
	src, err := os.Open(path)
	if err != nil {
		return "", "", err
	}
	defer src.Close()
	dst, err := os.CreateTemp(dir, "bridge-")
	if err != nil {
		return "", "", err
	}
	h := sha256.New()
	_, err = io.Copy(io.MultiWriter(dst, h), src)
	if err == nil {
		err = dst.Chmod(0o755)
	}
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", "", err
	}
	// Checked again: the original may have changed between the check and the copy.
	if err := checkStatic(dst.Name()); err != nil {
		return "", "", fmt.Errorf("%s changed while it was copied: %w", path, err)
	}
	return dst.Name(), hex.EncodeToString(h.Sum(nil)), nil
}

// staticHint ends the errors of checkStatic: the image has no C library, so only a static Linux binary runs in it.
const staticHint = "build it with CGO_ENABLED=0 go build ./cmd/bridge"

// checkStatic returns an error unless path is an ELF executable with neither a program interpreter (PT_INTERP) nor
// needed shared libraries (DT_NEEDED).
func checkStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s is not a Linux ELF binary (%v): %s", path, err, staticHint)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			interp, _ := io.ReadAll(io.LimitReader(p.Open(), 4096))
			return fmt.Errorf("%s is dynamically linked (interpreter %s): %s", path, strings.TrimRight(string(interp), "\x00"), staticHint)
		}
	}
	libs, err := f.ImportedLibraries()
	if err != nil {
		return fmt.Errorf("%s: read its dynamic section: %w", path, err)
	}
	if len(libs) > 0 {
		return fmt.Errorf("%s is dynamically linked (needs %s): %s", path, strings.Join(libs, ", "), staticHint)
	}
	return nil
}

// bridgeHooks are the steps that run on the bootstrapped bridge rootfs, in order; binary is the bridge binary on the
// host.
func bridgeHooks(binary string) []hook {
	return []hook{
		{"purge unused packages", bridgePurgeScript()},
		{"trim rootfs", bridgeTrimScript()},
		{"add user", bridgeUserScript()},
		{"add bridge binary", bridgeBinaryScript(binary)},
		{"check node", bridgeCheckScript()},
	}
}

// statusFormat is the dpkg-query format keepAwk reads: status, package, dependencies, provides, essential.
const statusFormat = `${db:Status-Abbrev}\t${Package}\t${Depends}, ${Pre-Depends}\t${Provides}\t${Essential}\n`

// keepAwk selects what the bridge purge removes. It reads dpkg-query lines in statusFormat and prints, one a line,
// the installed packages outside the keep set: the closure under dependencies of the Essential packages and the
// packages in roots (space-separated), not following the edges in cuts (bridgeCuts' form). A dependency group is
// satisfied by its first alternative that is installed, or else by every installed provider of it. The order is
// dependents first, so that maintainer scripts still find what they run (python3's prerm runs py3clean, which needs
// libpython3.x-stdlib); packages in a dependency cycle come last, in input order.
const keepAwk = `
function resolve(p, out,    ng, groups, g, na, alts, a, n, skip, names, m, pl, j, k) {
  k = 0
  ng = split(deps[p], groups, ",")
  for (g = 1; g <= ng; g++) {
    na = split(groups[g], alts, "|")
    skip = 0
    for (a = 1; a <= na; a++) {
      n = alts[a]; sub(/^[ \t]+/, "", n); sub(/[ (:].*$/, "", n); names[a] = n
      if ((p ">" n) in cut) skip = 1
    }
    if (skip) continue
    for (a = 1; a <= na; a++) {
      n = names[a]
      if (n == "") continue
      if (n in installed) { out[++k] = n; break }
      if (n in providers) {
        m = split(providers[n], pl, " ")
        for (j = 1; j <= m; j++) out[++k] = pl[j]
        break
      }
    }
  }
  return k
}
BEGIN {
  FS = "\t"
  nroots = split(roots, rootList, " ")
  ncuts = split(cuts, cutList, " ")
  for (i = 1; i <= ncuts; i++) cut[cutList[i]] = 1
}
$1 ~ /^ii/ {
  p = $2
  installed[p] = 1
  order[++npkgs] = p
  deps[p] = $3
  if ($5 == "yes") rootList[++nroots] = p
  np = split($4, pv, ",")
  for (i = 1; i <= np; i++) {
    v = pv[i]; sub(/^[ \t]+/, "", v); sub(/[ (:].*$/, "", v)
    if (v != "") providers[v] = providers[v] " " p
  }
}
END {
  top = 0
  for (i = 1; i <= nroots; i++) stack[++top] = rootList[i]
  while (top > 0) {
    p = stack[top--]
    if (!(p in installed) || (p in keep)) continue
    keep[p] = 1
    if ((p ">*") in cut) continue
    k = resolve(p, found)
    for (j = 1; j <= k; j++) stack[++top] = found[j]
  }
  left = 0
  for (i = 1; i <= npkgs; i++) {
    p = order[i]
    if (p in keep) continue
    purge[p] = 1
    left++
  }
  for (i = 1; i <= npkgs; i++) {
    p = order[i]
    if (!(p in purge)) continue
    k = resolve(p, found)
    for (j = 1; j <= k; j++) {
      q = found[j]
      if ((q in purge) && q != p) { users[q]++; needs[p] = needs[p] " " q }
    }
  }
  while (left > 0) {
    progress = 0
    for (i = 1; i <= npkgs; i++) {
      p = order[i]
      if (!(p in purge) || (p in done) || users[p] > 0) continue
      print p
      done[p] = 1; left--; progress = 1
      m = split(needs[p], ql, " ")
      for (j = 1; j <= m; j++) users[ql[j]]--
    }
    if (!progress) {
      for (i = 1; i <= npkgs; i++) {
        p = order[i]
        if ((p in purge) && !(p in done)) { print p; done[p] = 1 }
      }
      left = 0
    }
  }
}
`

// bridgePurgeScript removes what keepAwk selects with dpkg --force-depends (the cut dependencies stay unmet, by
// design), then fails unless every bridge package is still installed.
func bridgePurgeScript() string {
	return `status=$(chroot "$1" dpkg-query -W -f '` + statusFormat + `')
pkgs=$(printf '%s\n' "$status" | awk -v roots=` + shellQuote(strings.Join(bridgePackages, " ")) +
		` -v cuts=` + shellQuote(strings.Join(bridgeCuts, " ")) + ` ` + shellQuote(keepAwk) + `)
if [ -n "$pkgs" ]; then
  chroot "$1" dpkg --purge --force-depends $pkgs >/dev/null
fi
for p in ` + strings.Join(bridgePackages, " ") + `; do
  s=$(chroot "$1" dpkg-query -W -f '${db:Status-Abbrev}' "$p" 2>/dev/null || true)
  case "$s" in
    ii*) ;;
    *) echo "package $p is not installed after the purge (status '$s')" >&2; exit 1 ;;
  esac
done
`
}

// bridgeTrimScript drops docs, man pages, locales, headers, apt lists and caches and logs, and the TypeScript files and
// source maps of the node modules (about 10 MB), which node never loads. Those go here, not through dpkg path
// excludes: dpkg's patterns match directories too, and node-lodash-packages has a directory lodash.map. apt's lock
// files and partial directories stay, as in trimScript: mmdebstrap's cleanup runs apt after the hooks in unshare
// mode.
func bridgeTrimScript() string {
	return `cd "$1"
rm -rf usr/share/doc/* usr/share/man/* usr/share/info/* usr/share/locale/* usr/share/lintian/* usr/include/* \
  var/cache/debconf/*-old var/lib/dpkg/*-old var/log/* tmp/* var/tmp/* root/.cache root/.npm
if [ -d usr/share/nodejs ]; then
  find usr/share/nodejs -type f \( -name '*.map' -o -name '*.ts' \) -exec rm -f {} +
fi
for d in var/lib/apt/lists var/cache/apt var/cache/apt/archives; do
  if [ -d "$d" ]; then
    find "$d" -mindepth 1 -maxdepth 1 ! -name lock ! -name partial ! -name archives -exec rm -rf {} +
  fi
done
`
}

// passwdLine is the bridge user's /etc/passwd entry: no password ("*", and no shadow file in an essential rootfs),
// home on the state volume, no login shell.
func passwdLine() string {
	return fmt.Sprintf("%s:*:%d:%d:%s:%s:/usr/sbin/nologin", bridgeUser, bridgeUID, bridgeUID, bridgeUser, bridgeHome)
}

// groupLine is the bridge group's /etc/group entry.
func groupLine() string {
	return fmt.Sprintf("%s:*:%d:", bridgeUser, bridgeUID)
}

// bridgeUserScript adds the bridge user and group, refusing a rootfs that already has the name or the id, and creates
// its home, the state directory, owned by it with mode 0750 (the pod mounts its volume there; without one it is
// still the user's own).
func bridgeUserScript() string {
	id := strconv.Itoa(bridgeUID)
	return `cd "$1"
for f in etc/passwd etc/group; do
  if grep -qE '^` + bridgeUser + `:|^[^:]*:[^:]*:` + id + `:' "$f"; then
    echo "$f already has the name ` + bridgeUser + ` or the id ` + id + `" >&2
    exit 1
  fi
done
echo ` + shellQuote(passwdLine()) + ` >>etc/passwd
echo ` + shellQuote(groupLine()) + ` >>etc/group
mkdir -p .` + bridgeHome + `
chown ` + id + `:` + id + ` .` + bridgeHome + `
chmod 0750 .` + bridgeHome + `
`
}

// bridgeBinaryScript copies the bridge binary into the rootfs, owned by root, mode 0755.
func bridgeBinaryScript(binary string) string {
	return `mkdir -p "$1` + bridgeBinaryPath[:strings.LastIndex(bridgeBinaryPath, "/")] + `"
cp ` + shellQuote(binary) + ` "$1` + bridgeBinaryPath + `"
chown 0:0 "$1` + bridgeBinaryPath + `"
chmod 0755 "$1` + bridgeBinaryPath + `"
"$1` + bridgeBinaryPath + `" --version >/dev/null
`
}

// bridgeCheckScript runs node, npm and npx in the rootfs in a clean environment, leaving nothing behind.
func bridgeCheckScript() string {
	return `chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/tmp/bridge-check \
  npm_config_cache=/tmp/bridge-check/.npm sh -ec 'node --version; npm --version; npx --version' >/dev/null
rm -rf "$1/tmp/bridge-check"
`
}

// bridgeImportArgs is the argv (after CLI and GlobalArgs) of the bridge image's import: the binary as entrypoint
// serving by default, the bridge user, its home as working directory, npm's cache on the state volume, and the
// labels.
func bridgeImportArgs(tarball, ref, suite, version, sum string) []string {
	return []string{
		"import",
		"--change", `ENTRYPOINT ["` + bridgeBinaryPath + `"]`,
		"--change", `CMD ["serve"]`,
		"--change", fmt.Sprintf("USER %d:%d", bridgeUID, bridgeUID),
		"--change", "WORKDIR " + bridgeHome,
		"--change", "ENV HOME=" + bridgeHome,
		"--change", "ENV npm_config_cache=" + bridgeNpmCache,
		"--change", "ENV PATH=" + imagePath,
		"--change", "LABEL " + KindLabel + "=bridge",
		"--change", "LABEL " + VersionLabel + "=" + labelValue(version),
		"--change", "LABEL " + BinaryLabel + "=" + sum,
		"--change", "LABEL " + SuiteLabel + "=" + suite,
		tarball, ref,
	}
}

// bridgeRunArgs is the argv (after CLI and GlobalArgs) of a check run of the bridge image ref, locked down as the
// pod runs it: read-only root, no capabilities, no network, the bridge user, a volume at /state and a tmpfs at /tmp.
// The volume is anonymous (--rm removes it) and starts as a copy of the image's /state, owned by the user, as the
// pod's fsGroup makes its volume; a tmpfs there would be root's (podman 4.3 takes no uid= for it, docker neither).
// The ulimits keep the run within the limits of hosts whose root lacks CAP_SYS_RESOURCE (CTR-1). entrypoint, when
// set, replaces the bridge binary.
func bridgeRunArgs(ref, entrypoint string, args ...string) []string {
	id := strconv.Itoa(bridgeUID)
	argv := []string{
		"run", "--rm", "--pull", "never", "--network", "none", "--read-only",
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", id + ":" + id,
		"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
		"--volume", bridgeHome, "--tmpfs", "/tmp:rw,noexec,nosuid,nodev,size=64m", "--log-driver", "none",
	}
	if entrypoint != "" {
		argv = append(argv, "--entrypoint", entrypoint)
	}
	return append(append(argv, ref), args...)
}

// bridgeVerifyScript prints the versions of node, npm and npx as "name version" lines, and npm's cache, which it
// uses: on the read-only root it is writable only under /state.
const bridgeVerifyScript = `printf 'node %s\n' "$(node --version)"
printf 'npm %s\n' "$(npm --version)"
printf 'npx %s\n' "$(npx --version)"
npm cache verify >/dev/null
printf 'cache %s\n' "$(npm config get cache)"
`

// verifyBridge runs the image as the pod would: `bridge --version` through the entrypoint, then node, npm and npx;
// it checks the version and the cache, reads the size, and writes the report to Stdout.
func (b *builder) verifyBridge(ctx context.Context, refs []string, elapsed time.Duration) error {
	return b.checkImage(ctx, strings.Join(refs, ", "), MethodDebian, elapsed, bridgeVersionKeys, func() (map[string]string, error) {
		out, err := b.cli(ctx, bridgeRunArgs(refs[0], "", "--version")...)
		if err != nil {
			return nil, err
		}
		more, err := b.cli(ctx, bridgeRunArgs(refs[0], "/bin/sh", "-ec", bridgeVerifyScript)...)
		if err != nil {
			return nil, err
		}
		return parseBridgeVersions(append(out, more...), b.opts.Version)
	})
}

// parseBridgeVersions reads the "name value" lines of the checks: every bridgeVersionKeys entry must be there, the
// bridge must report version (when not empty), and npm's cache must be bridgeNpmCache.
func parseBridgeVersions(out []byte, version string) (map[string]string, error) {
	v := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if name, value, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			v[name] = strings.TrimSpace(value)
		}
	}
	for _, k := range bridgeVersionKeys {
		if v[k] == "" {
			return nil, fmt.Errorf("versions: %s missing in %q", k, strings.TrimSpace(string(out)))
		}
	}
	if version != "" && !strings.HasPrefix(v["bridge"]+" ", version+" ") {
		return nil, fmt.Errorf("versions: the image's bridge is %q, want %s", v["bridge"], version)
	}
	if v["cache"] != bridgeNpmCache {
		return nil, fmt.Errorf("versions: npm's cache is %q, want %s", v["cache"], bridgeNpmCache)
	}
	return v, nil
}
