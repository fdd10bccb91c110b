package engine

import (
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/engine/config"
	"github.com/bridge-mcp/bridge/engine/container"
	"github.com/bridge-mcp/bridge/engine/owner"
)

// DefaultImage is the sandbox image that `bridge image build` produces.
const DefaultImage = container.DefaultImage

// Env is the bridge's configuration from MCP_BRIDGE_* variables. It is parsed
// once at startup by LoadEnv and never changes afterwards.
type Env struct {
	Runtime         string // MCP_BRIDGE_RUNTIME: CLI name or path; "" means podman, then docker
	Image           string
	Timeout         int // default run_python timeout, seconds
	MaxTimeout      int
	Memory          string // as given, lower-cased, e.g. "512m"
	MemoryBytes     int64
	Pids            int
	CPUs            string // "" when unset
	ContainerUser   string
	IdleTimeout     int // seconds; <= 0 disables the session idle end
	ServerIdle      int // seconds; <= 0 keeps idle servers running
	AllowSelfServer bool
	StateDir        string
	OutputMode      string // compact, toon or json
	LogLevel        zerolog.Level
	LogFormat       string // auto (console on a terminal, else JSON), console or json
	ServersConfig   string // MCP_SERVERS_CONFIG, "" when unset
	ConfigDir       string
	OCIRuntime      string
	MaxOutputBytes  int
	MaxFrameBytes   int
	CallTimeout     int
	// ApprovalTimeout bounds the wait for a human's approval of a gated
	// tool call, in seconds (MCP_BRIDGE_APPROVAL_TIMEOUT).
	ApprovalTimeout int
	StartTimeout    int
	MaxSessions     int
	UnsafeLocal     bool
	MaxImages       int               // images attached per call; the rest are saved under /workspace
	MaxImageBytes   int               // bytes per attached image
	Mounts          []container.Mount // MCP_BRIDGE_MOUNTS, validated; nil when unset

	// MemoryMaxValue, MemoryMaxTotal and MemoryMaxKeys cap the persistent
	// memory store: one value (with its metadata) in JSON bytes, all of
	// them in whole 4 KiB blocks per key, and the number of keys.
	MemoryMaxValue int
	MemoryMaxTotal int
	MemoryMaxKeys  int
	// ConfigSources are the enabled config sources (config.AllSources
	// order), from MCP_BRIDGE_CONFIG_SOURCES; Home locates their files.
	ConfigSources []string
	Home          string
	// ProjectServers is MCP_BRIDGE_PROJECT_SERVERS: which servers of the
	// project's config files start (config.ProjectApproved, ProjectAll or
	// ProjectNone).
	ProjectServers string
	// Structured is MCP_BRIDGE_STRUCTURED: auto, always or never.
	Structured string
	// AlwaysLoad is MCP_BRIDGE_ALWAYS_LOAD: the tool carries
	// _meta["anthropic/alwaysLoad"] so Claude Code does not defer it.
	AlwaysLoad bool
	// ToolInventory is MCP_BRIDGE_TOOL_INVENTORY: "" (off) or "names".
	ToolInventory string
	// Seccomp is MCP_BRIDGE_SECCOMP: "" (built-in profile), "runtime", or a profile path.
	Seccomp string
	// Link is MCP_BRIDGE_LINK: "auto" (a socket handed to the container
	// where the runtime can pass one, else its stdio) or "stdio".
	Link string
	// Kube is MCP_BRIDGE_K8S_* (env_kube.go).
	Kube KubeEnv
	// TokensFile, MaxSessionsPerPrincipal and MaxCallsPerPrincipal are
	// bridge serve's: its tokens file ("" when unset), and each
	// principal's caps on live sessions and on calls running or queued.
	TokensFile              string
	MaxSessionsPerPrincipal int
	MaxCallsPerPrincipal    int
	// MaxConnsPerAddr caps bridge serve's open connections from one
	// remote address; 0 is no cap.
	MaxConnsPerAddr int
	// MaxIdentityConns caps the live (server, principal) connections of
	// one "identity": "principal" server under bridge serve.
	MaxIdentityConns int
	// Durability is MCP_BRIDGE_SESSION_DURABILITY (cell, exit or off):
	// when sessions' snapshots are taken. SnapshotMax and SnapshotTotal
	// cap one session's snapshot and all of them, in bytes;
	// SnapshotRetention drops one unused for that long (0: never).
	Durability        string
	SnapshotMax       int64
	SnapshotTotal     int64
	SnapshotRetention time.Duration
	// KeyFile is MCP_BRIDGE_KEY_FILE: the key that signs what the bridge
	// stores for itself (snapshots), kept apart from the state directory.
	KeyFile string
	// Audit is MCP_BRIDGE_AUDIT: "on", "off", or "" (on under bridge
	// serve, off otherwise). AuditCode is MCP_BRIDGE_AUDIT_CODE (full or
	// hash), AuditMaxFile MCP_BRIDGE_AUDIT_MAX_FILE_BYTES and
	// AuditRetention MCP_BRIDGE_AUDIT_RETENTION (0: kept forever).
	Audit          string
	AuditCode      string
	AuditMaxFile   int64
	AuditRetention time.Duration
	// Traces is whether spans are exported over OTLP/HTTP, from the
	// OTEL_* variables the SDK itself does not read (readTraces); the
	// exporter reads its endpoint, headers and timeout itself.
	// TraceValues is MCP_BRIDGE_TRACE_VALUES: code, arguments and results
	// go into span attributes, redacted.
	Traces      bool
	TraceValues bool
	// TraceProtocol is the OTLP protocol of the export: http/protobuf
	// (the default) or grpc.
	TraceProtocol string
	// Serving is set by bridge serve (no variable): the working
	// directory's project config files are not the callers', so they are
	// not read.
	Serving bool
}

// EnvVars lists every variable LoadEnv reads, in README table order.
var EnvVars = []string{
	"MCP_BRIDGE_RUNTIME", "MCP_BRIDGE_IMAGE", "MCP_BRIDGE_TIMEOUT", "MCP_BRIDGE_MAX_TIMEOUT",
	"MCP_BRIDGE_MEMORY", "MCP_BRIDGE_PIDS", "MCP_BRIDGE_CPUS", "MCP_BRIDGE_CONTAINER_USER",
	"MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT", "MCP_BRIDGE_ALLOW_SELF_SERVER", "MCP_BRIDGE_STATE_DIR",
	"MCP_BRIDGE_OUTPUT_MODE", "MCP_BRIDGE_LOG_LEVEL", "MCP_SERVERS_CONFIG", "MCP_BRIDGE_CONFIG_DIR",
	"MCP_BRIDGE_OCI_RUNTIME", "MCP_BRIDGE_MAX_OUTPUT_BYTES", "MCP_BRIDGE_MAX_FRAME_BYTES",
	"MCP_BRIDGE_CALL_TIMEOUT", "MCP_BRIDGE_APPROVAL_TIMEOUT", "MCP_BRIDGE_START_TIMEOUT", "MCP_BRIDGE_MAX_SESSIONS",
	"MCP_BRIDGE_UNSAFE_LOCAL", "MCP_BRIDGE_SERVER_IDLE_TIMEOUT",
	"MCP_BRIDGE_MAX_IMAGES", "MCP_BRIDGE_MAX_IMAGE_BYTES", "MCP_BRIDGE_MOUNTS",
	"MCP_BRIDGE_MEMORY_MAX_VALUE_BYTES", "MCP_BRIDGE_MEMORY_MAX_TOTAL_BYTES", "MCP_BRIDGE_MEMORY_MAX_KEYS", "MCP_BRIDGE_CONFIG_SOURCES",
	"MCP_BRIDGE_PROJECT_SERVERS",
	"MCP_BRIDGE_STRUCTURED", "MCP_BRIDGE_ALWAYS_LOAD", "MCP_BRIDGE_TOOL_INVENTORY", "MCP_BRIDGE_SECCOMP",
	"MCP_BRIDGE_LOG_FORMAT", "MCP_BRIDGE_LINK",
	"MCP_BRIDGE_K8S_NAMESPACE", "MCP_BRIDGE_K8S_PULL_POLICY", "MCP_BRIDGE_K8S_WARM_POOL", "MCP_BRIDGE_K8S_RUNTIME_CLASS",
	"MCP_BRIDGE_K8S_NODE_NAME", "MCP_BRIDGE_K8S_SECCOMP_PROFILE",
	"MCP_BRIDGE_TOKENS_FILE", "MCP_BRIDGE_MAX_SESSIONS_PER_PRINCIPAL", "MCP_BRIDGE_MAX_CALLS_PER_PRINCIPAL", "MCP_BRIDGE_MAX_IDENTITY_CONNS",
	"MCP_BRIDGE_MAX_CONNS_PER_ADDR",
	"MCP_BRIDGE_SESSION_DURABILITY", "MCP_BRIDGE_SNAPSHOT_MAX", "MCP_BRIDGE_SNAPSHOT_TOTAL", "MCP_BRIDGE_SNAPSHOT_RETENTION",
	"MCP_BRIDGE_KEY_FILE",
	"MCP_BRIDGE_AUDIT", "MCP_BRIDGE_AUDIT_CODE", "MCP_BRIDGE_AUDIT_MAX_FILE_BYTES", "MCP_BRIDGE_AUDIT_RETENTION",
	"MCP_BRIDGE_TRACE_VALUES",
}

// TraceVars are the OpenTelemetry variables the bridge itself reads to
// decide whether spans are exported, and how (README "Traces"); the SDK
// reads the rest of OTEL_*.
var TraceVars = []string{
	"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
}

var (
	memoryRe = regexp.MustCompile(`^([0-9]+)([bkmg]?)$`)
	userRe   = regexp.MustCompile(`^[A-Za-z0-9_.][A-Za-z0-9_.-]*(:[A-Za-z0-9_.][A-Za-z0-9_.-]*)?$`)
	cpusRe   = regexp.MustCompile(`^[0-9]*\.?[0-9]+$`)
)

// envError is the one-line message for an invalid variable (CLI-1).
func envError(name, value, want string) error {
	return fmt.Errorf("invalid %s=%q: want %s", name, value, want)
}

// envReader reads trimmed variables and keeps the first error, so LoadEnv can
// parse every field in sequence and report the first invalid one.
type envReader struct {
	getenv func(string) string
	err    error
}

func (r *envReader) str(name string) string { return strings.TrimSpace(r.getenv(name)) }

func (r *envReader) fail(name, want string) {
	if r.err == nil {
		r.err = envError(name, r.getenv(name), want)
	}
}

// intRange parses an integer in [lo, hi], def when unset.
func (r *envReader) intRange(name string, def, lo, hi int) int {
	s := r.str(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		r.fail(name, fmt.Sprintf("an integer from %d to %d", lo, hi))
		return def
	}
	return n
}

func (r *envReader) boolean(name string) bool {
	switch strings.ToLower(r.str(name)) {
	case "", "0", "false", "no", "off":
		return false
	case "1", "true", "yes", "on":
		return true
	}
	r.fail(name, "a boolean (1/true/yes/on or 0/false/no/off)")
	return false
}

// noDash rejects values that would be read as a flag if they reached argv (CTR-2).
// choice reads an enumerated var, case-insensitively: "" gives def, and a
// value outside valid fails with want as the hint.
func (r *envReader) choice(name, def, want string, valid ...string) string {
	v := strings.ToLower(r.str(name))
	if v == "" {
		return def
	}
	if !slices.Contains(valid, v) {
		r.fail(name, want)
	}
	return v
}

func (r *envReader) noDash(name, s string) string {
	if strings.HasPrefix(s, "-") {
		r.fail(name, "a value that does not start with '-'")
	}
	return s
}

// LoadEnv parses the MCP_BRIDGE_* variables. home is the user's home
// directory, used for the ~/MCPs defaults. The error is one line naming the
// variable, its value and what is accepted.
func LoadEnv(getenv func(string) string, home string) (Env, error) {
	r := &envReader{getenv: getenv}
	e := Env{Home: home}
	e.Runtime = r.noDash("MCP_BRIDGE_RUNTIME", r.str("MCP_BRIDGE_RUNTIME"))
	e.Image = r.noDash("MCP_BRIDGE_IMAGE", r.str("MCP_BRIDGE_IMAGE"))
	if e.Image == "" {
		e.Image = DefaultImage
	}
	e.MaxTimeout = r.intRange("MCP_BRIDGE_MAX_TIMEOUT", 120, 1, 86400)
	e.Timeout = r.intRange("MCP_BRIDGE_TIMEOUT", min(30, e.MaxTimeout), 1, e.MaxTimeout)

	e.Memory = strings.ToLower(r.str("MCP_BRIDGE_MEMORY"))
	if e.Memory == "" {
		e.Memory = "512m"
	}
	if b, ok := parseMemory(e.Memory); ok && b >= 32<<20 {
		e.MemoryBytes = b
	} else {
		r.fail("MCP_BRIDGE_MEMORY", "a size like 512m (digits with optional b/k/m/g), at least 32m")
	}
	e.Pids = r.intRange("MCP_BRIDGE_PIDS", 128, 8, math.MaxInt32)
	if e.CPUs = r.str("MCP_BRIDGE_CPUS"); e.CPUs != "" {
		if f, err := strconv.ParseFloat(e.CPUs, 64); !cpusRe.MatchString(e.CPUs) || err != nil || f <= 0 {
			r.fail("MCP_BRIDGE_CPUS", "a decimal number above 0")
		}
	}
	if e.ContainerUser = r.str("MCP_BRIDGE_CONTAINER_USER"); e.ContainerUser == "" {
		e.ContainerUser = "65534:65534"
	} else if !userRe.MatchString(e.ContainerUser) {
		r.fail("MCP_BRIDGE_CONTAINER_USER", "user[:group] without a leading '-'")
	}
	e.IdleTimeout = r.intRange("MCP_BRIDGE_RUNTIME_IDLE_TIMEOUT", 300, math.MinInt32, math.MaxInt32)
	e.ServerIdle = r.intRange("MCP_BRIDGE_SERVER_IDLE_TIMEOUT", 600, math.MinInt32, math.MaxInt32)
	e.AllowSelfServer = r.boolean("MCP_BRIDGE_ALLOW_SELF_SERVER")

	defDir := filepath.Join(home, "MCPs")
	if e.StateDir = r.str("MCP_BRIDGE_STATE_DIR"); e.StateDir == "" {
		e.StateDir = defDir
	}
	if e.ConfigDir = r.str("MCP_BRIDGE_CONFIG_DIR"); e.ConfigDir == "" {
		e.ConfigDir = defDir
	}
	e.ServersConfig = r.str("MCP_SERVERS_CONFIG")

	e.OutputMode = r.choice("MCP_BRIDGE_OUTPUT_MODE", "compact", "compact, toon or json", "compact", "toon", "json")
	e.LogLevel = zerolog.InfoLevel
	if lvl := r.str("MCP_BRIDGE_LOG_LEVEL"); lvl != "" {
		l, ok := parseLogLevel(lvl)
		if !ok {
			r.fail("MCP_BRIDGE_LOG_LEVEL", "one of trace, debug, info, warn, warning, error, critical")
		}
		e.LogLevel = l
	}
	e.LogFormat = r.choice("MCP_BRIDGE_LOG_FORMAT", "auto", "auto, console or json", "auto", "console", "json")
	e.OCIRuntime = r.noDash("MCP_BRIDGE_OCI_RUNTIME", r.str("MCP_BRIDGE_OCI_RUNTIME"))
	e.MaxFrameBytes = r.intRange("MCP_BRIDGE_MAX_FRAME_BYTES", 16<<20, 1<<20, math.MaxInt32)
	e.MaxOutputBytes = r.intRange("MCP_BRIDGE_MAX_OUTPUT_BYTES", 32768, 1024, e.MaxFrameBytes)
	e.CallTimeout = r.intRange("MCP_BRIDGE_CALL_TIMEOUT", 60, 1, 86400)
	e.ApprovalTimeout = r.intRange("MCP_BRIDGE_APPROVAL_TIMEOUT", 120, 1, 86400)
	e.StartTimeout = r.intRange("MCP_BRIDGE_START_TIMEOUT", 30, 1, 600)
	e.MaxSessions = r.intRange("MCP_BRIDGE_MAX_SESSIONS", 8, 1, 512)
	e.TokensFile = r.str("MCP_BRIDGE_TOKENS_FILE")
	e.MaxSessionsPerPrincipal = r.intRange("MCP_BRIDGE_MAX_SESSIONS_PER_PRINCIPAL", 8, 1, 512)
	e.MaxIdentityConns = r.intRange("MCP_BRIDGE_MAX_IDENTITY_CONNS", 64, 1, 4096)
	e.MaxCallsPerPrincipal = r.intRange("MCP_BRIDGE_MAX_CALLS_PER_PRINCIPAL", 4, 1, 512)
	e.MaxConnsPerAddr = r.intRange("MCP_BRIDGE_MAX_CONNS_PER_ADDR", 64, 0, 65536)
	e.UnsafeLocal = r.boolean("MCP_BRIDGE_UNSAFE_LOCAL")
	// Figures and display(): an image travels base64 in one frame.
	maxImage := (e.MaxFrameBytes - 64<<10) / 4 * 3
	e.MaxImages = r.intRange("MCP_BRIDGE_MAX_IMAGES", 10, 0, 100)
	e.MaxImageBytes = r.intRange("MCP_BRIDGE_MAX_IMAGE_BYTES", min(1<<20, maxImage), 1024, maxImage)
	if mounts, err := container.ParseMounts(r.str("MCP_BRIDGE_MOUNTS"), e.StateDir, e.ConfigDir); err != nil {
		r.fail("MCP_BRIDGE_MOUNTS", err.Error())
	} else {
		e.Mounts = mounts
	}
	e.MemoryMaxValue = r.intRange("MCP_BRIDGE_MEMORY_MAX_VALUE_BYTES", 1<<20, 1024, 1<<28)
	if srcs, err := config.ParseSources(r.str("MCP_BRIDGE_CONFIG_SOURCES")); err != nil {
		r.fail("MCP_BRIDGE_CONFIG_SOURCES", "all, or a comma list of "+strings.Join(config.AllSources, ", "))
	} else {
		e.ConfigSources = srcs
	}
	if mode, err := config.ParseProjectServers(r.str("MCP_BRIDGE_PROJECT_SERVERS")); err != nil {
		r.fail("MCP_BRIDGE_PROJECT_SERVERS", "approved, all or none")
	} else {
		e.ProjectServers = mode
	}
	e.MemoryMaxTotal = r.intRange("MCP_BRIDGE_MEMORY_MAX_TOTAL_BYTES", 64<<20, e.MemoryMaxValue, math.MaxInt32)
	e.MemoryMaxKeys = r.intRange("MCP_BRIDGE_MEMORY_MAX_KEYS", 10_000, 1, 1_000_000)
	e.Structured = r.choice("MCP_BRIDGE_STRUCTURED", "auto", "auto, always or never", "auto", "always", "never")
	e.Link = r.choice("MCP_BRIDGE_LINK", "auto", "auto or stdio", "auto", "stdio")
	e.AlwaysLoad = r.str("MCP_BRIDGE_ALWAYS_LOAD") == "" || r.boolean("MCP_BRIDGE_ALWAYS_LOAD")
	switch e.ToolInventory = strings.ToLower(r.str("MCP_BRIDGE_TOOL_INVENTORY")); e.ToolInventory {
	case "", "names":
	case "off", "none":
		e.ToolInventory = ""
	default:
		r.fail("MCP_BRIDGE_TOOL_INVENTORY", "names, or off")
	}
	if e.Seccomp = r.str("MCP_BRIDGE_SECCOMP"); e.Seccomp != "" && e.Seccomp != "runtime" && !filepath.IsAbs(e.Seccomp) {
		r.fail("MCP_BRIDGE_SECCOMP", "'runtime' or the absolute path of a seccomp profile (JSON)")
	}
	r.readDurability(&e)
	r.readAudit(&e)
	r.readTraces(&e)
	r.readKube(&e)
	if r.err == nil && e.Runtime == "local" && !e.UnsafeLocal {
		r.err = envError("MCP_BRIDGE_RUNTIME", e.Runtime, "a container CLI; 'local' needs MCP_BRIDGE_UNSAFE_LOCAL=1 (tests only, no isolation)")
	}
	if r.err != nil {
		return Env{}, r.err
	}
	return e, nil
}

// parseMemory converts "512m" style sizes to bytes.
func parseMemory(s string) (int64, bool) {
	m := memoryRe.FindStringSubmatch(s)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(m[1], 10, 64)
	if err != nil {
		return 0, false
	}
	shift := map[string]uint{"": 0, "b": 0, "k": 10, "m": 20, "g": 30}[m[2]]
	if n > math.MaxInt64>>shift {
		return 0, false
	}
	return n << shift, true
}

func parseLogLevel(s string) (zerolog.Level, bool) {
	switch strings.ToLower(s) {
	case "trace":
		return zerolog.TraceLevel, true
	case "debug":
		return zerolog.DebugLevel, true
	case "info":
		return zerolog.InfoLevel, true
	case "warn", "warning":
		return zerolog.WarnLevel, true
	case "error":
		return zerolog.ErrorLevel, true
	case "critical":
		return zerolog.FatalLevel, true
	}
	return zerolog.NoLevel, false
}

// ContainerConfig is what the container backend reads of env.
func (env Env) ContainerConfig() container.Config {
	return container.Config{
		Runtime: env.Runtime, OCIRuntime: env.OCIRuntime, Image: env.Image, ContainerUser: env.ContainerUser,
		Memory: env.Memory, MemoryBytes: env.MemoryBytes, Pids: env.Pids, CPUs: env.CPUs, Mounts: env.Mounts,
		Seccomp: env.Seccomp, StateDir: env.StateDir, Link: env.Link, Owner: owner.Label(),
	}
}

// NewContainer returns the container backend for env (bridge image build
// and bench use it without the actors).
func NewContainer(env Env, log zerolog.Logger) *container.Launcher {
	return container.New(env.ContainerConfig(), log)
}

// readDurability reads the variables of sessions that survive.
func (r *envReader) readDurability(e *Env) {
	e.Durability = r.choice("MCP_BRIDGE_SESSION_DURABILITY", "cell", "cell, exit or off", "cell", "exit", "off")
	e.SnapshotMax = r.size("MCP_BRIDGE_SNAPSHOT_MAX", 1<<30, 1<<20)
	e.SnapshotTotal = r.size("MCP_BRIDGE_SNAPSHOT_TOTAL", 8<<30, max(e.SnapshotMax, 1<<20))
	e.SnapshotRetention = r.retention("MCP_BRIDGE_SNAPSHOT_RETENTION", 7*24*time.Hour,
		"a duration like 7d, 36h or 90m (0 keeps snapshots until a cap drops them)")
	if e.KeyFile = r.str("MCP_BRIDGE_KEY_FILE"); e.KeyFile == "" {
		e.KeyFile = defaultKeyFile(e.Home, r.str("XDG_CONFIG_HOME"))
	} else if !filepath.IsAbs(e.KeyFile) {
		r.fail("MCP_BRIDGE_KEY_FILE", "an absolute path")
	}
}

// readAudit reads the variables of the audit trail.
func (r *envReader) readAudit(e *Env) {
	if s := strings.ToLower(r.str("MCP_BRIDGE_AUDIT")); s != "" {
		e.Audit = r.choice("MCP_BRIDGE_AUDIT", "", "on or off", "on", "off")
	}
	e.AuditCode = r.choice("MCP_BRIDGE_AUDIT_CODE", "full", "full or hash", "full", "hash")
	e.AuditMaxFile = r.size("MCP_BRIDGE_AUDIT_MAX_FILE_BYTES", 64<<20, 64<<10)
	e.AuditRetention = r.retention("MCP_BRIDGE_AUDIT_RETENTION", 90*24*time.Hour, "a duration like 90d or 720h (0 keeps every file)")
}

// readTraces reads whether spans are exported, as the OpenTelemetry
// environment specification has it: OTEL_TRACES_EXPORTER=otlp, or an OTLP
// endpoint, turns traces on; OTEL_TRACES_EXPORTER=none or
// OTEL_SDK_DISABLED=true turns them off. OTLP over HTTP with protobuf, and
// over gRPC, are built in (docs/DECISIONS.md): another exporter or protocol
// is refused here, in one line, rather than silently sending nothing.
func (r *envReader) readTraces(e *Env) {
	e.TraceValues = r.boolean("MCP_BRIDGE_TRACE_VALUES")
	if strings.EqualFold(r.str("OTEL_SDK_DISABLED"), "true") {
		return
	}
	on := r.str("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || r.str("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	if s := strings.ToLower(r.str("OTEL_TRACES_EXPORTER")); s != "" {
		on = false
		for _, x := range strings.Split(s, ",") {
			switch strings.TrimSpace(x) {
			case "otlp":
				on = true
			case "none":
				return
			default:
				r.fail("OTEL_TRACES_EXPORTER", "otlp or none (the bridge exports OTLP only)")
				return
			}
		}
	}
	if !on {
		return
	}
	e.TraceProtocol = "http/protobuf"
	for _, name := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if s := strings.ToLower(r.str(name)); s != "" {
			e.TraceProtocol = r.choice(name, "", "http/protobuf or grpc (http/json is not built in)", "http/protobuf", "grpc")
			break // the traces-specific variable wins
		}
	}
	e.Traces = true
}

// retention reads a retention period (parseRetention); def when unset.
func (r *envReader) retention(name string, def time.Duration, want string) time.Duration {
	s := strings.ToLower(r.str(name))
	if s == "" {
		return def
	}
	d, ok := parseRetention(s)
	if !ok {
		r.fail(name, want)
		return def
	}
	return d
}

// size parses a byte size like 1g or 512m (digits with optional b/k/m/g),
// at least lo; def when unset.
func (r *envReader) size(name string, def, lo int64) int64 {
	s := strings.ToLower(r.str(name))
	if s == "" {
		return def
	}
	b, ok := parseMemory(s)
	if !ok || b < lo {
		r.fail(name, fmt.Sprintf("a size like 1g or 512m (digits with optional b/k/m/g), at least %s", sizeText(lo)))
		return def
	}
	return b
}

// sizeText writes n bytes in the units size accepts.
func sizeText(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dg", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dm", n>>20)
	}
	return strconv.FormatInt(n, 10)
}

// parseRetention parses "7d" (days) or a Go duration of at least a minute;
// "0" is no retention limit.
func parseRetention(s string) (time.Duration, bool) {
	if s == "0" {
		return 0, true
	}
	d, ok := ParseAge(s)
	return d, ok && d >= time.Minute
}

// ParseAge reads an age written as whole days (90d, at most 100 years) or
// a Go duration (36h, 90m), not negative: the retention variables and
// bridge audit show --since.
func ParseAge(s string) (time.Duration, bool) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 36500 || strconv.Itoa(n) != days {
			return 0, false
		}
		return time.Duration(n) * 24 * time.Hour, true
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, false
	}
	return d, true
}

// defaultKeyFile is the key's place apart from the state directory:
// $XDG_CONFIG_HOME/bridge/key, else ~/.config/bridge/key.
func defaultKeyFile(home, xdg string) string {
	if x := xdg; filepath.IsAbs(x) {
		return filepath.Join(x, "bridge", "key")
	}
	return filepath.Join(home, ".config", "bridge", "key")
}
