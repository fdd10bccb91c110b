package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/rs/zerolog"
	"github.com/thejerf/suture/v4"

	"github.com/bridge-mcp/bridge/actors"
	"github.com/bridge-mcp/bridge/engine/audit"
	"github.com/bridge-mcp/bridge/engine/config"
	"github.com/bridge-mcp/bridge/engine/container"
	"github.com/bridge-mcp/bridge/engine/httpd"
	"github.com/bridge-mcp/bridge/engine/kube"
	"github.com/bridge-mcp/bridge/engine/local"
	"github.com/bridge-mcp/bridge/engine/oauth"
	"github.com/bridge-mcp/bridge/engine/owner"
	"github.com/bridge-mcp/bridge/engine/render"
	"github.com/bridge-mcp/bridge/engine/snapshot"
	"github.com/bridge-mcp/bridge/engine/store"
	"github.com/bridge-mcp/bridge/entrypoint"
	"github.com/bridge-mcp/bridge/protocol"
	"github.com/bridge-mcp/bridge/protocol/result"
)

// Engine is one bridge process's actors and their configuration.
type Engine struct {
	Env     Env
	Version string
	Log     zerolog.Logger
	// Container is the container backend; nil with the local test backend
	// (MCP_BRIDGE_RUNTIME=local).
	Container *container.Launcher
	launcher  actors.Launcher // the sandbox backend: Container, Kube, or the local one
	// Kube is the kubernetes backend (MCP_BRIDGE_RUNTIME=kubernetes), else nil.
	Kube *kube.Launcher

	router     *actors.Router
	sessions   *actors.Sessions
	sessSup    *suture.Supervisor
	servers    *actors.Servers
	serversSup *suture.Supervisor
	discovery  *actors.Discovery
	dispatcher *actors.Dispatcher
	// audit keeps the audit trail; nil when it is off (or could not be
	// opened: auditErr says why).
	audit    *auditTrail
	auditErr error
	// tokens are bridge serve's bearer tokens (nil before ServeHTTP
	// loads them); red redacts them, and secret-looking values, from
	// what the audit trail and the traces keep.
	tokens atomic.Pointer[httpd.Reloaded[httpd.TokenSet]]
	red    *audit.Redactor
	// traces exports spans; nil when they are off.
	traces *traces
	// sandboxCfg is every session's sandbox config (Replay swaps its
	// router before any session starts).
	sandboxCfg *actors.SandboxConfig
	store      *catalogStore
	children   *childRegistry
	events     chan suture.Event
	getenv     func(string) string
	warned     sync.Map                               // session name → struct{}: sessions whose first result carried the limits warning
	skipped    atomic.Pointer[[]actors.ConfigProblem] // of the last config load
	optsOnce   sync.Once
	opts       config.Options // set once by configOptions
	stamper    config.Stamper
	gate       config.Gate                       // skips the stamper's stats while no covered path changed
	signIn     atomic.Pointer[oauth.Interaction] // how a call signs in to an http server; nil: it cannot (auth.go)
	// caps is the capability set declared to the proxied servers: the
	// MCP client's (Serve), the terminal's (Exec), else none.
	caps *actors.UpstreamCaps
	// snaps is the store of sessions' snapshots (durable.go); nil when
	// durability is off or it could not be opened (snapErr says why).
	snaps   *snapshot.Store
	snapErr error
	// key is MCP_BRIDGE_KEY_FILE, loaded once for snapshots, the audit
	// trail and token files (identity.go); callbacks is
	// serve's sign-in redirect endpoint, nil elsewhere or when no
	// principal can sign in. identityIgnored warns once under bridge run.
	key             *bridgeKey
	callbacks       atomic.Pointer[oauth.Callbacks]
	identityIgnored sync.Once
}

// New builds the engine's actors; nothing starts until Serve or Exec.
// getenv is the bridge's environment, from which children get only the
// variables ENV-1 allows. watch turns on config watching (bridge run --watch).
func New(env Env, version string, log zerolog.Logger, getenv func(string) string, watch bool) *Engine {
	e := &Engine{Env: env, Version: version, Log: log, events: make(chan suture.Event, 256), getenv: getenv, caps: actors.NewUpstreamCaps()}
	launcherLog := log.With().Str("actor", "launcher").Logger()
	switch env.Runtime {
	case "local":
		e.launcher = &local.Launcher{Link: env.Link, Log: launcherLog}
	case RuntimeKubernetes:
		e.Kube = NewKube(env, launcherLog)
		e.launcher = e.Kube
	default:
		e.Container = NewContainer(env, launcherLog)
		e.launcher = e.Container
	}
	e.router = actors.NewRouter()
	e.router.MaxFrame = env.MaxFrameBytes
	e.router.CallTimeout = time.Duration(env.CallTimeout) * time.Second
	e.router.ApprovalTimeout = time.Duration(env.ApprovalTimeout) * time.Second
	e.router.StartTimeout = time.Duration(env.StartTimeout) * time.Second
	e.router.Log = log.With().Str("actor", "router").Logger()
	// A memory_list page takes at most half a frame, leaving room for the
	// reply's envelope and escaping.
	e.router.Store = store.New(env.StateDir, env.MemoryMaxValue, env.MemoryMaxTotal,
		store.WithMaxKeys(env.MemoryMaxKeys), store.WithListBytes(env.MaxFrameBytes/2))
	e.router.Skipped = func() []actors.ConfigProblem {
		if p := e.skipped.Load(); p != nil {
			return *p
		}
		return nil
	}
	e.store = &catalogStore{dir: filepath.Join(env.StateDir, ".bridge", "catalog"), log: log}
	e.children = &childRegistry{dir: filepath.Join(env.StateDir, ".bridge", "children"), owner: owner.Label(), log: log}
	e.serversSup = suture.New("servers", e.spec())
	e.servers = actors.NewServers(e.serversSup, e.clientDeps(), e.router, func(string) suture.Spec { return e.spec() })
	e.serversSup.Add(e.servers)
	policy := filepath.Join(env.ConfigDir, PolicyFile)
	covered := config.StampPaths(e.configOptions())
	covered.Files = append(covered.Files, policy)
	e.discovery = actors.NewDiscovery(actors.DiscoveryConfig{
		Stamp: func() string {
			return e.gate.Stamp(covered, func() string { return e.stamper.Stamp(e.configOptions()) + statStamp(policy) })
		},
		Load:   e.loadConfig,
		Watch:  watch,
		Dir:    env.ConfigDir,
		Extra:  env.ServersConfig,
		Policy: policy,
		Log:    log,
		Paths:  config.WatchPaths(e.configOptions()),
	}, e.servers)
	files := entrypoint.Files()
	files["manual.md"] = ManualWithMounts(entrypoint.Manual, env.Mounts)
	cfg := &actors.SandboxConfig{
		Launcher: e.launcher,
		Router:   e.router,
		Boot: protocol.BootParams{
			Files: files, Main: entrypoint.Main, Version: version,
			Limits: protocol.Limits{MaxFrameBytes: env.MaxFrameBytes, MaxOutputBytes: env.MaxOutputBytes, MaxInFlight: 32,
				MaxImages: env.MaxImages, MaxImageBytes: env.MaxImageBytes},
			RWMounts: rwMounts(env.Mounts),
		},
		MaxFrame:     env.MaxFrameBytes,
		MaxOutput:    env.MaxOutputBytes,
		StartTimeout: time.Duration(env.StartTimeout) * time.Second,
		MemoryLabel:  env.Memory,
		Log:          log,
		Image:        env.Image,
	}
	e.key = &bridgeKey{path: env.KeyFile, log: log}
	if e.snaps, e.snapErr = openSnapshots(env, log, e.key.load); e.snapErr != nil {
		log.Warn().Err(e.snapErr).Msg("durability off")
	} else if e.snaps != nil {
		cfg.Snapshots, cfg.Durability = snapshotStore{e.snaps}, env.Durability
		cfg.Boot.Durability = env.Durability
	}
	if cfg.Boot.Durability == "" {
		cfg.Boot.Durability = actors.DurabilityOff
	}
	e.sandboxCfg = cfg
	e.sessSup = suture.New("sessions", e.spec())
	idle := time.Duration(max(env.IdleTimeout, 0)) * time.Second
	e.sessions = actors.NewSessions(cfg, e.sessSup, env.MaxSessions, idle)
	e.sessSup.Add(e.sessions)
	e.dispatcher = &actors.Dispatcher{
		Sessions:       e.sessions,
		Discovery:      e.discovery,
		Router:         e.router,
		DefaultTimeout: env.Timeout,
		MaxTimeout:     env.MaxTimeout,
		MaxCodeBytes:   env.MaxFrameBytes,
	}
	e.red = audit.NewRedactor(e.isToken)
	var err error
	if e.traces, err = startTraces(env, version, e.red, log); err != nil {
		log.Error().Err(err).Msg("traces off")
	}
	if e.audit, e.auditErr = openAudit(env, log, e.red, e.key.load); e.auditErr != nil {
		log.Error().Err(e.auditErr).Msg("audit trail off")
	} else if e.audit != nil {
		e.dispatcher.Audit = e.audit.begin
		e.router.History = e.audit.history
	}
	return e
}

// isToken reports whether w is one of bridge serve's bearer tokens.
func (e *Engine) isToken(w string) bool {
	t := e.tokens.Load()
	if t == nil {
		return false
	}
	_, ok := t.Get().Lookup(w)
	return ok
}

// clientDeps is a fresh set of the dependencies client actors share; the
// servers manager sets its OnTools.
func (e *Engine) clientDeps() *actors.ClientDeps {
	return &actors.ClientDeps{
		StartTimeout: time.Duration(e.Env.StartTimeout) * time.Second,
		CallTimeout:  time.Duration(e.Env.CallTimeout) * time.Second,
		IdleTimeout:  time.Duration(max(e.Env.ServerIdle, 0)) * time.Second,
		Children:     e.children,
		Store:        actors.CapsStore(e.store, e.caps),
		Log:          e.Log,
		Caps:         e.caps,
		RelayTimeout: time.Duration(e.Env.ApprovalTimeout) * time.Second,
		MaxFrame:     e.Env.MaxFrameBytes,

		MaxIdentityConns: e.Env.MaxIdentityConns,
	}
}

func (e *Engine) configOptions() config.Options {
	// Resolved once: the check before every call (RLD-1) costs its stats only.
	e.optsOnce.Do(func() {
		self, _ := os.Executable()
		if p, err := filepath.EvalSymlinks(self); err == nil {
			self = p
		}
		cwd, _ := os.Getwd()
		// The stdio front's working directory is the client's project, so
		// its project files are read (Project). A front serving other
		// principals (bridge serve) must not read them.
		e.opts = config.Options{Dir: e.Env.ConfigDir, Extra: e.Env.ServersConfig, AllowSelf: e.Env.AllowSelfServer,
			SelfExe: self, LookPath: exec.LookPath, Sources: e.Env.ConfigSources, Home: e.Env.Home, Cwd: cwd,
			Project: !e.Env.Serving, ProjectServers: e.Env.ProjectServers}
	})
	return e.opts
}

// loadConfig reads every config source, logs what was skipped and why, and
// returns the servers in config order.
func (e *Engine) loadConfig() ([]actors.ServerSpec, *actors.Policy) {
	set := config.Load(e.configOptions())
	set.Entries = slices.DeleteFunc(set.Entries, func(en config.Entry) bool {
		why := e.identityProblem(en)
		if why != "" {
			set.Problems = append(set.Problems, config.Problem{File: en.File, Entry: en.Name, Reason: why})
		}
		return why != ""
	})
	skipped := make([]actors.ConfigProblem, 0, len(set.Problems))
	for _, p := range set.Problems {
		e.Log.Warn().Str("file", p.File).Str("entry", p.Entry).Str("reason", p.Reason).Msg("config entry skipped")
		skipped = append(skipped, actors.ConfigProblem{File: p.File, Entry: p.Entry, Reason: p.Reason})
	}
	for _, p := range set.Disabled {
		skipped = append(skipped, actors.ConfigProblem{File: p.File, Entry: p.Entry, Reason: p.Reason, Disabled: true})
	}
	for _, p := range set.Unapproved {
		e.Log.Info().Str("file", p.File).Str("entry", p.Entry).Msg("project server listed but not started: " + p.Reason)
		skipped = append(skipped, actors.ConfigProblem{File: p.File, Entry: p.Entry, Reason: p.Reason, Unapproved: true})
	}
	e.skipped.Store(&skipped)
	for _, p := range set.Self {
		e.Log.Debug().Str("file", p.File).Str("entry", p.Entry).Msg("config entry skipped: it launches this bridge")
	}
	for _, w := range set.Warnings {
		e.Log.Info().Msg(w)
	}
	specs := e.withAuth(set, specsFrom(set, e.getenv))
	live := map[string]bool{}
	for _, s := range specs {
		live[s.Hash] = true
	}
	e.store.Prune(live)
	e.Log.Info().Int("servers", len(specs)).Int("skipped", len(set.Problems)).Strs("files", set.Files).Msg("configuration loaded")
	policy := LoadPolicy(e.Env.ConfigDir)
	if policy != nil && policy.Err != nil {
		e.Log.Error().Err(policy.Err).Str("file", policy.Source).Msg("invalid policy file: every tool call is refused until it is fixed")
	} else if policy != nil {
		e.Log.Info().Str("file", policy.Source).Int("servers", len(policy.Servers)).Int("maxToolCallsPerExecution", policy.MaxCalls).Msg("policy loaded")
	}
	return specs, policy
}

// statStamp fingerprints one file by stat (size, mtime); "" when absent.
func statStamp(path string) string {
	st, err := os.Stat(path)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("|%s:%d:%d", path, st.Size(), st.ModTime().UnixNano())
}

// spec is the suture spec of every supervisor: events go to a bounded queue
// drained by logEvents, so the hook never blocks (SUP-4); the timeout
// exceeds every actor's own stop bound.
func (e *Engine) spec() suture.Spec {
	return suture.Spec{
		EventHook: func(ev suture.Event) {
			select {
			case e.events <- ev:
			default:
			}
		},
		Timeout: 8 * time.Second,
	}
}

func (e *Engine) logEvents(ctx context.Context, wg *sync.WaitGroup) {
	defer wg.Done()
	l := eventLog{log: e.Log.With().Str("actor", "supervisor").Logger()}
	for {
		select {
		case ev := <-e.events:
			l.event(ev)
		case <-ctx.Done():
			return
		}
	}
}

// Render renders a result in the configured output mode.
func (e *Engine) Render(r result.Result) *mcp.CallToolResult {
	return render.Render(e.Env.OutputMode, r)
}

// renderTool renders a run_python result for the MCP front: Render plus the
// limits warning on the first result of each session.
func (e *Engine) renderTool(r result.Result) *mcp.CallToolResult {
	e.limitsNote(r.Session, &r)
	return e.Render(r)
}

// limitsNote adds the one-line limits warning (RT-4) to the first run_python
// result of each session where cgroups cannot enforce the sandbox's limits.
// bridge exec does not add it (its stdout is the cell's output; the warning
// is logged on stderr).
//
// key names the session in the warned set: its name, or with bridge serve
// its (principal, name) key, so each principal's sessions get their own.
func (e *Engine) limitsNote(key string, r *result.Result) {
	if e.Container == nil {
		return
	}
	f, ok := e.Container.LimitsKnown()
	if !ok || r.Session == "" || r.Status == result.StatusValidation {
		return
	}
	w := e.Container.LimitsWarning(f)
	if w == "" {
		return
	}
	if _, seen := e.warned.LoadOrStore(key, struct{}{}); !seen {
		r.Notes = append(r.Notes, w)
	}
}

// root builds the tree; front may be nil (bridge exec).
func (e *Engine) root(front suture.Service) *suture.Supervisor {
	root := suture.New("bridge", e.spec())
	if front != nil {
		root.Add(front)
	}
	root.Add(&e.gate) // holds its event queue for the tree's life
	root.Add(e.discovery)
	root.Add(e.router)
	root.Add(e.serversSup)
	root.Add(e.sessSup)
	if e.Container != nil {
		root.Add(e.Container) // the runtime probe
	}
	if e.Kube != nil {
		root.Add(e.Kube) // its lease, sweep and warm pool
	}
	root.Add(&actors.Reaper{Sessions: e.sessions, SweepAfter: 2 * time.Second,
		Sweep: func(ctx context.Context) {
			e.children.Sweep()
			if e.Container != nil {
				e.Container.Sweep(ctx)
			}
		}})
	return root
}

// frontConfig is the MCP front's tool, resource and dispatcher, for the
// stdio front and the HTTP one.
func (e *Engine) frontConfig(log zerolog.Logger) actors.FrontConfig {
	manual := ManualWithMounts(entrypoint.Manual, e.Env.Mounts)
	return actors.FrontConfig{
		Name: "bridge", Version: e.Version,
		Tool:         Tool(e.Env.Timeout, e.Env.MaxTimeout, e.toolOptions()...),
		Resource:     Resource(ResourceText(manual)),
		ResourceText: ResourceText(manual),
		Dispatcher:   e.dispatcher,
		Render:       e.renderTool,
		Structured:   e.Env.Structured,
		Log:          log,
		// The proxied servers are told what the client can do (relay.go).
		OnInitialize: func(c mcp.ClientCapabilities) { e.caps.Set(actors.CapsOf(c)) },
	}
}

// ErrFrontFailed means the stdio front failed; the process exits 1 (SUP-3).
var ErrFrontFailed = errors.New("front failed")

// Serve runs the MCP stdio server on in/out until stdin ends or ctx is
// cancelled, then stops every actor, container and child.
func (e *Engine) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cfg := e.frontConfig(e.Log.With().Str("actor", "front").Logger())
	cfg.In, cfg.Out, cfg.Done = in, out, cancel
	front := actors.NewFront(cfg)
	e.caps.Expect()
	var wg sync.WaitGroup
	wg.Add(1)
	go e.logEvents(ctx, &wg)
	defer wg.Wait()
	e.Log.Info().Str("version", e.Version).Str("runtime", e.Env.Runtime).Str("image", e.Env.Image).
		Str("configDir", e.Env.ConfigDir).Msg("bridge starting")
	e.MigrateTokens()
	err := e.root(front).Serve(ctx)
	e.traces.shutdown()
	if errors.Is(err, suture.ErrTerminateSupervisorTree) {
		return ErrFrontFailed
	}
	return nil
}

// Exec runs one call through the same actors as Serve (bridge exec). emit
// gets the result before the actors stop, so a caller can print it without
// waiting for container teardown.
func (e *Engine) Exec(ctx context.Context, args actors.Args, emit func(result.Result)) {
	e.execCaps(ctx)
	queued := time.Now()
	e.MigrateTokens()
	e.sessions.SingleUse = true // one call: a replacement spare would only be stopped again
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go e.logEvents(ctx, &wg)
	go func() {
		defer wg.Done()
		if err := e.root(nil).Serve(ctx); err != nil && !errors.Is(err, context.Canceled) {
			e.Log.Error().Err(err).Msg("actors stopped")
		}
	}()
	sctx, span := actors.RunSpan(ctx, ToolName, nil)
	res := e.dispatcher.RunArgs(sctx, args, queued)
	var raw json.RawMessage // the arguments, for MCP_BRIDGE_TRACE_VALUES
	if span.IsRecording() {
		raw, _ = json.Marshal(map[string]any{"code": args.Code, "servers": args.Servers, "timeout": args.Timeout, "session": args.Session})
	}
	actors.EndRunSpan(sctx, span, raw, res)
	res.Notes = append(res.Notes, args.Notes...)
	emit(res)
	cancel()
	wg.Wait()
	e.traces.shutdown()
}

// Validate checks raw run_python arguments as the front does.
func (e *Engine) Validate(raw []byte) (actors.Args, string) {
	return e.dispatcher.Validate(raw)
}

// execCaps declares to the proxied servers what the human of an exec call
// can answer (its terminal, when it has one).
func (e *Engine) execCaps(ctx context.Context) {
	if h := actors.HumanFrom(ctx); h != nil {
		e.caps.Set(h.Caps())
	}
}
