"""Worker: runs user code for one session, one cell at a time.

Frames travel over private copies of the link (link.py), the socket the host handed
the container or else its stdin and stdout (the supervisor forked this
process and relays nothing); fd 0 is /dev/null and
fds 1 and 2 are a pipe read by a pump thread, so every OS-level write lands in
the active call's stderr. Python-level writes go through Capture objects.
The main thread runs cells; a reader thread dispatches frames: it queues
exec frames, interrupts the main thread for the active call, and ends the
worker on shutdown or the link's EOF.
"""
import ast
import json
import linecache
import os
import queue
import signal
import sys
import threading
import traceback
import types

BOOT = None
LINK = None
RT = None  # mcp.runtime, once loaded
CAP = None  # the capture module (capture.py)
CAPTURE = None
PUMP = None
DISPLAY = None  # the display module: figures and display()
JOBS = None  # the jobs module (jobs.py): background jobs have their own capture
HINTS = None  # the hints module (hints.py): notes with the fix for the usual dead ends
RUNNER = None  # the Runner, once made
SNAP_MOD = None  # the snapshot module
SNAP = None  # the Snapshotter (snapshot.py): the session's durable state
_WAKE = object()  # in LINK.execs: a snapshot waits for the main thread (Snapshotter.idle)


DIAG = 2  # the container's stderr (main() keeps a private copy): the host logs it


def _diag(message):
    """Writes message to the container's stderr, which the host keeps for
    its error messages and debug log; never raises."""
    try:
        os.write(DIAG, ("bridge worker: %s\n" % message).encode("utf-8", "replace"))
    except OSError:
        pass


def _fatal(message):
    """Ends the worker with status 1 after reporting message (_diag)."""
    _diag(message)
    os._exit(1)


def _mcp_error(message, **kw):
    # mcp.runtime defines MCPError; before it is loaded, fall back to RuntimeError.
    if RT is not None:
        return RT.MCPError(message, **kw)
    return RuntimeError(message)


class State:
    in_cell = False
    interrupted = False
    cell = 0
    bound = ()
    call = None  # the call the main thread runs
    cancelled = None  # the last call an interrupt frame named (set by the link reader)


STATE = State()


def _on_sigint(signum, frame):
    if STATE.in_cell:
        STATE.interrupted = True
        raise KeyboardInterrupt


def _interrupt(call):
    """Interrupts the main thread for call (the link reader's interrupt
    frame for the call it last queued)."""
    # Recorded first: a SIGINT that lands while no cell runs is dropped, and
    # the main thread checks this when the call's cell starts
    # (_raise_if_cancelled).
    STATE.cancelled = call
    # Directed at the main thread: while it writes a frame SIGINT is blocked
    # there and stays pending until the frame is out.
    signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)


def _raise_if_cancelled():
    """Raises the interrupt of the current call that came while no cell ran
    (between its exec frame and here). Called with in_cell set: an interrupt
    recorded after this check finds in_cell set when its SIGINT lands."""
    if STATE.cancelled is not None and STATE.cancelled == STATE.call:
        STATE.interrupted = True
        raise KeyboardInterrupt


# asyncio is imported when something first needs it, not at start: with
# what it pulls in (ssl, logging, inspect, typing) it was half of a cold
# start's imports. Whoever imports it first (a top-level-await cell, user
# code, a job) finds it set up as an eager import left it: asyncio.run
# patched (_asyncio_run) and the cells' event loop current in the main
# thread (_asyncio_loaded, called by the import hook display.after_import
# installs). The worker imports it itself once no call came for IDLE_IMPORT
# seconds: a spare long before its first call (whose cells mostly await a
# tool), a cold session after its first call. The host sends a cold
# session's first call right after the ready frame, so waiting a moment
# tells the two apart.
_orig_asyncio_run = None
IDLE_IMPORT = 0.05


def _import_idle():
    """Imports asyncio while no call waits (_asyncio_loaded sets it up)."""
    try:
        import asyncio  # noqa: F401
    except Exception as e:
        _diag("importing asyncio failed: %s: %s" % (type(e).__name__, e))


def _asyncio_run(main, **kw):
    """asyncio.run that also works inside a running loop (a top-level-await
    cell): the coroutine then runs on a fresh loop in a helper thread."""
    try:
        sys.modules["asyncio"].get_running_loop()
    except RuntimeError:
        return _orig_asyncio_run(main, **kw)
    box = {}

    def target():
        try:
            box["value"] = _orig_asyncio_run(main, **kw)
        except BaseException as e:
            box["error"] = e

    t = threading.Thread(target=target, name="asyncio.run", daemon=True)
    t.start()
    t.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _asyncio_loaded(asyncio):
    """Sets up asyncio right after its first import (any thread)."""
    global _orig_asyncio_run
    _orig_asyncio_run = asyncio.run
    asyncio.run = _asyncio_run
    if RUNNER is not None and threading.current_thread() is threading.main_thread():
        RUNNER.event_loop()


def _hidden(filename):
    return (filename.startswith("<bridge/") or filename.startswith(_ASYNCIO_DIR)
            or filename.startswith(_CONCURRENT_DIR) or filename == _AST_FILE)


# Where asyncio and concurrent.futures live, without importing them: in the
# standard library's directory, beside os.py.
_STDLIB_DIR = os.path.dirname(os.__file__)
_ASYNCIO_DIR = os.path.join(_STDLIB_DIR, "asyncio") + os.sep
_CONCURRENT_DIR = os.path.join(_STDLIB_DIR, "concurrent", "futures") + os.sep
_AST_FILE = ast.__file__  # the cell is parsed by ast.parse: its frame is ours, not the user's


def _filter_tb(exc, seen=None):
    """Drops entrypoint and asyncio frames from exc's traceback chain."""
    seen = seen if seen is not None else set()
    if exc is None or id(exc) in seen:
        return
    seen.add(id(exc))
    tbs = []
    tb = exc.__traceback__
    while tb is not None:
        if not _hidden(tb.tb_frame.f_code.co_filename):
            tbs.append(tb)
        tb = tb.tb_next
    for a, b in zip(tbs, tbs[1:]):
        a.tb_next = b
    if tbs:
        tbs[-1].tb_next = None
    exc.__traceback__ = tbs[0] if tbs else None
    _filter_tb(exc.__cause__, seen)
    _filter_tb(exc.__context__, seen)


def _error_text(exc):
    msg = str(exc)
    name = type(exc).__name__
    return "%s: %s" % (name, msg) if msg else name


class _Sink:
    """A text stream that keeps nothing (the warm-up's output)."""

    def write(self, s):
        return len(s)

    def flush(self):
        pass


def _mount_notes():
    """A note for each read-write host folder this sandbox's user cannot
    write (the host's permissions, which differ by runtime): said in a
    session's first result, before a write fails with PermissionError."""
    notes = []
    for path in BOOT.get("rwMounts") or ():
        if not os.access(path, os.W_OK | os.X_OK):
            notes.append("the read-write mount %s cannot be written by the sandbox's user (uid %d): writes there fail "
                         "with PermissionError; `bridge doctor` names its host folder and the fix" % (path, os.getuid()))
    return notes


class Runner:
    def __init__(self):
        main = types.ModuleType("__main__")
        main.__builtins__ = __builtins__
        sys.modules["__main__"] = main
        self.ns = main.__dict__
        self.loop = None  # the cells' event loop, made once asyncio is imported (event_loop)

    def event_loop(self):
        """The cells' event loop, made and set as the main thread's current
        loop on first use. Main thread only."""
        if self.loop is None:
            # A first import of asyncio calls back here (_asyncio_loaded),
            # which makes the loop: one loop only.
            import asyncio
            if self.loop is None:
                self.loop = asyncio.new_event_loop()
                asyncio.set_event_loop(self.loop)
        return self.loop

    def run(self, msg):
        params = msg["params"]
        if self.loop is None and "asyncio" in sys.modules:
            self.event_loop()  # asyncio was first imported outside the main thread
        rt = RT
        try:
            rt._begin_call(params)
        except rt._StaleServers as e:
            # Nothing ran and nothing changed: the host sends the frame
            # again with every server entry in full.
            LINK.reply_error(msg["id"], -32008, str(e))  # protocol.CodeStaleServers
            return
        STATE.call = params.get("call")
        first = STATE.cell == 0
        restore = params.get("restore") if first else None
        if restore:
            # The restored cells keep their numbers (tracebacks, save_tool):
            # this sandbox's cells go on after them.
            STATE.cell = max(STATE.cell, int(restore.get("cell") or 0))
        STATE.cell += 1
        n = STATE.cell
        self._bind(rt, params)
        # A new session (each container has one worker) first loads the saved
        # tools, then the snapshot the host offers.
        notes, stopped = self._load_tools(rt, params.get("savedTools")) if first else (None, False)
        notes = rt._call_notes() + (notes or []) + (_mount_notes() if first else [])
        if restore and not stopped:
            more, stopped = self._restore(restore)
            notes += more
        notes += SNAP.notes()
        CAPTURE.begin(params["call"], n, params.get("outputLimit") or BOOT["limits"]["maxOutputBytes"])
        CAPTURE.progress = bool(params.get("progress"))
        DISPLAY.IMAGES.begin(params["call"], n)
        HINTS.begin()
        if stopped:
            outcome, exit_code, value, error = "interrupted", 1, None, "KeyboardInterrupt"
        else:
            outcome, exit_code, value, error = self._exec(params["code"], n)
        if outcome == "interrupted":
            _kill_descendants()
        else:
            outcome, exit_code, error = self._flush_figures(outcome, exit_code, error)
        # Longer than a print's sync: on a loaded machine the pump thread may
        # wait its turn, and what it holds belongs to this call, not the next.
        PUMP.sync(timeout=2.0)
        result_repr = None
        if value is not None:
            try:
                _hint(HINTS.value, value)  # a coroutine is closed, never awaited
                # The final value is shown as display() would show it: its
                # MCP images attached, no base64 in the text.
                result_repr = DISPLAY.final_repr(value)
                self.ns["_"] = value
            except BaseException as e:
                _filter_tb(e)
                CAPTURE.write("stderr", "".join(traceback.format_exception(e)))
                outcome, exit_code, error = "exception", 1, _error_text(e)
        truncated, total, result_repr, runs = CAPTURE.finish(result_repr)
        notes += _hint(HINTS.end, self.ns) or []
        notes += rt._take_late_notes()
        reset = rt._end_call()
        res = {"outcome": outcome, "exitCode": exit_code, "truncated": truncated, "outputBytes": total, "reset": reset}
        saved = DISPLAY.IMAGES.end()
        if saved:
            res["saved"] = saved
        if result_repr is not None:
            res["result"] = result_repr
        if error:
            res["error"] = error
        if notes:
            res["notes"] = notes
        LINK.reply_exec(msg["id"], params["call"], res, runs)
        try:
            SNAP.after_cell(params["call"], params["code"], reset)
        except Exception as e:  # durability is a courtesy: the session goes on
            _diag("snapshot failed: %s: %s" % (type(e).__name__, e))

    def _restore(self, params):
        """Loads the snapshot the host offers, interruptible like a cell: the
        call's timeout bounds it. Returns (notes, interrupted)."""
        STATE.interrupted = False
        STATE.in_cell = True
        try:
            _raise_if_cancelled()
            note = SNAP_MOD.restore(params, {k: self.ns[k] for k in STATE.bound if k in self.ns})
            SNAP.last = True  # the state is the snapshot's
            return [note], False
        except KeyboardInterrupt:
            return ["the call was interrupted while session '%s' was being restored; it starts empty" % (
                params.get("session") or "default")], True
        except Exception as e:
            return ["session '%s' was not restored: %s" % (params.get("session") or "default", _error_text(e))], False
        finally:
            STATE.in_cell = False

    def snapshot_now(self, msg):
        """The host's snapshot request (durability on exit): takes one and replies."""
        try:
            summary = SNAP.take(STATE.call, timeout=(msg.get("params") or {}).get("timeout"))
            LINK.reply(msg["id"], summary)
        except Exception as e:
            LINK.reply_error(msg["id"], -32003, str(e))

    def warm(self):
        """Runs a throwaway cell through the parser, the compiler and a
        frame's encoding while no call waits: their first use in a process
        costs ~0.3 ms, which a session's first call would pay otherwise.
        Nothing it does is visible to calls."""
        try:
            tree = ast.parse("x = [1]\nprint(repr(x), file=sink)", "<bridge/warm-up>", "exec")
            co = compile(tree, "<bridge/warm-up>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
            exec(co, {"sink": _Sink()})
            json.dumps({"jsonrpc": "2.0", "id": 0, "result": {"outcome": "ok"}}, ensure_ascii=False, separators=(",", ":"))
        except Exception as e:
            _diag("warm-up failed: %s: %s" % (type(e).__name__, e))

    def _flush_figures(self, outcome, exit_code, error):
        """Sends the figures still open at the end of the cell, like a
        notebook; an interrupt meanwhile makes the call interrupted."""
        STATE.interrupted = False
        STATE.in_cell = True
        try:
            try:
                _raise_if_cancelled()
                DISPLAY.flush_figures()
            finally:
                STATE.in_cell = False
        except KeyboardInterrupt:
            if STATE.interrupted:
                return "interrupted", 1, "KeyboardInterrupt"
        except Exception as e:
            CAPTURE.write("stderr", "figures could not be sent: %s\n" % _error_text(e))
        return outcome, exit_code, error
    def _load_tools(self, rt, saved):
        """Loads the saved tools (saved: the host's saved_tools reply sent
        with the exec frame, else None: ask), interruptible like a cell: a
        tool that hangs while loading ends this call, not every new session."""
        STATE.interrupted = False
        STATE.in_cell = True
        try:
            _raise_if_cancelled()
            return rt._load_user_tools(self.ns, saved), False
        except KeyboardInterrupt:
            name = rt._LOADING[0]
            if name is None:
                return ["the call was interrupted while the saved tools were loading"], True
            return ["loading saved tool '%s' was interrupted; remove it with runtime.delete_tool('%s')" % (name, name)], True
        finally:
            STATE.in_cell = False

    def _bind(self, rt, params):
        # The proxies a running background job was granted stay bound: the
        # job looks them up in these globals whenever it calls them. This
        # call's own code may see them too, but the host refuses them to it
        # unless this call grants the server as well.
        g = rt._globals_for_call()
        held = JOBS.held()
        kept = []
        for name in STATE.bound:
            if name in g:
                continue
            if name in held:
                kept.append(name)
            else:
                self.ns.pop(name, None)
        self.ns.update(g)
        STATE.bound = tuple(g) + tuple(kept)

    def _exec(self, code, n):
        filename = "<cell-%d>" % n
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        STATE.interrupted = False
        STATE.in_cell = True
        try:
            try:
                _raise_if_cancelled()
                value = self._run_code(code, filename)
            finally:
                STATE.in_cell = False
            return "ok", 0, value, None
        except KeyboardInterrupt as e:
            if STATE.interrupted:
                return "interrupted", 1, None, "KeyboardInterrupt"
            return self._report(e)
        except SystemExit as e:
            return self._exit(e)
        except BaseException as e:
            return self._report(e)

    def _run_code(self, code, filename):
        tree = ast.parse(code, filename, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            expr = tree.body[-1]
            # The two new nodes take the expression's place in the source;
            # fix_missing_locations would walk the whole tree for them.
            target = ast.copy_location(ast.Name(id="__bridge_value__", ctx=ast.Store()), expr)
            tree.body[-1] = ast.copy_location(ast.Assign(targets=[target], value=expr.value), expr)
            last = "__bridge_value__"
        co = compile(tree, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
        self.ns.pop("__bridge_value__", None)
        if co.co_flags & 0x80:  # CO_COROUTINE: the cell has top-level await
            coro = eval(co, self.ns)
            loop = self.event_loop()
            task = loop.create_task(coro)
            try:
                loop.run_until_complete(task)
            except BaseException:
                if not task.done():
                    task.cancel()
                raise
        else:
            exec(co, self.ns)
        return self.ns.pop(last, None) if last else None

    def _report(self, e):
        _filter_tb(e)
        try:
            RT._explain(e)
        except Exception as err:  # the hint is a courtesy; the error itself must get out
            _diag("explaining %s failed: %r" % (type(e).__name__, err))
        _hint(HINTS.explain, e)
        if isinstance(e, SyntaxError):
            text = "".join(traceback.format_exception_only(type(e), e))
        else:
            text = "".join(traceback.format_exception(e))
        CAPTURE.write("stderr", text)
        return "exception", 1, None, _error_text(e)

    def _exit(self, e):
        code = e.code
        if code is None or code == 0:
            return "exit", 0, None, None
        if isinstance(code, int) and not isinstance(code, bool):
            return "exit", code, None, "SystemExit: %d" % code
        CAPTURE.write("stderr", "%s\n" % (code,))
        return "exit", 1, None, "SystemExit: %s" % (code,)


def _hint(fn, arg):
    """fn(arg) of the hints module, or None when it failed: a hint is a
    courtesy, never the call's failure."""
    try:
        return fn(arg)
    except Exception as err:
        _diag("hint %s failed: %s: %s" % (fn.__name__, type(err).__name__, err))
        return None


def _kill_descendants():
    """SIGKILLs every process the interrupted cell left running (a fork bomb
    in a child, a runaway subprocess), so a kept session keeps its process
    budget. Threads and asyncio tasks are left alone (EXE-9)."""
    me = os.getpid()
    for _ in range(3):
        children = {}
        try:
            names = os.listdir("/proc")
        except OSError:
            return
        for name in names:
            if not name.isdigit():
                continue
            try:
                with open("/proc/%s/stat" % name, "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2:].split()
            children.setdefault(int(fields[1]), []).append(int(name))
        spared = SNAP.children if SNAP is not None else ()
        doomed, todo = [], [pid for pid in children.get(me, ()) if pid not in spared]
        while todo:
            pid = todo.pop()
            doomed.append(pid)
            todo.extend(children.get(pid, ()))
        if not doomed:
            return
        for pid in doomed:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for pid in doomed:
            try:
                os.waitpid(pid, os.WNOHANG)
            except OSError:
                pass


def _load_display(rt, limits):
    """Loads figures and display(): runtime.display, and display as a
    builtin like IPython's (a user variable named display shadows it)."""
    global DISPLAY
    import builtins
    DISPLAY = _load_module("mcp._display", "display.py", BOOT["files"]["display.py"])
    DISPLAY.install(DISPLAY.Images(LINK, limits.get("maxImages", 10), limits.get("maxImageBytes") or (1 << 20)), CAP._prune, rt)
    rt.display = DISPLAY.display
    builtins.display = DISPLAY.display


def _load_module(name, filename, source):
    mod = types.ModuleType(name)
    mod.__file__ = "<bridge/%s>" % filename
    sys.modules[name] = mod
    exec(compile(source, mod.__file__, "exec"), mod.__dict__)
    return mod


def main(boot, src, argv):
    global BOOT, LINK, CAPTURE
    BOOT = boot
    rfd, wfd = int(argv[0]), int(argv[1])
    os.set_inheritable(rfd, False)
    os.set_inheritable(wfd, False)
    # fd 0 is /dev/null: subprocesses cannot read frames; input() sees EOF.
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = open(os.devnull, "r")
    # fds 1 and 2 go to a pump, so OS-level writes become the call's stderr;
    # the worker's own diagnostics keep a private copy of the container's.
    global DIAG
    DIAG = os.dup(2)
    pr, pw = os.pipe()
    os.dup2(pw, 1)
    os.dup2(pw, 2)
    os.close(pw)
    limits = boot["limits"]
    link = _load_module("mcp._link", "link.py", boot["files"]["link.py"])
    link.fatal, link.error = _fatal, _mcp_error
    LINK = link.Link(rfd, wfd, limits["maxFrameBytes"], limits.get("maxInFlight") or 32, boot.get("pendingFrames") or b"",
                     limits.get("linkWindow") or 0)
    LINK.on_interrupt = _interrupt
    global CAP, PUMP
    CAP = _load_module("mcp._capture", "capture.py", boot["files"]["capture.py"])
    CAP.diag = _diag
    CAPTURE = CAP.Capture(LINK)
    sys.stdout = CAP.CaptureStream(CAPTURE, "stdout", 1)
    sys.stderr = CAP.CaptureStream(CAPTURE, "stderr", 2)
    PUMP = CAP.Pump(pr, CAPTURE)
    CAP.before_write = PUMP.sync

    # The mcp package: mcp, mcp.runtime, mcp.servers.
    pkg = types.ModuleType("mcp")
    pkg.__path__ = []
    pkg.__file__ = "<bridge/mcp/__init__.py>"
    sys.modules["mcp"] = pkg
    servers = types.ModuleType("mcp.servers")
    servers.__path__ = []
    servers.__file__ = "<bridge/mcp/servers.py>"
    sys.modules["mcp.servers"] = servers
    pkg.servers = servers
    # The saved-tool rules, loaded before any user code can replace them.
    toolcheck = _load_module("mcp._toolcheck", "toolcheck.py", boot["files"]["toolcheck.py"])
    global HINTS
    HINTS = _load_module("mcp._hints", "hints.py", boot["files"]["hints.py"])
    HINTS.install()
    CAP.saw = HINTS.saw
    rt = types.ModuleType("mcp.runtime")
    rt.__file__ = "<bridge/mcp_runtime.py>"
    rt.LINK = LINK
    rt.MANUAL = boot["files"].get("manual.md", "")
    rt.TOOLCHECK = toolcheck
    rt.HINTS = HINTS
    sys.modules["mcp.runtime"] = rt
    exec(compile(boot["files"]["mcp_runtime.py"], rt.__file__, "exec"), rt.__dict__)
    global RT
    RT = rt
    pkg.runtime = rt
    for name in ("MCPError",):
        setattr(pkg, name, getattr(rt, name))
    _load_display(rt, limits)
    global JOBS
    JOBS = _load_module("mcp.jobs", "jobs.py", boot["files"]["jobs.py"])
    global RUNNER, SNAP, SNAP_MOD
    runner = RUNNER = Runner()
    SNAP_MOD = _load_module("mcp._snapshot", "snapshot.py", boot["files"]["snapshot.py"])
    SNAP_MOD.install(LINK, runner.ns, STATE, _mcp_error, _diag, JOBS.Job, boot.get("durability") or "off",
                     limits["maxFrameBytes"])
    SNAP = SNAP_MOD.Snapshotter(lambda: LINK.execs.put(_WAKE))
    rt._SNAPSHOTS = SNAP
    JOBS.install(rt, CAP.HeadTail, format_error=_error_text, filter_tb=_filter_tb, progress=CAPTURE.job_progress,
                 job_token=link.JOB, namespace=runner.ns, call_limit=limits["maxOutputBytes"])
    CAP.route = JOBS.route

    DISPLAY.after_import("asyncio", _asyncio_loaded)
    signal.signal(signal.SIGINT, _on_sigint)
    threading.Thread(target=LINK.read_loop, name="link", daemon=True).start()
    LINK.notify("ready", {"python": "%d.%d.%d" % sys.version_info[:3], "pid": os.getpid()})
    if LINK.execs.empty():  # a spare: its first call comes later
        runner.warm()
    while True:
        try:
            if "asyncio" not in sys.modules:
                try:
                    msg = LINK.execs.get(timeout=IDLE_IMPORT)
                except queue.Empty:
                    _import_idle()
                    continue
            else:
                msg = LINK.execs.get()
            if msg is _WAKE:
                SNAP.idle()
            elif msg.get("method") == "snapshot":
                runner.snapshot_now(msg)
            else:
                runner.run(msg)
        except KeyboardInterrupt:
            continue
