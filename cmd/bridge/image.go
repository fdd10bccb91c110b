package main

import (
	"context"
	"flag"
	"io"

	"github.com/bridge-mcp/bridge/engine"
	"github.com/bridge-mcp/bridge/engine/image"
)

// imageCmd builds the sandbox image (SPEC §6.4).
func (m *Main) imageCmd(ctx context.Context, args []string) int {
	if len(args) == 0 || args[0] != "build" {
		return m.usage("image: want `bridge image build [--method auto|containerfile|debian] [--tag T] [--suite S] [--mirror URL]`")
	}
	fs := flag.NewFlagSet("image build", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	method := fs.String("method", "auto", "auto, containerfile or debian")
	tag := fs.String("tag", engine.DefaultImage, "image tag")
	suite := fs.String("suite", image.DefaultSuite, "Debian suite")
	mirror := fs.String("mirror", "", "Debian mirror (default: the host's apt mirror)")
	if err := fs.Parse(args[1:]); err != nil {
		return m.usage("image build: %v", err)
	}
	switch *method {
	case "auto", "containerfile", "debian":
	default:
		return m.usage("image build: invalid --method %q: want auto, containerfile or debian", *method)
	}
	env, ok := m.loadEnv()
	if !ok {
		return 2
	}
	log := m.logger(env.LogLevel)
	l := engine.NewLauncher(env, engine.Owner(), log)
	cli, err := l.CLI()
	if err != nil {
		m.Stderr.Write([]byte("bridge: image build: " + err.Error() + "\n"))
		return 1
	}
	err = image.Build(ctx, image.Options{
		Method: *method, Tag: *tag, Suite: *suite, Mirror: *mirror,
		CLI: cli, GlobalArgs: l.GlobalArgs(),
		VerifyArgs: func(img string) []string { return l.VerifyArgs(img) },
		Stdout:     m.Stdout, Stderr: m.Stderr,
	})
	if err != nil {
		m.Stderr.Write([]byte("bridge: " + err.Error() + "\n"))
		return 1
	}
	return 0
}
