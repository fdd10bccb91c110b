package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/bridge-mcp/bridge/engine"
	"github.com/bridge-mcp/bridge/engine/image"
	"github.com/bridge-mcp/bridge/protocol/search"
)

// imageCmd builds the sandbox image, or with --bridge the bridge's own image.
func (m *Main) imageCmd(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("image build", flag.ContinueOnError)
	method := fs.String("method", "auto", "`METHOD`: auto, containerfile or debian")
	tag := fs.String("tag", engine.DefaultImage, "image `TAG`; with --bridge a name tagged :VERSION and :latest ("+image.DefaultBridgeName+" unless given) or one full reference")
	bridge := fs.Bool("bridge", false, "build the bridge's own image for Kubernetes (this static binary, nodejs, npm; debian method) instead of the sandbox image")
	suite := fs.String("suite", image.DefaultSuite, "Debian `SUITE` (debian method)")
	mirror := fs.String("mirror", "", "Debian mirror `URL` (default: the host's apt mirror)")
	switch {
	case len(args) == 0:
		return m.usage("image: want a subcommand: bridge image build (bridge image --help)")
	case args[0] == "-h" || args[0] == "--help" || args[0] == "-help":
		m.commandHelp("image", fs)
		return 0
	case args[0] != "build":
		msg := fmt.Sprintf("image: unknown subcommand %q", args[0])
		if s := search.Suggest(args[0], []string{"build"}, 1); len(s) > 0 {
			msg += "; did you mean \"build\"?"
		}
		return m.usage("%s (the one subcommand: bridge image build [flags]; bridge image --help)", msg)
	}
	if _, code, ok := m.parse("image build", fs, args[1:], 0); !ok {
		return code
	}
	switch *method {
	case "auto", "containerfile", "debian":
	default:
		return m.usage("image build: invalid --method %q: want auto, containerfile or debian", *method)
	}
	tagSet := false
	fs.Visit(func(f *flag.Flag) { tagSet = tagSet || f.Name == "tag" })
	if *bridge {
		// The bridge image has no Containerfile; auto means debian for it.
		if *method == "containerfile" {
			return m.usage("image build: --bridge builds with the debian method only; drop --method containerfile")
		}
		if !tagSet {
			*tag = ""
		}
	}
	env, ok := m.loadEnv()
	if !ok {
		return 2
	}
	log := m.logger(env, env.LogLevel)
	l := engine.NewContainer(env, log)
	cli, err := l.CLI()
	if err == nil {
		// A runtime that does not answer fails here with its fix, not
		// after a registry pull times out; the probe also settles the OCI
		// runtime the build's containers use (GlobalArgs).
		err = l.Facts().Err
	}
	if err != nil {
		m.Stderr.Write([]byte("bridge: image build: " + err.Error() + "\n"))
		return 1
	}
	err = image.Build(ctx, image.Options{
		Method: *method, Tag: *tag, Suite: *suite, Mirror: *mirror,
		Bridge: *bridge, Version: Version(),
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
