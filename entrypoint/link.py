"""The worker's link: JSON-RPC 2.0 with the host, one frame per line.

The link is the socket the host handed the container, or its stdin and
stdout; the worker holds private copies of their descriptors. The reader
thread (read_loop) settles replies, queues exec frames for the main thread
and hands interrupts to on_interrupt; any thread sends. fatal and error are
the worker's (set when it loads this module).
"""
import contextvars
import io
import itertools
import json
import os
import queue
import re
import signal
import threading

_SIGINT = {signal.SIGINT}

# The token of the background job whose code runs here (jobs.py sets it in
# the job's thread; its asyncio tasks inherit it). Requests carry it as
# their meta, so the host serves them with the grant of the call that
# started the job, whenever they come.
JOB = contextvars.ContextVar("bridge_job", default=None)


def _request_frame(id_, method, params):
    frame = {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}
    job = JOB.get()
    if job is not None:
        frame["meta"] = {"job": job}
    return frame


_FUTURE = []  # concurrent.futures.Future, once a request needed it


def _future():
    """A new concurrent Future. concurrent.futures (and the logging it
    imports) loads on the first request, not at the sandbox's start."""
    if not _FUTURE:
        import concurrent.futures
        _FUTURE.append(concurrent.futures.Future)
    return _FUTURE[0]()


def fatal(message):
    """Ends the process after reporting message; the worker's replaces it."""
    os._exit(1)


# The id at the start of a host reply (jsonrpc2 writes it first).
_REPLY_ID = re.compile(rb'\s*\{\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")')


def error(message, **kw):
    """The exception for a failed request; the worker's builds an MCPError."""
    return RuntimeError(message)


class Link:
    """JSON-RPC over the link (a socket, or the container's stdio). Thread-safe; replies may come in any order."""

    def __init__(self, rfd, wfd, max_frame, max_in_flight, pending=b"", window=0):
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
        self.execs = queue.SimpleQueue()  # C: a lighter hand-off to the main thread than Queue
        self.exec_call = None  # the call of the last exec frame: the one an interrupt may name
        self.on_interrupt = lambda call: None  # the worker's: interrupts the main thread for call
        self.closed = False
        # With a window (the host's boot frame asks for it when its
        # transport buffers more than its write deadline sees), the bytes
        # read from the link are acknowledged, cumulatively from the first
        # byte after the boot frame, whenever a quarter window is unacked:
        # the host writes at most a window ahead of what was read here.
        self._ack_every = window // 4
        self._ack_cv = threading.Condition()
        self._consumed = len(pending)
        self._acked = 0
        # Data frames "#R <offset> <n>" + n bytes the host sent ahead of a
        # snapshot_read reply, by offset, until take_data collects them.
        self._data = {}
        self._dlock = threading.Lock()

    @staticmethod
    def _encode(obj):
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass")

    def _frame(self, obj):
        data = self._encode(obj)
        if len(data) > self.max_frame:
            raise error(
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
                fatal("frame write failed: %s" % (e.strerror or e))
            finally:
                if main:
                    signal.pthread_sigmask(signal.SIG_UNBLOCK, _SIGINT)

    def reply_exec(self, id_, call, result, runs):
        """Replies to exec call with result, the call's output not yet sent
        (runs of (stream, text)) in result["output"]: one frame for a call
        that printed little. When that frame would be over the cap, the
        output goes ahead of the reply as output notifications instead, in
        one write with it."""
        if runs:
            result["output"] = [{"stream": s, "data": t} for s, t in runs]
            data = self._encode(self.reply_frame(id_, result))
            if len(data) <= self.max_frame:
                self._write(data + b"\n")
                return
            del result["output"]
        frames = [{"jsonrpc": "2.0", "method": "output", "params": {"call": call, "stream": s, "data": t}} for s, t in runs]
        self.send_frames(frames + [self.reply_frame(id_, result)])

    def send_data(self, head, payload):
        """Sends one data frame (snapshot bulk that no JSON parser reads):
        the header line head + " <n>", then the n bytes of payload as they
        are, in one write like a frame."""
        if len(payload) > self.max_frame:
            raise error("Data frame of %d bytes exceeds the %d-byte limit" % (len(payload), self.max_frame), kind="invalid_arguments")
        self._write(b"".join((head, b" %d\n" % len(payload), payload)))

    def take_data(self, offset):
        """The bytes of the "#R" data frame at offset, which came before the
        snapshot_read reply that names them; b"" when none did."""
        with self._dlock:
            return self._data.pop(offset, b"")

    def _data_frame(self, line, f):
        """Reads the payload of the data frame whose header is line from f.
        A header without a usable count is skipped alone."""
        fields = line.split()
        try:
            n = int(fields[-1])
        except (ValueError, IndexError):
            return
        if n < 0 or n > self.max_frame:
            return
        data = f.read(n)
        if len(data) < n or fields[0] != b"#R" or len(fields) != 3:
            return
        try:
            offset = int(fields[1])
        except ValueError:
            return
        with self._dlock:
            if len(self._data) < 4:  # one read at a time; a few stray ones at most
                self._data[offset] = data

    def notify(self, method, params):
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def reply(self, id_, result):
        self._send(self.reply_frame(id_, result))

    def reply_error(self, id_, code, message):
        self._send({"jsonrpc": "2.0", "id": id_, "error": {"code": code, "message": message}})

    @staticmethod
    def reply_frame(id_, result):
        return {"jsonrpc": "2.0", "id": id_, "result": result}

    def _register(self, waiter):
        """Takes an in-flight slot and returns a new request id for waiter.
        Whoever pops the id from _pending (_drop, or the reader) releases
        the slot, so a full set of slots never waits on an event loop."""
        if self.closed:
            raise error("RPC channel closed", kind="transport")
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
        fut = _future()
        try:
            id_ = self._register(fut)
        except BaseException as e:
            fut.set_exception(e)
            return fut
        try:
            self._send(_request_frame(id_, method, params))
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
        import asyncio  # imported already: this coroutine runs on its loop
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        id_ = self._register(_LoopWaiter(loop, fut))
        try:
            self._send(_request_frame(id_, method, params))
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

    def _counted(self, n):
        with self._ack_cv:
            self._consumed += n
            if self._consumed - self._acked >= self._ack_every:
                self._ack_cv.notify()

    def _ack_loop(self):
        # Its own thread: the reader never waits for the write lock, so it
        # keeps reading while another thread writes a large frame.
        while True:
            with self._ack_cv:
                while self._consumed - self._acked < self._ack_every:
                    self._ack_cv.wait()
                self._acked = n = self._consumed
            self.notify("ack", {"bytes": n})

    def _reader(self):
        if self._ack_every <= 0:
            return os.fdopen(self._r, "rb")
        threading.Thread(target=self._ack_loop, name="link-ack", daemon=True).start()
        return io.BufferedReader(_CountedIO(self._r, self._counted), 1 << 16)

    def read_loop(self):
        with self._reader() as f:
            for line in self._lines(f):
                if line[:1] == b"#":
                    self._data_frame(line, f)
                    continue
                try:
                    msg = json.loads(line)
                except RecursionError:
                    self._too_deep(line)
                    continue
                except ValueError:
                    continue
                if isinstance(msg, dict):
                    self._dispatch(msg)
        self.closed = True
        with self._plock:
            pending, self._pending = self._pending, {}
        for waiter in pending.values():
            _settle(waiter, None, error("RPC channel closed", kind="transport"))
        os._exit(0)

    def _too_deep(self, line):
        """Fails the call a reply nested past Python's recursion limit answers,
        instead of leaving it waiting. The host refuses replies nested deeper
        than its own limit (actors/mcpwire MaxDepth), well below this one, so
        this is the last guard. The host writes a reply's id first."""
        m = _REPLY_ID.match(line)
        if m is None:
            return
        try:
            id_ = json.loads(m.group(1))
        except ValueError:
            return
        with self._plock:
            waiter = self._pending.pop(id_, None)
        if waiter is None:
            return
        self._slots.release()
        _settle(waiter, None, error("the reply is nested too deep for Python's json module", kind="server_error"))

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
                _settle(waiter, None, error(err.get("message", "RPC error"), kind=data.get("kind")))
            else:
                _settle(waiter, msg.get("result"), None)
        elif method == "exec":
            self.exec_call = (msg.get("params") or {}).get("call")
            self.execs.put(msg)
        elif method == "snapshot":  # durability on exit: the main thread takes one between cells
            self.execs.put(msg)
        elif method == "interrupt":
            call = (msg.get("params") or {}).get("call")
            if call is not None and call == self.exec_call:
                self.on_interrupt(call)
        elif method == "shutdown":
            os._exit(0)


class _CountedIO(io.FileIO):
    """The link's read end, telling on_read how many bytes each read got."""

    def __init__(self, fd, on_read):
        super().__init__(fd, "rb", closefd=True)
        self._on_read = on_read

    def readinto(self, b):
        n = super().readinto(b)
        if n:
            self._on_read(n)
        return n


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
