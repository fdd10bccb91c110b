package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/engine"
)

// version and commit are set with -ldflags "-X main.version=... -X main.commit=...".
var (
	version = ""
	commit  = ""
)

// Version is the build version, the same string serverInfo carries.
func Version() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "0.1.0-dev"
}

func commitID() string {
	if commit != "" {
		return commit
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return s.Value[:12]
			}
		}
	}
	return "unknown"
}

// Main is the testable program: Run returns the process exit code.
type Main struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
}

const commandList = "run, exec, doctor, image, bench, version"

// Run dispatches to a subcommand; plain `bridge` means `bridge run`.
func (m *Main) Run(ctx context.Context, args []string) int {
	cmd := "run"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "run":
		return m.runCmd(ctx, args)
	case "exec":
		return m.execCmd(ctx, args)
	case "image":
		return m.imageCmd(ctx, args)
	case "bench":
		return m.benchCmd(ctx, args)
	case "doctor":
		return m.doctorCmd(ctx, args)
	case "bench-server": // hidden: the MCP server bridge bench proxies
		return m.benchServerCmd(ctx, args)
	case "version", "--version":
		fmt.Fprintf(m.Stdout, "bridge %s (%s, %s)\n", Version(), commitID(), runtime.Version())
		return 0
	case "help", "-h", "--help":
		fmt.Fprintf(m.Stdout, "usage: bridge [command]\ncommands: %s\n", commandList)
		return 0
	}
	return m.usage("unknown command %q; commands: %s", cmd, commandList)
}

// usage prints one line and returns exit code 2 (CLI-1).
func (m *Main) usage(format string, a ...any) int {
	fmt.Fprintf(m.Stderr, "bridge: "+format+"\n", a...)
	return 2
}

// loadEnv parses the environment; on error it prints one line (exit 2).
func (m *Main) loadEnv() (engine.Env, bool) {
	home, _ := os.UserHomeDir()
	if h := m.Getenv("HOME"); h != "" {
		home = h
	}
	env, err := engine.LoadEnv(m.Getenv, home)
	if err != nil {
		fmt.Fprintf(m.Stderr, "bridge: %v\n", err)
		return env, false
	}
	return env, true
}

// logger returns the zerolog logger on stderr and routes the stdlib log
// and slog (which mcp-go uses) to it (LIF-2).
func (m *Main) logger(level zerolog.Level) zerolog.Logger {
	zerolog.TimeFieldFormat = "2006-01-02T15:04:05.000Z07:00"
	l := zerolog.New(m.Stderr).Level(level).With().Timestamp().Logger()
	log.SetFlags(0)
	log.SetOutput(l.With().Str("source", "log").Logger())
	slog.SetDefault(slog.New(zerolog.NewSlogHandler(l)))
	return l
}

// levelFromEnv returns the env's level, or def when MCP_BRIDGE_LOG_LEVEL is unset.
func (m *Main) levelFromEnv(env engine.Env, def zerolog.Level) zerolog.Level {
	if strings.TrimSpace(m.Getenv("MCP_BRIDGE_LOG_LEVEL")) == "" {
		return def
	}
	return env.LogLevel
}
