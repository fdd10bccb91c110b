// Package image builds the default sandbox image (SPEC §6.4, `bridge image build`), and the bridge's own image for a
// Kubernetes deployment (`bridge image build --bridge`, bridge.go).
//
// Two methods exist. The Containerfile method builds the embedded Containerfile on top of python:3.14-slim and needs a
// reachable container registry. The Debian method needs no registry: it bootstraps a Debian rootfs with mmdebstrap (or
// debootstrap), trims it, and imports it as an image. Both end by running the image once and reporting the versions
// and the image size.
package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Build methods accepted in Options.Method.
const (
	MethodAuto          = "auto"
	MethodContainerfile = "containerfile"
	MethodDebian        = "debian"
)

// Defaults used by Build for empty Options fields.
const (
	DefaultTag    = "localhost/bridge-python:latest"
	DefaultSuite  = "trixie"
	DefaultMirror = "http://deb.debian.org/debian"
	DefaultCLI    = "podman"
)

// SchemaLabel is the label every bridge image carries (IMG-1). Schema 3 is the generation built from Debian trixie or
// python:3.13-slim+ (Python 3.13+, numpy 2, pandas 2, scipy, pillow) with the standalone cloudpickle that session
// snapshots use; images with an older schema (or none) are out of date: `bridge doctor` says so and
// `go tool task image` rebuilds them.
const SchemaLabel = SchemaKey + "=" + Schema

// SchemaKey and Schema make up SchemaLabel.
const (
	SchemaKey = "bridge.image.schema"
	Schema    = "3"
)

// SuiteLabel names the Debian suite of an image built with the Debian method.
const SuiteLabel = "bridge.image.suite"

// Options configures Build. Empty fields take the defaults described on each field.
type Options struct {
	// Method is "auto" (default), "containerfile" or "debian".
	Method string
	// Tag names the built image; default "localhost/bridge-python:latest".
	Tag string
	// Suite is the Debian suite of the Debian method; default "trixie".
	Suite string
	// Mirror is the Debian mirror of the Debian method; default: the host's apt mirror, else
	// http://deb.debian.org/debian.
	Mirror string
	// CLI is the container CLI, a name or a path such as "podman" or "docker"; default "podman".
	CLI string
	// GlobalArgs are placed before every subcommand, e.g. ["--runtime", "runc"].
	GlobalArgs []string
	// VerifyArgs returns the argv (after CLI and GlobalArgs, starting with "run") of the final check of image; the
	// builder appends `python3 -c <check script>`. Nil means DefaultVerifyArgs.
	VerifyArgs func(image string) []string
	// Stdout receives the final report, Stderr the progress lines. Nil means io.Discard.
	Stdout, Stderr io.Writer

	// Bridge builds the bridge's own image instead of the sandbox image (bridge.go): the Debian method only, and Tag
	// is then a name (default "localhost/bridge") tagged :latest and :Version, or one full reference; VerifyArgs is
	// not used.
	Bridge bool
	// Version is the bridge's version, for the bridge image's label and version tag.
	Version string
	// Binary is the bridge binary the bridge image gets; default: the running executable.
	Binary string
}

// DefaultVerifyArgs is the argv of the final check used when Options.VerifyArgs is nil: a locked-down, networkless,
// read-only run of image as 65534:65534. The /tmp tmpfs is needed with docker, which (unlike podman) mounts none under
// --read-only: importing matplotlib fails without a writable temporary directory.
func DefaultVerifyArgs(image string) []string {
	return []string{
		"run", "--rm", "--pull", "never", "--network", "none", "--read-only",
		"--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--user", "65534:65534",
		"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
		"--tmpfs", "/tmp:rw,noexec,nosuid,nodev,size=64m", "--log-driver", "none",
		image,
	}
}

// Build builds the image described by opts and verifies it. Progress goes to opts.Stderr and the final report (versions
// and image size) to opts.Stdout. Errors name the method and the step that failed, e.g.
// "image: debian: purge toolchain: ...".
func Build(ctx context.Context, opts Options) error {
	o, err := withDefaults(opts)
	if err != nil {
		return fmt.Errorf("image: %w", err)
	}
	if o.Bridge {
		if err := buildBridge(ctx, o); err != nil {
			return fmt.Errorf("image: bridge: %w", err)
		}
		return nil
	}
	start := time.Now()
	b := &builder{opts: o}
	previous := b.imageID(ctx)
	method := o.Method
	if method == MethodAuto {
		method = chooseMethod(ctx, o)
	}
	switch method {
	case MethodContainerfile:
		err = b.buildContainerfile(ctx)
	default:
		err = b.buildDebian(ctx)
	}
	if err != nil {
		return fmt.Errorf("image: %s: %w", method, err)
	}
	if err := b.verify(ctx, method, time.Since(start)); err != nil {
		return fmt.Errorf("image: %s: %w", method, err)
	}
	b.removePrevious(ctx, previous)
	return nil
}

// imageID returns the ID of the image Tag, or "" when there is none.
func (b *builder) imageID(ctx context.Context) string {
	out, err := b.cli(ctx, "image", "inspect", "--format", "{{.Id}}", b.opts.Tag)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// removePrevious removes the image that Tag named before this build, now untagged, so that rebuilds do not pile up
// dangling images. Failure (the image is used by a container, or has other tags) only earns a progress line.
func (b *builder) removePrevious(ctx context.Context, previous string) {
	if previous == "" || previous == b.imageID(ctx) {
		return
	}
	if _, err := b.cli(ctx, "rmi", previous); err != nil {
		b.progress("previous image %s kept: %s", shortID(previous), reason(err))
		return
	}
	b.progress("removed the previous image %s", shortID(previous))
}

// shortID shortens an image ID for display.
func shortID(id string) string {
	id = strings.TrimPrefix(id, "sha256:")
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// withDefaults fills the empty fields of opts and validates the method.
func withDefaults(opts Options) (Options, error) {
	switch opts.Method {
	case "":
		opts.Method = MethodAuto
	case MethodAuto, MethodContainerfile, MethodDebian:
	default:
		return opts, fmt.Errorf("method: unknown method %q; want auto, containerfile or debian", opts.Method)
	}
	if opts.Bridge {
		// The bridge image has no Containerfile: its one way is Debian packages.
		if opts.Method == MethodContainerfile {
			return opts, fmt.Errorf("method: the bridge image is built with the debian method only, not %q", opts.Method)
		}
		opts.Method = MethodDebian
		if opts.Tag == "" {
			opts.Tag = DefaultBridgeName
		}
	}
	if opts.Tag == "" {
		opts.Tag = DefaultTag
	}
	if opts.Suite == "" {
		opts.Suite = DefaultSuite
	}
	if opts.Mirror == "" {
		opts.Mirror = HostMirror()
	}
	if opts.CLI == "" {
		opts.CLI = DefaultCLI
	}
	if opts.VerifyArgs == nil {
		opts.VerifyArgs = DefaultVerifyArgs
	}
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	return opts, nil
}

// errStep marks an error as belonging to a named build step.
func errStep(step string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", step, err)
}

// builder carries the options through the steps of one Build.
type builder struct {
	opts Options
}

// progress writes one progress line to Stderr.
func (b *builder) progress(format string, args ...any) {
	fmt.Fprintf(b.opts.Stderr, "image: "+format+"\n", args...)
}

// step runs fn as the named step, with a progress line before and its duration after.
func (b *builder) step(name string, fn func() error) error {
	b.progress("%s ...", name)
	start := time.Now()
	if err := fn(); err != nil {
		return errStep(name, err)
	}
	b.progress("%s: done in %s", name, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// cli runs the container CLI with GlobalArgs and args, returning its stdout.
func (b *builder) cli(ctx context.Context, args ...string) ([]byte, error) {
	argv := append(append([]string{}, b.opts.GlobalArgs...), args...)
	return run(ctx, b.opts.CLI, argv...)
}

// errNoBootstrapper reports that neither mmdebstrap nor debootstrap is installed.
var errNoBootstrapper = errors.New("neither mmdebstrap nor debootstrap found in PATH; install mmdebstrap")
