"""Worker: runs user code for one session, one cell at a time.

Frames travel over private copies of the link, the socket the host handed
the container or else its stdin and stdout (the supervisor forked this
process and relays nothing); fd 0 is /dev/null and
fds 1 and 2 are a pipe read by a pump thread, so every OS-level write lands in
the active call's stderr. Python-level writes go through Capture objects.
The main thread runs cells; a reader thread dispatches frames: it queues
exec frames, interrupts the main thread for the active call, and ends the
worker on shutdown or the link's EOF.
"""
import ast
import asyncio
import concurrent.futures
import itertools
import json
import linecache
import os
import queue
import signal
import sys
import threading
import traceback
import types

_SIGINT = {signal.SIGINT}
BOOT = None
LINK = None
CAP = None  # the capture module (capture.py)
CAPTURE = None
PUMP = None
DISPLAY = None  # the display module: figures and display()
JOBS = None  # the jobs module (jobs.py): background jobs have their own capture


class Link:
    """JSON-RPC over the link (a socket, or the container's stdio). Thread-safe; replies may come in any order."""

    def __init__(self, rfd, wfd, max_frame, max_in_flight, pending=b""):
        self._r = rfd
        self._ahead = pending  # bytes read past the boot frame, read first
        self._wfd = wfd
        self._wlock = threading.Lock()
        self._main = threading.main_thread()
        self._ids = itertools.count(1)
        self._pending = {}
        self._plock = threading.Lock()
        self._slots = threading.BoundedSemaphore(max_in_flight)
        self.max_frame = max_frame
        self.execs = queue.Queue()
        self.exec_call = None  # the call of the last exec frame: the one an interrupt may name
        self.closed = False

    def _frame(self, obj):
        data = json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")
        if len(data) > self.max_frame:
            raise _mcp_error(
                "Frame of %d bytes exceeds the %d-byte limit (MCP_BRIDGE_MAX_FRAME_BYTES)" % (len(data), self.max_frame),
                kind="invalid_arguments")
        return data + b"\n"

    def _send(self, obj):
        self._write(self._frame(obj))

    def send_frames(self, objs):
        """Sends the frames objs in one write, so they cross the link (and
        the runtime's stdio relay) together; each is checked against the cap."""
        self._write(b"".join([self._frame(o) for o in objs]))

    def _write(self, data):
        # SIGINT is blocked in the main thread while it writes, so a
        # KeyboardInterrupt can never cut a frame in half; a pending SIGINT
        # is delivered right after. Other threads never see KeyboardInterrupt.
        main = threading.current_thread() is self._main
        with self._wlock:
            if main:
                signal.pthread_sigmask(signal.SIG_BLOCK, _SIGINT)
            try:
                view = memoryview(data)
                while view:
                    try:
                        n = os.write(self._wfd, view)
                    except InterruptedError:
                        continue
                    view = view[n:]
            except OSError as e:
                # The host no longer reads the link: nothing can be sent.
                _fatal("frame write failed: %s" % (e.strerror or e))
            finally:
                if main:
                    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGINT)

    def notify(self, method, params):
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def reply(self, id_, result):
        self._send(self.reply_frame(id_, result))

    @staticmethod
    def reply_frame(id_, result):
        return {"jsonrpc": "2.0", "id": id_, "result": result}

    def _register(self, waiter):
        """Takes an in-flight slot and returns a new request id for waiter.
        Whoever pops the id from _pending (_drop, or the reader) releases
        the slot, so a full set of slots never waits on an event loop."""
        if self.closed:
            raise _mcp_error("RPC channel closed", kind="transport")
        self._slots.acquire()
        id_ = next(self._ids)
        with self._plock:
            self._pending[id_] = waiter
        return id_

    def _drop(self, id_):
        with self._plock:
            waiter = self._pending.pop(id_, None)
        if waiter is not None:
            self._slots.release()

    def request(self, method, params):
        """Sends a request and returns a concurrent Future for its result."""
        fut = concurrent.futures.Future()
        try:
            id_ = self._register(fut)
        except BaseException as e:
            fut.set_exception(e)
            return fut
        try:
            self._send({"jsonrpc": "2.0", "id": id_, "method": method, "params": params})
        except BaseException as e:
            self._drop(id_)
            fut.set_exception(e)
        return fut

    def call(self, method, params):
        """Blocks the calling thread for the result."""
        return self.request(method, params).result()

    async def acall(self, method, params):
        """Awaits the result on the running event loop: the reader thread
        hands the reply to the loop with one wake-up (_LoopWaiter)."""
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        id_ = self._register(_LoopWaiter(loop, fut))
        try:
            self._send({"jsonrpc": "2.0", "id": id_, "method": method, "params": params})
            return await fut
        finally:
            self._drop(id_)  # a no-op once the reader has taken it

    def _lines(self, f):
        """The host's frames: the bytes read ahead first, then f's lines."""
        ahead, self._ahead = self._ahead, b""
        if ahead:
            *whole, rest = ahead.split(b"\n")
            for line in whole:
                yield line + b"\n"
            if rest:
                yield rest + f.readline()
        yield from iter(f.readline, b"")

    def read_loop(self):
        with os.fdopen(self._r, "rb") as f:
            for line in self._lines(f):
                try:
                    msg = json.loads(line)
                except ValueError:
                    continue
                if isinstance(msg, dict):
                    self._dispatch(msg)
        self.closed = True
        with self._plock:
            pending, self._pending = self._pending, {}
        for waiter in pending.values():
            _settle(waiter, None, _mcp_error("RPC channel closed", kind="transport"))
        os._exit(0)

    def _dispatch(self, msg):
        method = msg.get("method")
        if method is None:
            with self._plock:
                waiter = self._pending.pop(msg.get("id"), None)
            if waiter is None:
                return
            self._slots.release()
            if "error" in msg:
                err = msg["error"] or {}
                data = err.get("data") or {}
                _settle(waiter, None, _mcp_error(err.get("message", "RPC error"), kind=data.get("kind")))
            else:
                _settle(waiter, msg.get("result"), None)
        elif method == "exec":
            self.exec_call = (msg.get("params") or {}).get("call")
            self.execs.put(msg)
        elif method == "interrupt":
            call = (msg.get("params") or {}).get("call")
            if call is not None and call == self.exec_call:
                # Recorded first: a SIGINT that lands while no cell runs is
                # dropped, and the main thread checks this when the call's
                # cell starts (_raise_if_cancelled).
                STATE.cancelled = call
                # Directed at the main thread: while it writes a frame SIGINT
                # is blocked there and stays pending until the frame is out.
                signal.pthread_kill(self._main.ident, signal.SIGINT)
        elif method == "shutdown":
            os._exit(0)


class _LoopWaiter:
    """A pending request awaited on an event loop."""

    __slots__ = ("loop", "fut")

    def __init__(self, loop, fut):
        self.loop, self.fut = loop, fut


def _settle(waiter, result, exc):
    """Completes a pending request (a concurrent Future, or a _LoopWaiter
    through one call_soon_threadsafe) unless it is done already."""
    if isinstance(waiter, _LoopWaiter):
        try:
            waiter.loop.call_soon_threadsafe(_settle_future, waiter.fut, result, exc)
        except RuntimeError:
            pass  # the loop is closed: nobody awaits it any more
        return
    _settle_future(waiter, result, exc)


def _settle_future(fut, result, exc):
    if fut.done():
        return
    if exc is not None:
        fut.set_exception(exc)
    else:
        fut.set_result(result)


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
    rt = sys.modules.get("mcp.runtime")
    if rt is not None:
        return rt.MCPError(message, **kw)
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


def _raise_if_cancelled():
    """Raises the interrupt of the current call that came while no cell ran
    (between its exec frame and here). Called with in_cell set: an interrupt
    recorded after this check finds in_cell set when its SIGINT lands."""
    if STATE.cancelled is not None and STATE.cancelled == STATE.call:
        STATE.interrupted = True
        raise KeyboardInterrupt


_orig_asyncio_run = asyncio.run


def _asyncio_run(main, **kw):
    """asyncio.run that also works inside a running loop (a top-level-await
    cell): the coroutine then runs on a fresh loop in a helper thread."""
    try:
        asyncio.get_running_loop()
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


def _hidden(filename):
    return (filename.startswith("<bridge/") or filename.startswith(_ASYNCIO_DIR)
            or filename.startswith(_CONCURRENT_DIR) or filename == _AST_FILE)


_ASYNCIO_DIR = os.path.dirname(asyncio.__file__) + os.sep
_CONCURRENT_DIR = os.path.dirname(concurrent.futures.__file__) + os.sep
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


class Runner:
    def __init__(self):
        main = types.ModuleType("__main__")
        main.__builtins__ = __builtins__
        sys.modules["__main__"] = main
        self.ns = main.__dict__
        self.loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.loop)

    def run(self, msg):
        params = msg["params"]
        STATE.call = params.get("call")
        STATE.cell += 1
        n = STATE.cell
        rt = sys.modules["mcp.runtime"]
        rt._begin_call(params)
        self._bind(rt, params)
        # A new session (each container has one worker) first loads the saved tools.
        notes, stopped = self._load_tools(rt, params.get("savedTools")) if n == 1 else (None, False)
        CAPTURE.begin(params["call"], n, params.get("outputLimit") or BOOT["limits"]["maxOutputBytes"])
        CAPTURE.progress = bool(params.get("progress"))
        DISPLAY.IMAGES.begin(params["call"], n)
        if stopped:
            outcome, exit_code, value, error = "interrupted", 1, None, "KeyboardInterrupt"
        else:
            outcome, exit_code, value, error = self._exec(params["code"], n)
        if outcome == "interrupted":
            _kill_descendants()
        else:
            outcome, exit_code, error = self._flush_figures(outcome, exit_code, error)
        PUMP.sync()
        result_repr = None
        if value is not None:
            try:
                result_repr = repr(value)
                self.ns["_"] = value
            except BaseException as e:
                _filter_tb(e)
                CAPTURE.write("stderr", "".join(traceback.format_exception(e)))
                outcome, exit_code, error = "exception", 1, _error_text(e)
        frames = []
        truncated, total, result_repr = CAPTURE.finish(result_repr, frames)
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
        frames.append(Link.reply_frame(msg["id"], res))
        LINK.send_frames(frames)

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
        for name in STATE.bound:
            self.ns.pop(name, None)
        g = rt._globals_for_call()
        self.ns.update(g)
        STATE.bound = tuple(g)

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
            tree.body[-1] = ast.copy_location(
                ast.Assign(targets=[ast.Name(id="__bridge_value__", ctx=ast.Store())], value=expr.value), expr)
            ast.fix_missing_locations(tree)
            last = "__bridge_value__"
        co = compile(tree, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
        self.ns.pop("__bridge_value__", None)
        if co.co_flags & 0x80:  # CO_COROUTINE: the cell has top-level await
            coro = eval(co, self.ns)
            task = self.loop.create_task(coro)
            try:
                self.loop.run_until_complete(task)
            except BaseException:
                if not task.done():
                    task.cancel()
                raise
        else:
            exec(co, self.ns)
        return self.ns.pop(last, None) if last else None

    def _report(self, e):
        _filter_tb(e)
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
        doomed, todo = [], list(children.get(me, ()))
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
    DISPLAY.install(DISPLAY.Images(LINK, limits.get("maxImages", 10), limits.get("maxImageBytes") or (1 << 20)), CAP._prune)
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
    LINK = Link(rfd, wfd, limits["maxFrameBytes"], limits.get("maxInFlight") or 32, boot.get("pendingFrames") or b"")
    global CAP, PUMP
    CAP = _load_module("mcp._capture", "capture.py", boot["files"]["capture.py"])
    CAP.diag = _diag
    CAPTURE = CAP.Capture(LINK)
    sys.stdout = CAP.CaptureStream(CAPTURE, "stdout", 1)
    sys.stderr = CAP.CaptureStream(CAPTURE, "stderr", 2)
    PUMP = CAP.Pump(pr, CAPTURE)

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
    rt = types.ModuleType("mcp.runtime")
    rt.__file__ = "<bridge/mcp_runtime.py>"
    rt.LINK = LINK
    rt.MANUAL = boot["files"].get("manual.md", "")
    sys.modules["mcp.runtime"] = rt
    exec(compile(boot["files"]["mcp_runtime.py"], rt.__file__, "exec"), rt.__dict__)
    pkg.runtime = rt
    for name in ("MCPError",):
        setattr(pkg, name, getattr(rt, name))
    _load_display(rt, limits)
    global JOBS
    JOBS = _load_module("mcp.jobs", "jobs.py", boot["files"]["jobs.py"])
    JOBS.install(rt)
    CAP.route = JOBS.route

    asyncio.run = _asyncio_run
    signal.signal(signal.SIGINT, _on_sigint)
    runner = Runner()
    threading.Thread(target=LINK.read_loop, name="link", daemon=True).start()
    LINK.notify("ready", {"python": "%d.%d.%d" % sys.version_info[:3], "pid": os.getpid()})
    while True:
        try:
            msg = LINK.execs.get()
            runner.run(msg)
        except KeyboardInterrupt:
            continue
