package actors

// clientloop.go is the client actor's event loop: Serve, one named step per
// event, and the goroutines (start, watch, refresh) that report to it.

import (
	"context"
	"fmt"
	"time"
)

// clientEvent is what the goroutines of one Serve run report to it.
type clientEvent interface{ clientEvent() }

// The client's events.
type (
	// started: a start succeeded with the server's tools.
	started struct {
		conn  *serverConn
		tools []ToolInfo
	}
	// startFailed: a start failed.
	startFailed struct{ err error }
	// exited: a connection ended (the process died or the link was lost).
	exited struct{ conn *serverConn }
	// listChanged: the server sent notifications/tools/list_changed.
	listChanged struct{}
	// toolsRefreshed: the tools/list that list_changed asked for.
	toolsRefreshed struct {
		conn  *serverConn
		tools []ToolInfo
	}
)

func (started) clientEvent()        {}
func (startFailed) clientEvent()    {}
func (exited) clientEvent()         {}
func (listChanged) clientEvent()    {}
func (toolsRefreshed) clientEvent() {}

// reset clears the state one Serve run leaves behind.
func (c *Client) reset() {
	c.conn, c.starting, c.waiters, c.eager = nil, false, nil, false
	c.restart, c.refresh = stopTimer(c.restart), stopTimer(c.refresh)
}

// Serve runs the actor until ctx ends, then stops the server. suture calls
// it again after a panic: every run starts from no connection and no
// waiters, and answers each waiter it took exactly once.
func (c *Client) Serve(ctx context.Context) error {
	c.reset()
	// run ends the run's goroutines (starts, watches, refreshes).
	run, cancelRun := context.WithCancel(ctx)
	defer c.stop(ctx, cancelRun)
	c.loadCatalog(ctx)
	idle, stopIdle := c.idleTicker()
	defer stopIdle()
	for {
		select {
		case <-idle:
			c.reapIdle()
		case w := <-c.uses:
			c.onUse(run, w)
		case <-c.kicks:
			c.onKick(run)
		case <-timerC(c.restart):
			c.onRestart(run)
		case ev := <-c.events:
			c.onEvent(ev)
		case <-timerC(c.refresh):
			c.onRefresh(run)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// stop ends a run: it stops the server and the run's goroutines, answers
// the waiters it took, and after a stop (not a panic) closes stopped once
// the process this client waited for is gone too.
func (c *Client) stop(ctx context.Context, cancelRun context.CancelFunc) {
	cancelRun()
	if c.conn != nil {
		c.conn.close()
	}
	c.wg.Wait()
	c.dropEvents()
	why := fmt.Errorf("Server '%s' was removed from the configuration", c.spec.Name)
	if ctx.Err() == nil { // a panic, not a stop
		why = fmt.Errorf("Server '%s' was restarted after an internal error; retry the call", c.spec.Name)
	}
	for _, w := range c.waiters {
		w.answer(useReply{err: why})
	}
	c.reset()
	if ctx.Err() != nil {
		// A successor must also wait for the process this one waited
		// for (removed again before its predecessor died).
		if c.after != nil {
			waitClosed(c.after, 10*time.Second)
		}
		c.stopOnce.Do(func() { close(c.stopped) })
	}
}

// loadCatalog takes the tools from the disk catalog; without one it starts
// the server in the background now, so the first search finds the tools
// instead of waiting for them.
func (c *Client) loadCatalog(ctx context.Context) {
	if cat, ok := c.deps.Store.Load(c.spec.Hash); ok {
		c.tools = cat.Tools
		c.remember(cat)
	} else if ctx.Err() == nil {
		c.Kick()
	}
}

// idleTicker ticks the idle check; nil (never) without an idle timeout.
func (c *Client) idleTicker() (<-chan time.Time, func()) {
	if c.deps.IdleTimeout <= 0 {
		return nil, func() {}
	}
	t := time.NewTicker(max(c.deps.IdleTimeout/4, 50*time.Millisecond))
	return t.C, t.Stop
}

// reapIdle stops a server unused for the idle timeout; one in the middle of
// a call is never stopped.
func (c *Client) reapIdle() {
	if c.conn == nil || c.conn.inflight.Load() != 0 || time.Since(c.lastUse) <= c.deps.IdleTimeout {
		return
	}
	c.log.Info().Dur("idle_ms", time.Since(c.lastUse).Round(time.Second)).Msg("server idle; stopping it")
	conn := c.conn
	c.conn = nil
	c.eager = false
	conn.close()
	c.publish()
}

// onUse answers a use with the live connection, or queues it behind a start.
func (c *Client) onUse(run context.Context, w request[struct{}, useReply]) {
	c.lastUse = time.Now()
	if c.conn != nil {
		w.answer(useReply{conn: c.conn, tools: c.tools})
		return
	}
	c.waiters = append(c.waiters, w)
	if c.failures >= parkAfter {
		c.nextStart = time.Time{} // parked: a use makes one fresh attempt
	}
	c.maybeStart(run)
	if c.conn == nil && !c.starting && c.restart == nil {
		c.armRestart()
	}
}

// onKick starts the server in the background unless it runs, is starting
// or is parked.
func (c *Client) onKick(run context.Context) {
	if c.conn != nil || c.starting || c.failures >= parkAfter {
		return
	}
	c.lastUse = time.Now() // a kicked server is not idle yet
	c.eager = true
	c.maybeStart(run)
	if !c.starting && c.restart == nil {
		c.armRestart()
	}
}

// onRestart starts the server once its backoff has passed.
func (c *Client) onRestart(run context.Context) {
	c.restart = nil
	c.maybeStart(run)
}

// onEvent applies what one of the run's goroutines reported.
func (c *Client) onEvent(ev clientEvent) {
	switch ev := ev.(type) {
	case started:
		c.onStarted(ev)
	case startFailed:
		c.onStartFailed(ev)
	case exited:
		c.onExited(ev)
	case listChanged:
		if c.refresh == nil {
			c.refresh = time.NewTimer(listChangedGap)
		}
	case toolsRefreshed:
		if ev.conn == c.conn {
			c.logSkipped(c.tools, ev.tools)
			c.tools = ev.tools
			c.deps.OnTools(c.spec.Name, c.spec.Hash, ev.tools)
		}
	}
}

// onStarted takes the new connection and answers every waiter with it.
func (c *Client) onStarted(ev started) {
	c.starting = false
	c.conn = ev.conn
	c.logSkipped(nil, ev.tools)
	c.tools = ev.tools
	c.lastErr = nil
	c.deps.OnTools(c.spec.Name, c.spec.Hash, ev.tools)
	c.publish()
	for _, w := range c.waiters {
		w.answer(useReply{conn: c.conn, tools: c.tools})
	}
	c.waiters = nil
	c.wg.Add(1)
	go c.watch(ev.conn)
}

// onStartFailed answers every waiter with the start's error.
func (c *Client) onStartFailed(ev startFailed) {
	c.starting = false
	c.noteFailure(ev.err)
	c.publish()
	for _, w := range c.waiters {
		w.answer(useReply{err: ev.err})
	}
	c.waiters = nil
	c.eager = false
}

// onExited restarts a server whose current connection ended, after its
// backoff (PXY-3).
func (c *Client) onExited(ev exited) {
	if ev.conn != c.conn {
		return
	}
	up := time.Since(ev.conn.started)
	c.conn = nil
	ev.conn.close()
	// A server that stayed up a minute, or answered a call, was
	// healthy: its crash starts the backoff over.
	if up >= uptimeReset || ev.conn.served.Load() {
		c.failures = 0
	}
	c.noteFailure(fmt.Errorf("exited (%s)", ev.conn.exitDesc()))
	c.publish()
	c.log.Warn().Str("status", ev.conn.exitDesc()).Dur("uptime_ms", up).Str("stderr", ev.conn.stderrTail()).
		Dur("restartIn_ms", time.Until(c.nextStart)).Msg("server exited; restarting")
	c.eager = true
	c.armRestart()
}

// onRefresh lists the tools again, beside the actor, after list_changed.
func (c *Client) onRefresh(run context.Context) {
	c.refresh = nil
	if c.conn == nil {
		return
	}
	conn := c.conn
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		// A panic ends the connection: the watch reports it exited.
		defer guard(c.log, "the tools refresh", func(any) { conn.abort() })
		c.refreshTools(run, conn)
	}()
}

// armRestart (re)arms the restart timer for nextStart.
func (c *Client) armRestart() {
	stopTimer(c.restart)
	c.restart = time.NewTimer(time.Until(c.nextStart))
}

// stopTimer stops t if set and returns nil, for t = stopTimer(t).
func stopTimer(t *time.Timer) *time.Timer {
	if t != nil {
		t.Stop()
	}
	return nil
}

// timerC is t's channel; nil (never fires) when t is nil.
func timerC(t *time.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C
}

// dropEvents empties the mailbox after the run's goroutines have ended:
// a connection reported there but never taken is closed.
func (c *Client) dropEvents() {
	for {
		select {
		case ev := <-c.events:
			if ev, ok := ev.(started); ok {
				ev.conn.close()
			}
		default:
			return
		}
	}
}

func (c *Client) noteFailure(err error) {
	c.lastErr = err
	c.failures++
	delay := backoffStart << min(c.failures-1, 6)
	c.nextStart = time.Now().Add(min(delay, backoffMax))
}

// maybeStart starts the server when nothing is starting and the backoff
// has passed. The start runs on its own goroutine and reports an event.
func (c *Client) maybeStart(ctx context.Context) {
	if c.conn != nil || c.starting || time.Now().Before(c.nextStart) {
		return
	}
	if len(c.waiters) == 0 && !c.eager {
		return
	}
	if c.failures >= parkAfter && len(c.waiters) == 0 {
		c.log.Warn().Int("failures", c.failures).Msg("server parked after repeated failures; the next use tries again")
		c.eager = false
		return
	}
	c.starting = true
	c.startedAt = time.Now()
	c.publish()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		// connect guards itself (and closes what it started); this covers
		// the rest. Either way the start reports startFailed: its waiters
		// wait for it.
		defer guard(c.log, "the server's start", func(any) {
			c.reportStart(ctx, nil, nil, c.internalStartError())
		})
		if c.after != nil {
			select {
			case <-c.after:
			case <-ctx.Done():
				return // Serve is ending and takes no event
			}
		}
		c.deps.panicAt.at("start")
		conn, tools, err := c.connect(ctx)
		c.reportStart(ctx, conn, tools, err)
	}()
}

// reportStart reports a start's outcome to Serve; a connection Serve can no
// longer take (it is ending) is closed.
func (c *Client) reportStart(ctx context.Context, conn *serverConn, tools []ToolInfo, err error) {
	var ev clientEvent = started{conn, tools}
	if err != nil {
		ev = startFailed{err}
	}
	select {
	case c.events <- ev:
	case <-ctx.Done():
		if conn != nil {
			conn.close()
		}
	}
}

// internalStartError is the start failure a panic in the start leaves
// (guard.go); it holds nothing to redact.
func (c *Client) internalStartError() error {
	msg := fmt.Sprintf("Server '%s' failed to start: %v", c.spec.Name, errInternal)
	return &StartError{msg: msg, redacted: msg}
}

// watch reports when the connection ends. After a panic it ends the
// connection and still reports it, or nothing would restart the server.
func (c *Client) watch(conn *serverConn) {
	defer c.wg.Done()
	defer guard(c.log, "the connection's watch", func(any) {
		conn.abort()
		c.reportExit(conn)
	})
	c.deps.panicAt.at("watch")
	<-conn.done
	c.reportExit(conn)
}

// reportExit reports the end of conn to Serve, unless Serve closed it.
func (c *Client) reportExit(conn *serverConn) {
	select {
	case c.events <- exited{conn}:
	case <-conn.closing:
	}
}

func (c *Client) refreshTools(ctx context.Context, conn *serverConn) {
	ctx, cancel := context.WithTimeout(ctx, c.deps.StartTimeout)
	defer cancel()
	tools, err := conn.listTools(ctx)
	if err != nil {
		c.log.Warn().Err(err).Msg("refreshing tools after list_changed")
		return
	}
	c.deps.panicAt.at("refresh")
	c.deps.Store.Save(c.spec.Hash, conn.catalog(tools))
	select {
	case c.events <- toolsRefreshed{conn, tools}:
	case <-ctx.Done():
	}
}
