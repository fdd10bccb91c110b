package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"unicode"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/engine"
	"github.com/bridge-mcp/bridge/protocol/search"
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

// command is one subcommand as help lists it.
type command struct {
	name     string
	synopsis string // what follows `bridge NAME` in the usage line
	summary  string // one line for the top-level help
	detail   string // more lines for the command's own help; may be ""
	run      func(m *Main, ctx context.Context, args []string) int
}

// commands is every public subcommand, in help order; set by init, since
// help refers back to it.
var commands []command

func init() { commands = commandTable() }

func commandTable() []command {
	return []command{
		{"run", "[--watch]", "serve MCP over stdio: the command an agent runs (the default)",
			"Serves the run_python tool to one MCP client on stdin/stdout; logs go to stderr.\n" +
				"Add it to an agent as `bridge run` (see README, \"Add to your agent\").",
			(*Main).runCmd},
		{"serve", "--listen HOST:PORT [flags]", "serve MCP over streamable HTTP to a team, with bearer tokens",
			"Serves run_python at /mcp to many clients; each token's principal has its own sessions,\n" +
				"memory and saved tools. Tokens come from MCP_BRIDGE_TOKENS_FILE (README, \"Serving a team\").",
			(*Main).serveCmd},
		{"exec", "[flags] (CODE | -)", "run Python once through the same engine and print the result",
			"CODE is Python source, or - to read it from stdin. Flags may come before or after CODE;\n" +
				"code that starts with '-' goes after --: bridge exec -- '-1 + 2'.\n" +
				"Exit codes: 0 success, 1 error, 2 validation or usage, 124 timeout.",
			(*Main).execCmd},
		{"doctor", "[--json] [--server NAME]", "check the runtime, image, state dir, config files and servers",
			"Prints one `OK|WARN|FAIL <check>: <detail>` line per check; exits 1 when any check FAILs.",
			(*Main).doctorCmd},
		{"auth", "(login NAME [flags] | status [--principal P] | logout NAME [--principal P])", "sign in to remote MCP servers that require OAuth",
			"login runs the browser sign-in for a configured http/sse server and stores its tokens;\n" +
				"status lists what is stored; logout removes a server's tokens. --principal: bridge serve's\n" +
				"principal P's own sign-ins (servers with \"identity\": \"principal\"), which P makes from their MCP client.",
			(*Main).authCmd},
		{"audit", "(verify | show [flags])", "check or list the audit trail of run_python calls",
			"verify checks the chain of <state>/.bridge/audit with MCP_BRIDGE_KEY_FILE: exit 0 when intact, 1 naming the first\n" +
				"record edited, removed or reordered. show lists the call records that match its filters.",
			(*Main).auditCmd},
		{"replay", "(ID | --since WHEN --tool NAME) [flags]", "run recorded calls again against their recorded answers",
			"Runs recorded call ID (bridge audit show) in a fresh sandbox, after re-running its session's earlier calls, answering\n" +
				"every tool, resource, memory and search request from the audit trail: no server is contacted. Prints the\n" +
				"output, then the verdict: same, the first divergence, or where it stopped. Exit 0 when every call replayed\n" +
				"the same, 1 when any diverged or stopped, 2 for usage.",
			(*Main).replayCmd},
		{"image", "build [flags]", "build the sandbox image, or with --bridge the bridge's own",
			"Builds the image with python3, numpy, pandas, scikit-learn and matplotlib.\n" +
				"With --bridge, builds the bridge's own image for Kubernetes instead (localhost/bridge:latest, and :VERSION for a release build):\n" +
				"this static binary as entrypoint, CA certificates, nodejs and npm (for npx servers), user 65532, home /state.",
			(*Main).imageCmd},
		{"bench", "[flags]", "measure tokens, latency, proxy overhead, memory and scaling against baselines",
			"Writes bench.json and bench.md to --out and prints the markdown table.",
			(*Main).benchCmd},
		{"kubernetes", "(manifests | seccomp) [flags]", "print the manifests to run the bridge in a cluster, or the seccomp profile for its nodes",
			"manifests: Namespace, ServiceAccount, Role, RoleBinding, NetworkPolicy, ConfigMap (--servers, --policy), PersistentVolumeClaim, Deployment and Service; the Secret bridge-secrets is yours to create (README, \"Kubernetes\").\n" +
				"seccomp: the sandbox pods' seccomp profile (no AF_INET or AF_INET6 sockets), to install on each node for MCP_BRIDGE_K8S_SECCOMP_PROFILE.",
			(*Main).kubernetesCmd},
		{"version", "", "print the version", "", (*Main).versionCmd},
		{"help", "[COMMAND]", "show help for bridge or one command", "", (*Main).helpCmd},
	}
}

func commandNames() []string {
	names := make([]string, len(commands))
	for i, c := range commands {
		names[i] = c.name
	}
	return names
}

func lookupCommand(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

// Run dispatches to a subcommand; plain `bridge` (or flags only) means
// `bridge run`.
func (m *Main) Run(ctx context.Context, args []string) int {
	if len(args) > 0 {
		switch args[0] {
		case "-h", "--help", "-help":
			return m.helpCmd(ctx, args[1:])
		case "--version":
			return m.versionCmd(ctx, args[1:])
		}
	}
	name := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if name == "bench-server" { // hidden: the MCP server bridge bench proxies
		return m.benchServerCmd(ctx, args)
	}
	if c := lookupCommand(name); c != nil {
		return c.run(m, ctx, args)
	}
	return m.usage("%s", unknownCommand("unknown command", name))
}

// topHelp lists every command with one line.
func (m *Main) topHelp(w io.Writer) {
	fmt.Fprintf(w, "bridge %s: an MCP server with one tool, run_python, that runs Python in a locked-down\n", Version())
	fmt.Fprintf(w, "container session whose code can call your other MCP servers.\n\n")
	fmt.Fprintf(w, "usage: bridge [COMMAND] [FLAGS]\n\ncommands:\n")
	width := 0
	for _, c := range commands {
		width = max(width, len(c.name))
	}
	for _, c := range commands {
		fmt.Fprintf(w, "  %-*s  %s\n", width, c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun `bridge help COMMAND` or `bridge COMMAND --help` for a command's flags.\n")
	fmt.Fprintf(w, "Settings are MCP_BRIDGE_* environment variables (README, \"Environment variables\").\n")
}

func (m *Main) helpCmd(ctx context.Context, args []string) int {
	switch {
	case len(args) == 0:
		m.topHelp(m.Stdout)
		return 0
	case args[0] == "-h" || args[0] == "--help" || args[0] == "-help":
		m.commandHelp("help", flag.NewFlagSet("help", flag.ContinueOnError))
		return 0
	case len(args) > 1:
		return m.usage("help: want at most one COMMAND, got %d arguments (bridge help COMMAND)", len(args))
	}
	if c := lookupCommand(args[0]); c != nil {
		return c.run(m, ctx, []string{"--help"})
	}
	return m.usage("%s", unknownCommand("help: unknown command", args[0]))
}

// unknownCommand is the one-line error for an unknown command name: the
// nearest command, then every command.
func unknownCommand(prefix, name string) string {
	msg := fmt.Sprintf("%s %q", prefix, name)
	if s := search.Suggest(name, commandNames(), 1); len(s) > 0 {
		msg += fmt.Sprintf("; did you mean %q?", s[0])
	}
	return msg + fmt.Sprintf(" (commands: %s; bridge help)", strings.Join(commandNames(), ", "))
}

func (m *Main) versionCmd(_ context.Context, args []string) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	if _, code, ok := m.parse("version", fs, args, 0); !ok {
		return code
	}
	fmt.Fprintf(m.Stdout, "bridge %s (%s, %s)\n", Version(), commitID(), runtime.Version())
	return 0
}

// parse parses args for the named command with fs and returns the
// positional arguments. Flags may follow positional arguments; "--" ends
// the flags. maxPos is the most positional arguments the command takes
// (-1: any). ok is false when the caller must return code at once: 0 after
// -h/--help printed the command's help, 2 after a usage error printed one
// line naming the fix.
func (m *Main) parse(name string, fs *flag.FlagSet, args []string, maxPos int) (pos []string, code int, ok bool) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			m.commandHelp(name, fs)
			return nil, 0, false
		}
		if err != nil {
			return nil, m.flagError(name, fs, err), false
		}
		rest := fs.Args()
		if len(rest) == 0 {
			break
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			pos = append(pos, rest...) // everything after -- is positional
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if maxPos >= 0 && len(pos) > maxPos {
		hint := fmt.Sprintf("bridge %s --help", name)
		if maxPos == 0 {
			return nil, m.usage("%s: unexpected argument %q: %s takes no arguments (%s)", name, pos[0], name, hint), false
		}
		return nil, m.usage("%s: unexpected argument %q (%s)", name, pos[maxPos], hint), false
	}
	return pos, 0, true
}

// flagError turns the flag package's error into one line that names the
// fix: the nearest flag for a typo, the expected type for a bad value.
func (m *Main) flagError(name string, fs *flag.FlagSet, err error) int {
	hint := fmt.Sprintf("bridge %s --help", name)
	msg := err.Error()
	if bad, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		var names []string
		fs.VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
		// The flag package drops the dashes; words were most likely
		// typed as --word, anything else (such as code: -1) as is.
		typed := "-" + bad
		if len(bad) > 1 && unicode.IsLetter(rune(bad[0])) {
			typed = "--" + bad
		}
		line := fmt.Sprintf("%s: unknown flag %s", name, typed)
		if s := search.Suggest(strings.TrimLeft(bad, "-"), names, 1); len(s) > 0 {
			line += fmt.Sprintf("; did you mean --%s?", s[0])
		} else {
			if len(names) > 0 {
				line += "; flags: --" + strings.Join(names, ", --")
			}
			if name == "exec" {
				line += "; code that starts with '-' goes after --: bridge exec -- CODE"
			}
		}
		return m.usage("%s (%s)", line, hint)
	}
	if flagName, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		return m.usage("%s: --%s needs a value (%s)", name, flagName, hint)
	}
	if rest, ok := strings.CutPrefix(msg, "invalid value "); ok {
		// invalid value "x" for flag -name: reason
		value, after, _ := strings.Cut(rest, " for flag -")
		flagName, _, _ := strings.Cut(after, ":")
		want := "a valid value"
		if f := fs.Lookup(flagName); f != nil {
			if g, ok := f.Value.(flag.Getter); ok {
				switch g.Get().(type) {
				case int, int64, uint, uint64:
					want = "an integer"
				case bool:
					want = "true or false"
				case float64:
					want = "a number"
				}
			}
		}
		return m.usage("%s: invalid value %s for --%s: want %s (%s)", name, value, flagName, want, hint)
	}
	return m.usage("%s: %v (%s)", name, err, hint)
}

// commandHelp prints the usage of one command with every flag.
func (m *Main) commandHelp(name string, fs *flag.FlagSet) {
	w := m.Stdout
	c := lookupCommand(name)
	if c == nil { // a subcommand such as "image build"
		c = &command{name: name}
		if top := lookupCommand(strings.Fields(name)[0]); top != nil {
			c.summary, c.detail = top.summary, top.detail
			c.synopsis = strings.TrimSpace(strings.TrimPrefix(top.synopsis, strings.TrimPrefix(name, top.name+" ")))
		}
	}
	fmt.Fprintf(w, "usage: bridge %s %s\n\n", c.name, c.synopsis)
	if c.summary != "" {
		fmt.Fprintf(w, "%s%s.\n", strings.ToUpper(c.summary[:1]), c.summary[1:])
	}
	if c.detail != "" {
		fmt.Fprintln(w, c.detail)
	}
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	if n == 0 {
		return
	}
	fmt.Fprintf(w, "\nflags:\n")
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		if arg != "" {
			arg = " " + arg
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
			def = fmt.Sprintf(" (default %s)", f.DefValue)
		}
		fmt.Fprintf(w, "  --%s%s\n        %s%s\n", f.Name, arg, usage, def)
	})
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
// and slog (which mcp-go uses) to it (LIF-2). Lines are human-readable when
// stderr is a terminal and JSON otherwise, unless MCP_BRIDGE_LOG_FORMAT
// says which.
func (m *Main) logger(env engine.Env, level zerolog.Level) zerolog.Logger {
	zerolog.TimeFieldFormat = "2006-01-02T15:04:05.000Z07:00"
	var w io.Writer = m.Stderr
	if env.LogFormat == "console" || (env.LogFormat == "auto" && isTerminal(m.Stderr)) {
		w = zerolog.ConsoleWriter{Out: m.Stderr, TimeFormat: "15:04:05.000", NoColor: !isTerminal(m.Stderr)}
	}
	l := zerolog.New(w).Level(level).With().Timestamp().Logger()
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
