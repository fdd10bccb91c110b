package image

import (
	"context"
	_ "embed"
	"os"
	"path/filepath"
	"time"
)

// Containerfile is the embedded Containerfile of the Containerfile method (IMG-2).
//
//go:embed Containerfile
var Containerfile string

// BaseImage is the base image of the Containerfile; it must match its FROM line.
const BaseImage = "docker.io/library/python:3.14-slim"

// baseFetchTimeout bounds the pull of BaseImage in auto mode (IMG-2).
const baseFetchTimeout = 30 * time.Second

// chooseMethod decides the method for "auto": the Containerfile method when BaseImage is present or can be pulled
// within baseFetchTimeout, else the Debian method, with a one-line note on Stderr.
func chooseMethod(ctx context.Context, o Options) string {
	b := &builder{opts: o}
	if err := b.ensureBase(ctx, baseFetchTimeout); err != nil {
		b.progress("%s cannot be fetched (%s); falling back to the debian method", BaseImage, reason(err))
		return MethodDebian
	}
	return MethodContainerfile
}

// reason returns the last stderr line of a failed command, else the first line of err.
func reason(err error) string {
	if tail := lastLines(stderrOf(err), 1); len(tail) > 0 {
		return tail[0]
	}
	return firstLine(err.Error())
}

// ensureBase makes BaseImage present locally, pulling it when it is missing. A timeout > 0 bounds the pull.
func (b *builder) ensureBase(ctx context.Context, timeout time.Duration) error {
	if _, err := b.cli(ctx, "image", "inspect", "--format", "{{.Id}}", BaseImage); err == nil {
		return nil
	}
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	_, err := b.cli(ctx, "pull", "--quiet", BaseImage)
	return err
}

// buildContainerfile runs the Containerfile method: it writes the embedded Containerfile to a temporary directory and
// builds it with `<cli> build`.
func (b *builder) buildContainerfile(ctx context.Context) error {
	if err := b.step("fetch base image", func() error { return b.ensureBase(ctx, 0) }); err != nil {
		return err
	}
	return b.step("build Containerfile", func() error {
		dir, err := os.MkdirTemp("", "bridge-image-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		file := filepath.Join(dir, "Containerfile")
		if err := os.WriteFile(file, []byte(Containerfile), 0o644); err != nil {
			return err
		}
		_, err = b.cli(ctx, buildArgs(file, dir, b.opts.Tag)...)
		return err
	})
}

// buildArgs is the argv (after CLI and GlobalArgs) of the Containerfile build. The ulimits keep RUN steps within the
// limits of hosts whose root lacks CAP_SYS_RESOURCE (CTR-1).
func buildArgs(file, contextDir, tag string) []string {
	return []string{
		"build", "--file", file, "--tag", tag,
		"--ulimit", "nofile=1024:1024", "--ulimit", "nproc=1024:1024",
		contextDir,
	}
}
