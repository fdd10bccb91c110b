"""Snapshots: a session's globals and /workspace files, taken and loaded
inside the sandbox only (unpickling runs code), stored by the host as
opaque bytes.

Taking one. The worker's main thread forks between cells (or inside a cell,
for runtime.snapshot): the child holds a consistent copy of the session
without stopping it, pickles it to a pipe and _exits, writing nothing else
anywhere (no link, no fd 1 or 2, no log). It sets its own oom_score_adj to
1000, so the OOM killer takes it first when copy-on-write pushes the
container over its limit. A thread of the worker (the uploader) reads the
pipe and sends it to the host in chunks (snapshot_begin, snapshot_write,
snapshot_end), one request at a time, so a call's frames wait for at most
one chunk. A failed or killed child never ends the session: the next
result says that cell's state is not durable.

The stream. MAGIC, then frames of a tag byte, an 8-byte big-endian length
and the data:
  H  header (JSON): the call, the time, the cells' sources, the saved tools
  N  a global's name; P frames (its in-band pickle bytes) and B frames (its
     out-of-band buffers, protocol 5: numpy and pandas data, never copied
     in the child) follow, in the order the pickler wrote them, then
  E  the global is complete, or X: it was left out (the data says why)
  F  the /workspace tar stream, in pieces
  Z  the summary (JSON), last
One pickler pickles every global, so objects shared between globals stay
shared (a is b). A global that fails clears the memo on both sides (the
loader clears its own at X), so no later global refers to what was lost.

Loading one. The first cell of a new sandbox pulls the stream from the host
(snapshot_read), in order, and loads each global into the session; a
global that fails to load (its class is gone after an image change, it
refers to a server this call does not grant) is named in the note and
skipped. Nothing is staged in /tmp or /workspace.

What is never taken: the sandbox's own globals (runtime, the mcp_* proxies,
the memory helpers, MCPError, saved tools), which are bound afresh;
references to them from user objects are kept by name and bound again on
load. What cannot be taken is named: open files, sockets, threads, locks,
generators, coroutines, jobs, and objects that refuse to pickle.
"""
import ast
import io
import json
import linecache
import os
import signal
import struct
import sys
import threading
import time
import types
import warnings

# pickle, cloudpickle, tarfile, select and base64 are imported when a
# snapshot is first taken or loaded, not at the sandbox's start.

MAGIC = b"BRIDGESNAP1\n"
WORKSPACE = "/workspace"
STALL = 60.0  # seconds the uploader waits for the child's next bytes before killing it
SYNC_EVERY = 16 << 20  # bytes of data frames between two snapshot_write requests
_HDR = struct.Struct(">Q")

# Set by install (the worker's).
LINK = None
NS = None  # the session's globals
STATE = None  # the worker's State: cell, bound
ERROR = None  # builds an MCPError
DIAG = None
JOB_TYPE = None  # jobs.Job
MODE = "cell"  # MCP_BRIDGE_SESSION_DURABILITY: cell, exit or off
CHUNK = 1 << 20  # bytes of snapshot data per request, within the frame cap

_SKIP = frozenset(("__builtins__", "__name__", "__doc__", "__package__", "__loader__", "__spec__", "__bridge_value__"))


def install(link, ns, state, error, diag, job_type, mode, max_frame):
    global LINK, NS, STATE, ERROR, DIAG, JOB_TYPE, MODE, CHUNK, WORKSPACE
    LINK, NS, STATE, ERROR, DIAG, JOB_TYPE, MODE = link, ns, state, error, diag, job_type, mode or "cell"
    # The entrypoint's own tests run it on a host, in a folder of theirs.
    WORKSPACE = os.environ.get("BRIDGE_TEST_WORKSPACE") or WORKSPACE
    # A data frame is its bytes as they are, after a header line of under
    # a hundred bytes; the host's snapChunk is the same.
    CHUNK = max(4096, min(4 << 20, max_frame - 4096))


# --- references kept by name --------------------------------------------------

_BOUND = {}  # the globals the loading call binds, for _bound


class _Missing(Exception):
    """A reference kept by name that the loading call cannot bind."""


def _bound(name):
    """A sandbox global (a server proxy, runtime, a helper), bound again by
    name in the loading call."""
    try:
        return _BOUND[name]
    except KeyError:
        raise _Missing("refers to %s, which this call does not grant" % name) from None


def _saved(name):
    """A saved tool, bound again by name: the one saved now."""
    mod = sys.modules.get("user_tools")
    fn = getattr(mod, name, None) if mod is not None else None
    if fn is None:
        raise _Missing("refers to saved tool '%s', deleted since" % name)
    return fn


def _namespace():
    """The session's globals: what a cell's function sees as its globals."""
    return NS


class _NS:
    """Stands for the session's globals in a function's pickle: a restored
    function sees the restored session's globals, as it did, not a copy."""

    def __reduce__(self):
        return _namespace, ()


_NS_REF = _NS()


class _Refused(Exception):
    def __init__(self, label):
        super().__init__(label)
        self.label = label


def _lock_types():
    return (type(threading.Lock()), type(threading.RLock()))


def _refusal(obj):
    """Why obj is never pickled (a live resource), or None. cloudpickle
    would pickle an open read-mode file by reading it: refused here first."""
    if isinstance(obj, (io.BytesIO, io.StringIO)):
        return None
    if isinstance(obj, io.IOBase):
        return "open file"
    socket = sys.modules.get("socket")
    if socket is not None and isinstance(obj, socket.socket):
        return "socket"
    if isinstance(obj, threading.Thread):
        return "thread"
    if isinstance(obj, _lock_types()):
        return "lock"
    if isinstance(obj, types.GeneratorType):
        return "generator"
    if isinstance(obj, (types.CoroutineType, types.AsyncGeneratorType)):
        return "coroutine"
    if isinstance(obj, (types.FrameType, types.TracebackType)):
        return "frame"
    if JOB_TYPE is not None and isinstance(obj, JOB_TYPE):
        return "running job" if getattr(obj, "running", False) else "job"
    asyncio = sys.modules.get("asyncio")
    if asyncio is not None and isinstance(obj, (asyncio.Future, asyncio.AbstractEventLoop)):
        return "asyncio object"
    mmap = sys.modules.get("mmap")
    if mmap is not None and isinstance(obj, mmap.mmap):
        return "memory map"
    return None


def _cloudpickle():
    """The standalone cloudpickle (the image's python3-cloudpickle), else
    the copy joblib vendors, else None: plain pickle, which names every
    function and class defined in a cell as left out."""
    try:
        import cloudpickle
        return cloudpickle
    except ImportError:
        pass
    try:
        from joblib.externals import cloudpickle
        return cloudpickle
    except ImportError:
        return None


def _pickler_class():
    import pickle
    cp = _cloudpickle()
    base = cp.Pickler if cp is not None else pickle.Pickler
    plain = cp is None

    class Pickler(base):
        def __init__(self, file, special, buffer_callback):
            super().__init__(file, protocol=5, buffer_callback=buffer_callback)
            self._special = special

        def reducer_override(self, obj):
            hit = self._special.get(id(obj))
            if hit is not None and hit[0] is obj:
                return hit[1]
            label = _refusal(obj)
            if label is not None:
                raise _Refused(label)
            if plain:
                return NotImplemented
            return super().reducer_override(obj)

        def _dynamic_function_reduce(self, func):
            rv = super()._dynamic_function_reduce(func)
            if func.__globals__ is not NS:
                return rv
            # A cell's function: its globals are the session's (restored by
            # name), never a copy holding the values it saw.
            make, args, (state, slots) = rv[0], rv[1], rv[2]
            slots = dict(slots)
            slots["__globals__"] = {}
            return (make, (args[0], _NS_REF) + tuple(args[2:]), (state, slots)) + tuple(rv[3:])

    return Pickler, cp


# --- taking ----------------------------------------------------------------------

class _Out:
    """The child's end of the pipe: frames, written whole."""

    def __init__(self, fd):
        self.fd = fd

    def write_all(self, data):
        view = memoryview(data).cast("B")
        while view:
            try:
                n = os.write(self.fd, view)
            except InterruptedError:
                continue
            view = view[n:]

    def frame(self, tag, data=b""):
        n = memoryview(data).nbytes if not isinstance(data, (bytes, bytearray)) else len(data)
        self.write_all(tag + _HDR.pack(n))
        if n:
            self.write_all(data)


class _InBand:
    """The pickler's file: each write is a P frame."""

    def __init__(self, out):
        self.out = out

    def write(self, data):
        self.out.frame(b"P", data)
        return len(data)


class _Pieces:
    """A file whose writes are frames of one tag (the workspace tar)."""

    def __init__(self, out, tag):
        self.out, self.tag = out, tag

    def write(self, data):
        if data:
            self.out.frame(self.tag, data)
        return len(data)


def _label(exc):
    """A short reason for a global that could not be pickled."""
    if isinstance(exc, _Refused):
        return exc.label
    if isinstance(exc, RecursionError) or "recursion" in str(exc):
        return "too deeply nested"
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if len(text) > 80:
        text = text[:77] + "..."
    return text


def _special_refs():
    """id → (object, reduce value) of the objects kept by name."""
    special = {}
    for name in getattr(STATE, "bound", ()) or ():
        if name in NS:
            obj = NS[name]
            if not isinstance(obj, (types.ModuleType, str, int, float, tuple, type(None))):
                special[id(obj)] = (obj, (_bound, (name,)))
    mod = sys.modules.get("user_tools")
    for name, fn in (vars(mod).items() if mod is not None else ()):
        if callable(fn) and not name.startswith("_"):
            special[id(fn)] = (fn, (_saved, (name,)))
    return special


def _saved_names():
    mod = sys.modules.get("user_tools")
    if mod is None:
        return []
    return sorted(n for n, v in vars(mod).items() if callable(v) and not n.startswith("_"))


def _kept_names():
    """The globals a snapshot holds, in the session's order."""
    bound = set(getattr(STATE, "bound", ()) or ())
    mod = sys.modules.get("user_tools")
    out = []
    for name, value in list(NS.items()):
        if name in _SKIP or name in bound:
            continue
        if mod is not None and getattr(mod, name, None) is value and value is not None:
            continue  # a saved tool, loaded afresh
        out.append(name)
    return out


def _cells():
    """The cells' sources, for tracebacks and save_tool of restored functions."""
    out = {}
    for name, entry in list(linecache.cache.items()):
        if isinstance(name, str) and name.startswith("<cell-") and len(entry) == 4:
            out[name] = "".join(entry[2])
    return out


def _write(fd, call):
    """Writes the snapshot to fd (the child). Returns the summary."""
    out = _Out(fd)
    out.write_all(MAGIC)
    header = {"v": 1, "call": call, "taken": time.time(), "python": "%d.%d.%d" % sys.version_info[:3],
              "cell": getattr(STATE, "cell", 0), "cells": _cells(), "tools": _saved_names(), "jobs": _jobs_running()}
    out.frame(b"H", json.dumps(header).encode("utf-8", "surrogatepass"))
    Pickler, cp = _pickler_class()

    def buffer_callback(pb):
        try:
            raw = pb.raw()
        except BufferError:
            return True  # not contiguous: in band
        out.frame(b"B", raw)
        return False

    p = Pickler(_InBand(out), _special_refs(), buffer_callback)
    names, left = 0, []
    for name in _kept_names():
        try:
            value = NS[name]
        except KeyError:
            continue
        out.frame(b"N", name.encode("utf-8", "surrogatepass"))
        try:
            p.dump(value)
        except BaseException as e:
            label = _label(e)
            p.clear_memo()
            out.frame(b"X", label.encode("utf-8", "replace"))
            left.append("%s (%s)" % (name, label))
            continue
        out.frame(b"E")
        names += 1
    files = _tar_workspace(out)
    summary = {"names": names, "files": files, "left": left, "taken": header["taken"], "python": header["python"],
               "cell": header["cell"],
               "serializer": ("cloudpickle " + getattr(cp, "__version__", "?")) if cp is not None else "pickle"}
    out.frame(b"Z", json.dumps(summary).encode("utf-8", "surrogatepass"))
    return summary


def _tar_workspace(out):
    """Streams /workspace as a tar (regular files, folders and symlinks;
    the bridge's own spill folder is left out). Returns the file count."""
    import stat
    import tarfile
    if not os.path.isdir(WORKSPACE):
        return 0
    files = 0
    with tarfile.open(fileobj=_Pieces(out, b"F"), mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for root, dirs, names in os.walk(WORKSPACE):
            dirs.sort()
            if root == WORKSPACE and ".bridge" in dirs:
                dirs.remove(".bridge")
            for name in sorted(dirs) + sorted(names):
                path = os.path.join(root, name)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                    continue
                try:
                    tar.add(path, arcname=os.path.relpath(path, WORKSPACE), recursive=False)
                except OSError:
                    continue
                if stat.S_ISREG(st.st_mode):
                    files += 1
    return files


def _child(wfd, sfd, call):
    """The forked child: writes the snapshot to wfd and its summary to sfd,
    then _exits. It touches no other descriptor."""
    code = 1
    try:
        try:
            with open("/proc/self/oom_score_adj", "w") as f:
                f.write("1000")
        except OSError:
            pass
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            summary = _write(wfd, call)
        finally:
            os.close(wfd)
        _send_all(sfd, json.dumps(summary).encode("utf-8", "surrogatepass"))
        code = 0
    except BaseException as e:
        try:
            _send_all(sfd, json.dumps({"error": _label(e)}).encode("utf-8", "replace"))
        except BaseException:
            pass
    os._exit(code)


def _send_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class Snapshotter:
    """Takes snapshots and uploads them, one at a time. The main thread
    forks; the uploader thread streams. State is guarded by _lock."""

    def __init__(self, wake):
        self._wake = wake  # puts a wake-up in the main thread's queue
        self._lock = threading.Lock()
        self._busy = None  # the upload in progress (a dict), or None
        self._pending = None  # a call whose state awaits a snapshot (the uploader was busy)
        self._notes = []  # for the next result
        self.children = set()  # pids of snapshot children, spared by _kill_descendants
        self.last = None  # True once a snapshot was taken (or is on its way) and has not failed

    def notes(self):
        with self._lock:
            out, self._notes = self._notes, []
        return out

    def _note(self, text):
        with self._lock:
            if len(self._notes) < 4:
                self._notes.append(text)

    def forget(self):
        """After runtime.reset(): nothing pending; the host deleted the snapshot."""
        with self._lock:
            self._pending = None
        self.last = None

    def after_cell(self, call, code, reset):
        """Called by the main thread after a cell's reply: snapshots the
        session unless durability is not per cell, the cell asked for a
        reset, or the cell cannot have changed anything (cheap checks only)."""
        if MODE != "cell" or reset:
            return
        # A cell that only shows names and constants cannot have changed the
        # globals (a job could have), so the snapshot taken or on its way
        # holds them: no signature to compute, the common print() costs a
        # dict lookup.
        if self.last is not None and _pure(code) and not _jobs_running():
            return
        with self._lock:
            if self._busy is not None:
                self._pending = call
                return
            # This snapshot holds every call before it too: one that waited
            # would be taken later under its own, older call number, and
            # replace this one in the store.
            self._pending = None
        self._start(call, None, None)

    def idle(self):
        """Called by the main thread between cells: takes the snapshot a
        busy uploader made wait."""
        with self._lock:
            if self._pending is None or self._busy is not None:
                return
            call, self._pending = self._pending, None
        self._start(call, None, None)

    def take(self, call, target=None, timeout=None):
        """Takes a snapshot now and waits for it (runtime.snapshot,
        fork_session, and durability on exit). Returns the summary with the
        stored size, or raises."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            with self._lock:
                busy = self._busy
            if busy is None:
                break
            if not busy["done"].wait(None if deadline is None else max(0.0, deadline - time.monotonic())):
                raise ERROR("a snapshot is still being written; try again", kind="timeout")
        done = threading.Event()
        box = {}
        self._start(call, target, (done, box))
        if not done.wait(None if deadline is None else max(0.0, deadline - time.monotonic())):
            raise ERROR("the snapshot did not finish in time", kind="timeout")
        if "error" in box:
            raise ERROR(box["error"], kind=box.get("kind") or "server_error")
        return box["summary"]

    def _start(self, call, target, waiter):
        _pickler_class()  # imports cloudpickle here once, not in every child
        r, w = os.pipe()
        sr, sw = os.pipe()
        try:
            import fcntl
            fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, 1 << 20)  # fewer, larger reads
        except (ImportError, AttributeError, OSError):
            pass
        try:
            with warnings.catch_warnings():
                # Python 3.12+ warns about forking a threaded process; the
                # child runs no other thread's code and only pickles.
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
        except OSError as e:
            for fd in (r, w, sr, sw):
                os.close(fd)
            error = "the snapshot could not start: %s" % (e.strerror or e)
            if waiter is not None:
                waiter[1]["error"] = error
                waiter[0].set()
            else:
                self._note("call %s's state is not durable: %s" % (call, error))
            return
        if pid == 0:
            try:
                os.close(r)
                os.close(sr)
            finally:
                _child(w, sw, call)
        os.close(w)
        os.close(sw)
        up = {"pid": pid, "call": call, "target": target, "done": threading.Event()}
        if target is None:
            # This state is on its way (a failure forgets it): a cell that
            # changes nothing needs no other.
            self.last = True
        with self._lock:
            self._busy = up
            self.children.add(pid)
        t = threading.Thread(target=self._upload, args=(up, r, sr, waiter), name="snapshot", daemon=True)
        t.start()

    def _upload(self, up, r, sr, waiter):
        pid, call = up["pid"], up["call"]
        upload, error, kind, summary, stored = None, None, None, None, 0
        try:
            begin = LINK.call("snapshot_begin", {"call": call, "session": up["target"]})
            upload = begin["upload"]
            chunk = min(CHUNK, int(begin.get("chunk") or CHUNK))
            offset, synced = 0, 0
            prefix = ("#W %s " % upload).encode("ascii")
            while True:
                data = _read_chunk(r, chunk)
                if data is None:
                    raise _Stalled()
                if not data:
                    break
                # A data frame: the bytes as they are, no JSON and no
                # base64 on either side.
                LINK.send_data(b"%s%d" % (prefix, offset), data)
                offset += len(data)
                if offset - synced >= SYNC_EVERY:
                    # Learns whether the lines were taken (a cap stops the
                    # upload early); paces the writer to the host.
                    LINK.call("snapshot_write", {"upload": upload, "offset": offset})
                    synced = offset
            status = _reap(pid)
            info = _read_all(sr)
            try:
                summary = json.loads(info.decode("utf-8", "replace")) if info else {}
            except ValueError:
                summary = {}
            if status != 0 or "error" in summary or not summary:
                raise _ChildFailed(summary.get("error") or _status_text(status))
            end = LINK.call("snapshot_end", {"upload": upload, "call": call, "cell": summary["cell"], "names": summary["names"],
                                             "files": summary["files"], "left": summary["left"][:64],
                                             "taken": summary["taken"], "python": summary["python"]})
            stored = int((end or {}).get("bytes") or offset)
            upload = None
        except _Stalled:
            error, kind = "the snapshot's writer stopped for %ds and was ended" % STALL, "timeout"
        except _ChildFailed as e:
            error = "the snapshot failed: %s" % e
        except Exception as e:  # an MCPError from the host: over a cap, no store
            error = str(e)
            kind = getattr(e, "kind", None)
        finally:
            _end_child(pid)
            for fd in (r, sr):
                try:
                    os.close(fd)
                except OSError:
                    pass
            if error is not None and up["target"] is None:
                self.last = None
            if error is not None and waiter is None:
                # Said before the abort: the next cell's result carries it.
                self._note("call %s's state is not durable: %s" % (call, error))
            if upload is not None:
                try:
                    LINK.call("snapshot_abort", {"upload": upload})
                except Exception:
                    pass
            with self._lock:
                self.children.discard(pid)
                self._busy = None
                pending = self._pending is not None
            up["done"].set()
        if waiter is not None:
            done, box = waiter
            if error is None:
                box["summary"] = dict(summary, bytes=stored)
            else:
                box["error"], box["kind"] = error, kind
            done.set()
        if pending:
            self._wake()


class _Stalled(Exception):
    pass


class _ChildFailed(Exception):
    pass


def _read_chunk(fd, n):
    """Up to n bytes from the child's pipe; b"" at its end; None when it
    wrote nothing for STALL seconds."""
    import select
    parts, got = [], 0
    while got < n:
        ready, _, _ = select.select([fd], [], [], STALL)
        if not ready:
            return None
        try:
            data = os.read(fd, n - got)
        except InterruptedError:
            continue
        if not data:
            break
        parts.append(data)
        got += len(data)
    return b"".join(parts)


def _read_all(fd):
    import select
    parts = []
    while True:
        ready, _, _ = select.select([fd], [], [], 5.0)
        if not ready:
            break
        data = os.read(fd, 1 << 16)
        if not data:
            break
        parts.append(data)
    return b"".join(parts)


def _reap(pid):
    """The child's exit status (0: it succeeded); waits at most 10 s."""
    for _ in range(1000):
        try:
            got, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return 0  # reaped by someone else (a cell's os.wait): its summary decides
        if got == pid:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.01)
    return -signal.SIGKILL


def _end_child(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except OSError:
        return
    try:
        os.waitpid(pid, 0)
    except OSError:
        pass


def _status_text(code):
    if code == -signal.SIGKILL:
        return "its process was killed (most likely by the memory limit: the snapshot needs memory for what the next cell changes)"
    if code < 0:
        return "its process ended by signal %d" % -code
    return "its process exited with code %d" % code


_PURE_CALLS = frozenset(("print", "len", "repr", "type", "display", "dir", "help"))


def _simple(node):
    if isinstance(node, (ast.Constant, ast.Name)):
        return True
    if isinstance(node, ast.Attribute):
        return _simple(node.value)
    if isinstance(node, ast.Subscript):
        return _simple(node.value) and _simple(node.slice)
    if isinstance(node, ast.JoinedStr):
        return all(_simple(v) for v in node.values)
    if isinstance(node, ast.FormattedValue):
        return _simple(node.value) and (node.format_spec is None or _simple(node.format_spec))
    return False


_PURE = {}  # code → _pure(code), for the cells sent again and again


def _pure(code):
    """True when the cell can change nothing: only expressions that print
    or show names and constants (print(1), df, f"{x}")."""
    hit = _PURE.get(code)
    if hit is None:
        if len(_PURE) >= 64:
            _PURE.clear()
        hit = _PURE[code] = _pure_tree(code)
    return hit


def _pure_tree(code):
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return True  # it did not run
    for stmt in tree.body:
        if not isinstance(stmt, ast.Expr):
            return False
        v = stmt.value
        if _simple(v):
            continue
        if (isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id in _PURE_CALLS
                and all(_simple(a) for a in v.args) and all(_simple(k.value) for k in v.keywords)):
            continue
        return False
    return True


def _jobs_running():
    """Whether a background job runs (it may change the session at any time)."""
    jobs = sys.modules.get("mcp.jobs")
    try:
        return bool(jobs is not None and any(j.running for j in list(jobs._JOBS.values())))
    except Exception:
        return True


# --- loading -----------------------------------------------------------------------

class _Pull:
    """The snapshot as the host serves it (snapshot_read), read in order.
    The next chunk is asked for as soon as one arrives, so the host reads
    and sends it while this one is unpickled."""

    def __init__(self, size):
        self.size = size
        self.offset = 0  # where the next chunk to ask for starts
        self.buf = b""
        self.pos = 0
        self.ahead = None  # (offset, future) of the request in flight

    def _ask(self):
        if self.ahead is None and self.offset < self.size:
            want = min(CHUNK, self.size - self.offset)
            self.ahead = (self.offset, want, LINK.request("snapshot_read", {"offset": self.offset, "length": want}))
            self.offset += want

    def _next(self):
        self._ask()
        if self.ahead is None:
            return b""
        (at, want, fut), self.ahead = self.ahead, None
        reply = fut.result()
        # The bytes came just before the reply, as a data frame (a
        # sandbox built by hand gets them in the reply, as base64).
        if reply.get("data"):
            import base64
            data = base64.b64decode(reply["data"])
        else:
            data = LINK.take_data(at)
        if len(data) != want:
            raise ValueError("the host sent %d bytes at offset %d, not %d" % (len(data), at, want))
        self._ask()
        return data

    def read(self, n):
        out = []
        while n > 0:
            if self.pos >= len(self.buf):
                data = self._next()
                if not data:
                    break
                self.buf, self.pos = data, 0
            take = self.buf[self.pos:self.pos + n]
            self.pos += len(take)
            n -= len(take)
            out.append(take)
        return b"".join(out)

    def exactly(self, n):
        data = self.read(n)
        if len(data) != n:
            raise ValueError("the snapshot ends early")
        return data

    def into(self, n):
        """n bytes in a new bytearray: an out-of-band buffer, allocated once."""
        out = bytearray(n)
        view = memoryview(out)
        got = 0
        while got < n:
            data = self.read(min(n - got, CHUNK))
            if not data:
                raise ValueError("the snapshot ends early")
            view[got:got + len(data)] = data
            got += len(data)
        return out


class _Frames:
    def __init__(self, src):
        self.src = src
        self.peeked = None

    def next(self):
        """(tag, length) of the next frame; its data is read separately."""
        if self.peeked is not None:
            t, self.peeked = self.peeked, None
            return t
        head = self.src.exactly(9)
        return head[:1], _HDR.unpack(head[1:])[0]

    def data(self, n):
        return self.src.exactly(n)


class _Record:
    """The pickler's file of one global: its P frames, with its B frames
    taken on the way into the buffer queue."""

    def __init__(self, frames, buffers):
        self.frames = frames
        self.buffers = buffers
        self.begin()

    def begin(self):
        """Starts the next global's record."""
        self.cur = b""
        self.pos = 0
        self.end = None  # (E or X, X's reason) once read

    def _fill(self):
        while self.pos >= len(self.cur):
            if self.end is not None:
                return False
            tag, n = self.frames.next()
            if tag == b"P":
                self.cur, self.pos = self.frames.data(n), 0
            elif tag == b"B":
                self.buffers.append(self.frames.src.into(n))
            elif tag == b"E":
                self.end = (b"E", "")
            elif tag == b"X":
                self.end = (b"X", self.frames.data(n).decode("utf-8", "replace"))
            else:
                raise ValueError("unexpected frame %r inside a global" % tag)
        return True

    def read(self, n=-1):
        out = []
        while n != 0 and self._fill():
            take = self.cur[self.pos:] if n < 0 else self.cur[self.pos:self.pos + n]
            self.pos += len(take)
            if n > 0:
                n -= len(take)
            out.append(take)
        return b"".join(out)

    def readinto(self, b):
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)

    def readline(self):
        out = []
        while self._fill():
            i = self.cur.find(b"\n", self.pos)
            if i >= 0:
                out.append(self.cur[self.pos:i + 1])
                self.pos = i + 1
                break
            out.append(self.cur[self.pos:])
            self.pos = len(self.cur)
        return b"".join(out)

    def finish(self):
        """Reads to the global's end; (tag, reason)."""
        while self._fill():
            self.pos = len(self.cur)
        return self.end


class _Queue:
    """The out-of-band buffers, in order: the unpickler's buffers iterator."""

    def __init__(self):
        import collections
        self.q = collections.deque()

    def append(self, b):
        self.q.append(b)

    def __iter__(self):
        return self

    def __next__(self):
        if not self.q:
            raise StopIteration
        return self.q.popleft()


class _TarIn:
    """The tar stream of the F frames, for tarfile's stream mode."""

    def __init__(self, frames, first):
        self.frames = frames
        self.left = first
        self.done = False

    def read(self, n=-1):
        out = []
        while n != 0 and not self.done:
            if self.left == 0:
                tag, m = self.frames.next()
                if tag != b"F":
                    self.frames.peeked = (tag, m)
                    self.done = True
                    break
                self.left = m
                continue
            k = self.left if n < 0 else min(n, self.left)
            data = self.frames.data(k)
            self.left -= k
            if n > 0:
                n -= k
            out.append(data)
        return b"".join(out)


def restore(params, bound):
    """Loads the snapshot the host offers (params: size, call, lastCall)
    into the session; returns the note. Runs in the first
    cell of a new sandbox, on the main thread, interruptible like a cell."""
    _BOUND.clear()
    _BOUND.update(bound)
    frames = _Frames(_Pull(int(params["bytes"])))
    if frames.src.exactly(len(MAGIC)) != MAGIC:
        raise ValueError("not a snapshot of this bridge")
    tag, n = frames.next()
    if tag != b"H":
        raise ValueError("the snapshot has no header")
    header = json.loads(frames.data(n))
    for name, src in (header.get("cells") or {}).items():
        linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    import pickle
    queue = _Queue()
    rec = _Record(frames, queue)
    # One unpickler for every global, as one pickler wrote them: its memo
    # keeps objects shared between globals shared.
    u = pickle.Unpickler(rec, buffers=queue)
    names, failed, files = 0, [], 0
    summary = {}
    while True:
        tag, n = frames.next()
        if tag == b"N":
            name = frames.data(n).decode("utf-8", "surrogatepass")
            rec.begin()
            try:
                value = u.load()
            except Exception as e:
                end = rec.finish()
                # After a failure its read state is not trusted: a new one,
                # with the memo so far unless the pickler cleared its own (X).
                fresh = pickle.Unpickler(rec, buffers=queue)
                if end[0] != b"X":
                    fresh.memo = u.memo
                    failed.append("%s (%s)" % (name, _load_label(e)))
                u = fresh
                queue.q.clear()
                continue
            if rec.finish()[0] == b"X":
                u.memo.clear()
                continue
            NS[name] = value
            names += 1
        elif tag == b"F":
            files = _untar(_TarIn(frames, n))
        elif tag == b"Z":
            summary = json.loads(frames.data(n))
            break
        else:
            raise ValueError("unexpected frame %r" % tag)
    left = list(summary.get("left") or ()) + failed
    deleted = set(header.get("tools") or ()) - set(_saved_names())
    for name in _uses(deleted):
        left.append("%s (%s)" % (name, "refers to a saved tool deleted since"))
    note = "session '%s' restored to call %s of %s (%s UTC; %d names, %d files)" % (
        params.get("session") or "default", header.get("call"), max(int(params.get("lastCall") or 0), int(header.get("call") or 0)),
        time.strftime("%H:%M:%S", time.gmtime(header.get("taken") or 0)), names, files)
    if params.get("after"):
        note += " after: %s" % params["after"]
    if header.get("jobs"):
        note += "; a background job was running when it was taken: what it was writing may be caught mid-update"
    if header.get("python") and header["python"] != "%d.%d.%d" % sys.version_info[:3]:
        note += "; the snapshot was taken on Python %s" % header["python"]
    if left:
        note += "; not restored: " + ", ".join(left[:20])
        if len(left) > 20:
            note += " and %d more" % (len(left) - 20)
    return note


def _load_label(e):
    if isinstance(e, _Missing):
        return str(e)
    if isinstance(e, (AttributeError, ImportError, ModuleNotFoundError)):
        return "does not load in this image: %s" % _label(e)
    return _label(e)


def _uses(deleted):
    """Restored functions (and classes' methods) of the session that name
    one of the deleted saved tools."""
    if not deleted:
        return []
    out = []
    for name, value in list(NS.items()):
        code = getattr(value, "__code__", None)
        if isinstance(value, types.FunctionType) and code is not None and _code_names(code) & deleted:
            out.append(name)
    return out


def _code_names(code):
    names = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            names |= _code_names(c)
    return names


def _untar(src):
    """Extracts the workspace tar under /workspace: regular files, folders
    and symlinks, each path checked to stay inside it. Returns the count
    of regular files."""
    import tarfile
    files = 0
    root = os.path.realpath(WORKSPACE)
    with tarfile.open(fileobj=src, mode="r|") as tar:
        for m in tar:
            path = os.path.realpath(os.path.join(root, m.name))
            if path != root and not path.startswith(root + os.sep):
                continue
            try:
                if m.isdir():
                    os.makedirs(path, exist_ok=True)
                    os.chmod(path, m.mode & 0o7777 | 0o700)
                elif m.isreg():
                    os.makedirs(os.path.dirname(path), exist_ok=True)
                    f = tar.extractfile(m)
                    with open(path, "wb") as out:
                        while True:
                            data = f.read(1 << 20)
                            if not data:
                                break
                            out.write(data)
                    os.chmod(path, m.mode & 0o777)
                    os.utime(path, (m.mtime, m.mtime))
                    files += 1
                elif m.issym():
                    if not os.path.lexists(path):
                        os.symlink(m.linkname, path)
            except OSError:
                continue
    # tarfile stops at the end-of-archive blocks; the rest of the F frames go.
    src.read()
    return files
