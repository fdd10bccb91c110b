package engine

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/bridge-mcp/bridge/actors"
	"github.com/bridge-mcp/bridge/engine/httpd"
	"github.com/bridge-mcp/bridge/engine/store"
	"github.com/bridge-mcp/bridge/protocol/result"
)

type tlsCertificate = tls.Certificate

// loadTokens loads the tokens file, re-read on change by its Run. A file
// others can read is a WARN at each load: anyone who reads it is anyone.
func loadTokens(path string, log zerolog.Logger) (*httpd.Reloaded[httpd.TokenSet], error) {
	load := func() (*httpd.TokenSet, error) {
		set, others, err := httpd.LoadTokens(path)
		if err != nil {
			return nil, err
		}
		if others {
			log.Warn().Str("file", path).Msg("the tokens file is readable by other users; chmod 600 it")
		}
		log.Info().Str("file", path).Int("tokens", set.Len()).Strs("principals", set.Principals()).Msg("tokens loaded")
		return set, nil
	}
	return httpd.NewReloaded("tokens", []string{path}, load, log)
}

// principalStores gives each principal a memory and saved-tool store of
// its own, under <state>/.bridge/principals/<principal>: a principal name
// is [A-Za-z0-9_.-] and never "." or "..", so it is one path element.
func (e *Engine) principalStores() func(string) actors.Store {
	var mu sync.Mutex
	stores := map[string]actors.Store{}
	return func(p string) actors.Store {
		if !httpd.ValidPrincipal(p) {
			return nil
		}
		mu.Lock()
		defer mu.Unlock()
		if s, ok := stores[p]; ok {
			return s
		}
		s := store.New(filepath.Join(e.principalsDir(), p), e.Env.MemoryMaxValue, e.Env.MemoryMaxTotal,
			store.WithMaxKeys(e.Env.MemoryMaxKeys), store.WithListBytes(e.Env.MaxFrameBytes/2))
		stores[p] = s
		return s
	}
}

// httpRun runs one call of bridge serve: validation, the principal's call
// slot (waiting counts against the call's own timeout), the call, then one
// access log line and the metrics. Code and arguments are never logged.
// interrupted is set when the drain timeout has passed: a call that ends
// after it says why it was cut short.
func (e *Engine) httpRun(gate *callGate, m *httpd.Metrics, interrupted *atomic.Bool) func(context.Context, json.RawMessage) result.Result {
	return func(ctx context.Context, raw json.RawMessage) (res result.Result) {
		queued := time.Now()
		principal := actors.PrincipalFrom(ctx)
		args, msg := e.dispatcher.Validate(raw)
		defer func() {
			d := time.Since(queued)
			e.Log.Info().Str("principal", principal).Str("session", res.Session).Dur("duration_ms", d).
				Str("status", res.Status).Msg("call")
			m.Call(principal, res.Status, d)
		}()
		if msg != "" {
			return result.Result{Status: result.StatusValidation, Error: msg, Session: result.DefaultSession}
		}
		m.InFlight(principal, 1)
		defer m.InFlight(principal, -1)
		release, err := gate.acquire(ctx, principal, queued.Add(time.Duration(args.Timeout)*time.Second))
		if err != nil {
			res = result.Result{Status: result.StatusError, Session: args.Session, TimeoutSeconds: args.Timeout, Error: "cancelled"}
			if ctx.Err() == nil {
				res.Status = result.StatusTimeout
				res.Error = fmt.Sprintf("Waited the whole %ds timeout for one of this principal's %d call slots (MCP_BRIDGE_MAX_CALLS_PER_PRINCIPAL)", args.Timeout, gate.max)
			}
			return res
		}
		defer release()
		res = e.dispatcher.RunArgs(ctx, args, queued)
		res.Notes = append(res.Notes, args.Notes...)
		e.limitsNote(actors.SessionKey(principal, res.Session), &res)
		if interrupted.Load() && res.Status != result.StatusSuccess {
			res.Notes = append(res.Notes, "interrupted: the bridge is shutting down (SIGTERM) and its --drain-timeout has passed; run it again")
		}
		return res
	}
}

// readiness is /readyz's answer: the container runtime answered its probe
// and has the sandbox image. It is checked in the background, every few
// seconds until it holds and every readyRecheck after, so /readyz never
// waits on the runtime and a runtime that stops answering (or an image
// removed) takes the replica out of rotation again.
type readiness struct {
	e     *Engine
	up    atomic.Bool
	check func(context.Context) bool
}

// readyRetry and readyRecheck are the check's periods while not ready and
// while ready: a runtime CLI call each, tens of milliseconds.
const (
	readyRetry   = 3 * time.Second
	readyRecheck = 15 * time.Second
)

func newReadiness(e *Engine) *readiness {
	r := &readiness{e: e}
	r.check = r.runtimeReady
	if e.Container == nil {
		r.up.Store(true) // the local test backend has no runtime to wait for
		r.check = nil
	}
	return r
}

func (r *readiness) ok() bool { return r.up.Load() }

// run checks until ctx ends, logging each change of state once.
func (r *readiness) run(ctx context.Context) {
	if r.check == nil {
		return
	}
	for {
		ok := r.check(ctx)
		if ctx.Err() != nil {
			return
		}
		if was := r.up.Swap(ok); was != ok {
			if ok {
				r.e.Log.Info().Msg("ready: the container runtime answers and has the sandbox image")
			} else if was {
				r.e.Log.Warn().Msg("not ready: the container runtime stopped answering or lost the sandbox image; /readyz answers 503 (bridge doctor names the fix)")
			}
		}
		wait := readyRetry
		if ok {
			wait = readyRecheck
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

func (r *readiness) runtimeReady(ctx context.Context) bool {
	l := r.e.Container
	if f := l.Facts(); f.Err != nil {
		return false
	}
	cli, err := l.CLI()
	if err != nil {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	args := append(l.GlobalArgs(), "image", "inspect", "--format", "{{.Id}}", r.e.Env.Image)
	return exec.CommandContext(cctx, cli, args...).Run() == nil
}

// sessionGauges publishes the live sessions per principal every few
// seconds until ctx ends.
func sessionGauges(ctx context.Context, s *actors.Sessions, tokens *httpd.Reloaded[httpd.TokenSet], m *httpd.Metrics) {
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		var principals []string
		if tokens != nil {
			principals = tokens.Get().Principals()
		}
		m.Sessions(s.Counts(), principals)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
