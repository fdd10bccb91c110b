"""Capture: one call's output, as the worker collects it.

HeadTail caps one output, a call's or a background job's; Capture keeps a
call's output in one; CaptureStream replaces sys.stdout and sys.stderr; Pump
turns OS-level writes to fds 1 and 2 into the active call's stderr. The
worker loads this module as mcp._capture and sets its hooks.
"""
import collections
import io
import itertools
import os
import select
import threading
import time

diag = print  # the worker's _diag: reports an error on the container's stderr
route = None  # jobs.route(stream, text): True when a background job took the text
# The fd pump's sync, called before each print so that what the cell wrote to
# fds 1 and 2 earlier (a subprocess, os.write) comes out before it, not after.
before_write = None
# The worker's hints.saw(text), given the call's output that shows a
# coroutine's repr (it contains CORO_TEXT): a coroutine printed, not awaited.
saw = None
CORO_TEXT = "<coroutine object "

SPILL_DIR = "/workspace/.bridge"
# One flood must not fill /workspace (128 MiB): each saved output is capped
# (and the calls' saved outputs together stay within Capture.SPILL_BUDGET).
SPILL_CAP = 16 << 20
# A head or tail cut moves to a line boundary this many bytes away at most
# (an eighth of the half at small caps).
LINE_NEAR = 256


class SpillFile:
    """One saved output file, as a call's capture and a background job's
    write it: text in order, each switch of stream marked with a "stream:"
    line, at most cap characters in all. A write that fails or reaches the
    cap closes the file and returns the reason; nothing is written after
    that. flush=True flushes every write, for files read while they grow."""

    def __init__(self, path, cap, flush=False):
        self.path = path
        self.cap = cap
        self.flush = flush
        self.file = open(path, "w", encoding="utf-8", errors="replace")
        self.written = 0
        self.stream = "stdout"
        self.last = "\n"

    def write(self, stream, text):
        """Appends text from stream; None, or why the file is now closed."""
        try:
            if stream != self.stream:
                text = ("" if self.last in ("\n", "") else "\n") + stream + ":\n" + text
                self.stream = stream
            room = self.cap - self.written
            if len(text) > room:
                self.file.write(text[:max(room, 0)])
                raise OSError("the saved output is capped at %d MiB" % (self.cap >> 20))
            self.file.write(text)
            if self.flush:
                self.file.flush()
            self.written += len(text)
            self.last = text[-1:]
            return None
        except OSError as e:
            self.close()
            return e.strerror or str(e)

    def close(self):
        try:
            self.file.close()
        except OSError:
            pass


class HeadTail:
    """One output under a cap of limit bytes, as a call's capture and a
    background job's keep it: the first limit/2 bytes (the head, taken by
    take_head as it is sent), then a rolling tail of the newest limit/2
    bytes, and a count of the bytes dropped between them. The whole output
    is kept too: in memory while it is within limit, then in a SpillFile at
    path (prepare() runs first, to make room). A cut happens on a UTF-8
    boundary, and at a line boundary when one is within `near` bytes (the
    head then ends a little early, the tail starts a little late); once the
    head is cut, everything else goes to the tail. Not thread-safe: its
    owner holds a lock around every use."""

    def __init__(self, limit, path, flush=False, prepare=lambda: None):
        self.limit = limit
        self.half = limit // 2
        self.near = min(LINE_NEAR, self.half // 8)  # how far a cut moves to a line boundary
        self.path = path
        self.flush = flush  # the SpillFile's: a job's file is read while it grows
        self.prepare = prepare
        self.total = 0  # bytes written, never reset
        self.log = []  # every (stream, text) while total <= limit
        self.spill = None  # a SpillFile once the output passed the cap
        self.spill_error = None  # why the whole output is not saved
        self.reset()

    def reset(self):
        """Starts a new head and tail; the whole output goes on."""
        self.head = []  # (stream, bytes) not taken yet
        self.head_bytes = 0  # bytes in self.head
        self.head_used = 0  # bytes the head took since the reset
        self.tail = collections.deque()  # [stream, bytes]
        self.tail_bytes = 0
        self.dropped = 0
        self.cut_stream = None  # the stream written when the head was full
        self.head_full = False  # the head took all it will take since the reset
        self.head_last = (None, b"")  # the stream and last byte of the head, taken or not
        self.tail_at_line = True  # the bytes dropped before the tail ended a line

    def write(self, stream, text):
        """Adds text from stream; True when the tail took some of it."""
        data = text.encode("utf-8", "replace")
        self.total += len(data)
        self.record(stream, text)
        back = []
        if not self.head_full:
            room = self.half - self.head_used
            if len(data) <= room:
                head = data
                self.head_used += len(data)
            else:
                # The first write past the cap closes the head, even when
                # the one before filled it exactly: only now is it known
                # that the output goes on.
                head, back = self._head_cut(data, room)
                self.head_used, self.head_full = self.half, True
            if head:
                self.head.append((stream, head))
                self.head_bytes += len(head)
                self.head_last = (stream, head[-1:])
            data = data[len(head):]
        if not data:
            return False
        if self.cut_stream is None:
            self.cut_stream = back[0][0] if back else stream
        for s, b in back:
            self.tail.append([s, b])
            self.tail_bytes += len(b)
        self.tail.append([stream, data])
        self.tail_bytes += len(data)
        while self.tail_bytes > self.half:
            extra = self.tail_bytes - self.half
            first = self.tail[0]
            if len(first[1]) <= extra:
                self.tail.popleft()
                cut = len(first[1])
            else:
                kept = _cut_tail(first[1], len(first[1]) - extra)
                cut = len(first[1]) - len(kept)
            self.tail_at_line = first[1][cut - 1:cut] == b"\n"
            if cut < len(first[1]):
                first[1] = first[1][cut:]
            self.tail_bytes -= cut
            self.dropped += cut
        return True

    def _head_cut(self, data, room):
        """(head, back) where the head is full: the part of data it takes
        (at most room bytes, up to a newline in its last self.near bytes
        if there is one) and the (stream, bytes) at the end of the head not
        taken yet that it gives back to the tail, so that it ends after a
        newline that is near: print writes a line's words one by one."""
        head = _line_head(data, room, self.near)
        if head.endswith(b"\n") or room >= self.near:
            return head, []
        budget, seen = self.near - room, 0
        for j in range(len(self.head) - 1, -1, -1):
            s, b = self.head[j]
            nl = b.rfind(b"\n", max(0, len(b) - (budget - seen)))
            if nl >= 0:
                back = ([(s, b[nl + 1:])] if nl + 1 < len(b) else []) + self.head[j + 1:]
                self.head[j] = (s, b[:nl + 1])
                del self.head[j + 1:]
                self.head_bytes -= sum(len(x) for _, x in back)
                self.head_last = (s, b"\n")
                return b"", back
            seen += len(b)
            if seen >= budget:
                break
        return head, []

    def _tail_to_line(self):
        """Drops the start of the tail up to the end of its first line when
        that line ends within self.near bytes and is not the last one: the
        tail then starts a line, as the marker before it does."""
        seen = 0
        for _, data in self.tail:
            if seen >= self.near:
                return
            nl = data.find(b"\n", 0, self.near - seen)
            if nl >= 0:
                n = seen + nl + 1
                if n < self.tail_bytes:
                    self._drop_tail(n)
                return
            seen += len(data)

    def _drop_tail(self, n):
        self.tail_bytes -= n
        self.dropped += n
        while n:
            first = self.tail[0]
            if len(first[1]) <= n:
                self.tail.popleft()
                n -= len(first[1])
            else:
                first[1] = first[1][n:]
                n = 0
        self.tail_at_line = True

    def record(self, stream, text):
        """Adds text to the whole output only (self.total already counts it)."""
        if self.spill is None and self.spill_error is None:
            if self.total <= self.limit:
                self.log.append((stream, text))
                return
            self._open_spill()
        if self.spill is not None:
            self._spill_write(stream, text)

    def _open_spill(self):
        log, self.log = self.log, []
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            self.prepare()
            self.spill = SpillFile(self.path, SPILL_CAP, flush=self.flush)
        except OSError as e:
            self.spill_error = e.strerror or str(e)
            return
        for stream, text in log:
            self._spill_write(stream, text)

    def _spill_write(self, stream, text):
        self.spill_error = self.spill.write(stream, text)
        if self.spill_error is not None:
            self.spill = None

    def take_head(self):
        """The head not taken yet, as (stream, text) runs."""
        head, self.head, self.head_bytes = self.head, [], 0
        return [(s, b.decode("utf-8", "replace")) for s, b in head]

    def drain(self):
        """The head not taken yet, a marker where the middle was dropped and
        the tail, as (stream, text) runs; then resets. The marker names the
        file that keeps the whole output, so the file is saved now if it
        was not yet."""
        runs = self.take_head()
        if self.dropped:
            if not self.tail_at_line:
                self._tail_to_line()
            # The head may have been sent already: its last byte says
            # whether the marker needs a line of its own (a switch of
            # stream starts one anyway).
            stream = self.cut_stream or "stdout"
            own = self.head_last[0] == stream and self.head_last[1] not in (b"", b"\n")
            runs.append((stream, ("\n" if own else "") + self.marker(self.dropped) + "\n"))
        runs.extend((s, b.decode("utf-8", "replace")) for s, b in self.tail)
        self.reset()
        return runs

    def marker(self, omitted):
        """The line (without its newline) that stands for omitted bytes:
        it names the file that keeps the whole output, so the file is saved
        now if it was not yet."""
        if self.spill is None and self.spill_error is None:
            self._open_spill()
        marker = "[... %d bytes omitted; full output in %s" % (omitted, self.path)
        if self.spill_error is not None:
            marker += "; full output not saved: " + self.spill_error
        return marker + " ...]"

    def close(self):
        if self.spill is not None:
            self.spill.close()


class Capture:
    """Collects one call's output in a HeadTail: the head is streamed to the
    host as it comes, the rest (marker and tail) is sent when the call ends."""

    KEEP_FILES = 20
    # All the calls' saved outputs together stay within a budget.
    SPILL_BUDGET = 48 << 20
    # Progress previews (see _preview); set per call by begin().
    progress = False
    preview_dirty = False
    preview_at = 0.0

    def __init__(self, link):
        self.link = link
        self.lock = threading.RLock()
        self.call = None
        self.out = None  # the call's HeadTail while a call is active
        self.discarded = 0
        self.wake = threading.Event()
        threading.Thread(target=self._flusher, daemon=True).start()

    def begin(self, call, n, limit):
        with self.lock:
            self.call = call
            self.out = HeadTail(limit, "%s/output-%d.txt" % (SPILL_DIR, n), prepare=lambda: _prune(
                SPILL_DIR, self.KEEP_FILES - 1, self.SPILL_BUDGET - SPILL_CAP))
            self.progress = False
            self.preview_dirty = False
            self.preview_at = 0.0

    def write(self, stream, text):
        if not text:
            return
        if saw is not None and CORO_TEXT in text:
            saw(text)
        with self.lock:
            if self.call is None:
                self.discarded += len(text.encode("utf-8", "replace"))
                return
            out = self.out
            grew = out.write(stream, text)
            if out.head_bytes >= 8192:
                self._flush(out.take_head())
            elif out.head:
                self.wake.set()
            if grew and self.progress:
                self._preview_soon()

    def _preview_soon(self):
        """Sends a progress preview now when the last one is PREVIEW_EVERY
        old, else leaves it to the flusher. The writer sends it itself: in a
        print flood the flusher thread can starve waiting for self.lock,
        which the printing thread takes back at once. self.lock is held."""
        if time.monotonic() - self.preview_at >= self.PREVIEW_EVERY:
            try:
                self._preview()
            except Exception as e:
                diag("progress preview not sent: %s: %s" % (type(e).__name__, e))
        elif not self.preview_dirty:
            self.preview_dirty = True
            self.wake.set()

    def _flush(self, runs):
        """Sends the (stream, text) runs."""
        for stream, text in _merge(runs):
            self.link.notify("output", {"call": self.call, "stream": stream, "data": text})

    def _flusher(self):
        while True:
            self.wake.wait(self.PREVIEW_EVERY if self.preview_dirty else None)
            time.sleep(0.02)
            self.wake.clear()
            with self.lock:
                if self.call is not None and self.out.head:
                    try:
                        self._flush(self.out.take_head())
                    except Exception as e:
                        diag("output not streamed: %s: %s" % (type(e).__name__, e))
                if self.call is not None and self.preview_dirty and time.monotonic() - self.preview_at >= self.PREVIEW_EVERY:
                    try:
                        self._preview()
                    except Exception as e:
                        diag("progress preview not sent: %s: %s" % (type(e).__name__, e))

    # Progress previews: while a call prints past the streamed head, the
    # newest output (at most PREVIEW_BYTES) goes to the host at most every
    # PREVIEW_EVERY seconds, for progress notifications only.
    PREVIEW_EVERY = 0.25
    PREVIEW_BYTES = 1024

    def _preview(self):
        parts, size = [], 0
        for _, data in reversed(self.out.tail):
            parts.append(data)
            size += len(data)
            if size >= self.PREVIEW_BYTES:
                break
        text = _cut_tail(b"".join(reversed(parts)), self.PREVIEW_BYTES).decode("utf-8", "replace")
        self.preview_dirty = False
        self.preview_at = time.monotonic()
        self.link.notify("progress", {"call": self.call, "data": text})

    def job_progress(self, text):
        """Sends text (a background job's newest output, which never enters
        this call's output) as the call's progress preview, when the call
        asked for progress: runtime.result() calls it while it waits."""
        with self.lock:
            if self.call is None or not self.progress:
                return
            self.preview_dirty = False
            self.preview_at = time.monotonic()
            self.link.notify("progress", {"call": self.call, "data": text})

    def finish(self, result_repr):
        """Ends the call: returns (truncated, bytes, repr, runs), runs the
        (stream, text) output not yet sent, which the caller sends with
        its reply."""
        with self.lock:
            out = self.out
            truncated = out.dropped > 0
            if result_repr is not None:
                rb = result_repr.encode("utf-8", "replace")
                out.total += len(rb)
                if len(rb) > out.half:
                    # The value's own marker, the only one for it: the
                    # output's marker stands for the output's cut alone.
                    truncated = True
                    out.record("stdout", "\n" + result_repr + "\n")
                    quarter = out.half // 2
                    head, tail = _line_head(rb, quarter, out.near), _line_tail(rb, quarter, out.near)
                    omitted = len(rb) - len(head) - len(tail)
                    result_repr = "%s%s%s\n%s" % (head.decode(), "" if head.endswith(b"\n") else "\n",
                                                   out.marker(omitted), tail.decode())
            runs = _merge(out.drain())
            out.close()
            self.call = None
            self.out = None
            return truncated, out.total, result_repr, runs


def _merge(chunks):
    """chunks with the neighbours of one stream joined."""
    return [(s, "".join(t for _, t in run)) for s, run in itertools.groupby(chunks, key=lambda c: c[0])]


def _cut_head(data, n):
    """The longest prefix of data of at most n bytes that ends on a UTF-8 boundary."""
    n = min(n, len(data))
    while n > 0 and n < len(data) and (data[n] & 0xC0) == 0x80:
        n -= 1
    return data[:n]


def _cut_tail(data, n):
    """The longest suffix of data of at most n bytes that starts on a UTF-8 boundary."""
    start = max(0, len(data) - n)
    while start < len(data) and (data[start] & 0xC0) == 0x80:
        start += 1
    return data[start:]


def _line_head(data, n, near):
    """_cut_head(data, n), ending instead after the last newline of its
    last near bytes when there is one."""
    n = min(n, len(data))
    nl = data.rfind(b"\n", max(0, n - near), n) if near else -1
    return data[:nl + 1] if nl >= 0 else _cut_head(data, n)


def _line_tail(data, n, near):
    """_cut_tail(data, n), starting instead after the first newline of its
    first near bytes when it does not start a line already and one is
    there (and is not its last byte)."""
    tail = _cut_tail(data, n)
    start = len(data) - len(tail)
    if near and start > 0 and data[start - 1:start] != b"\n":
        nl = data.find(b"\n", start, start + near)
        if 0 <= nl < len(data) - 1:
            return data[nl + 1:]
    return tail


def _prune(directory, keep, budget, prefix="output-", suffix=".txt"):
    """Deletes the oldest saved files (outputs, or images for display.py)
    until at most keep files and budget bytes remain."""
    try:
        paths = [os.path.join(directory, n) for n in os.listdir(directory)
                 if n.startswith(prefix) and n.endswith(suffix)]
        stats = sorted(((os.stat(p), p) for p in paths), key=lambda sp: sp[0].st_mtime)
        total = sum(st.st_size for st, _ in stats)
        while stats and (len(stats) > keep or total > budget):
            st, p = stats.pop(0)
            os.unlink(p)
            total -= st.st_size
    except OSError:
        pass


class CaptureStream(io.TextIOBase):
    """sys.stdout / sys.stderr replacement that feeds Capture."""

    def __init__(self, capture, stream, fd):
        self._capture = capture
        self._stream = stream
        self._fd = fd

    def write(self, s):
        if not isinstance(s, str):
            raise TypeError("write() argument must be str, not %s" % type(s).__name__)
        if before_write is not None:
            before_write()
        if route is None or not route(self._stream, s):
            self._capture.write(self._stream, s)
        return len(s)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        pass

    def isatty(self):
        return False

    def readable(self):
        return False

    def writable(self):
        return True

    def fileno(self):
        return self._fd

    @property
    def encoding(self):
        return "utf-8"

    @property
    def errors(self):
        return "replace"

    @property
    def name(self):
        return "<%s>" % self._stream

    @property
    def buffer(self):
        return _BinaryCapture(self)


class _BinaryCapture(io.RawIOBase):
    def __init__(self, text):
        self._text = text

    def writable(self):
        return True

    def write(self, b):
        self._text.write(bytes(b).decode("utf-8", "replace"))
        return len(b)


class Pump:
    """Feeds OS-level writes to fds 1 and 2 into the active call's stderr.

    sync() writes a marker through the same pipe and waits until the pump
    has read it, so everything written before the call ended is captured.
    It returns at once when there is nothing to wait for: the pipe is empty
    and the pump holds nothing it read. The pump marks itself busy before
    each read (on its own thread, under the GIL, after poll said the pipe is
    readable) and idle only once what it read is emitted, so data is always
    in the pipe or in a busy pump until it reached the capture.
    """

    MARK = b"\x00bridge-sync\x00"

    def __init__(self, fd, capture):
        self._fd = fd
        self._capture = capture
        self._synced = threading.Event()
        self._decoder = None
        self._busy = True  # until the pump thread first waits
        self._idle_poll = select.poll()  # sync's, under _sync_lock (a poll object serves one thread)
        self._idle_poll.register(fd, select.POLLIN)
        self._sync_lock = threading.RLock()  # reentrant: a signal handler may print during a sync
        threading.Thread(target=self._run, name="fd-pump", daemon=True).start()

    def sync(self, timeout=0.5):
        if not self._busy and not self._readable():
            return
        with self._sync_lock:
            self._synced.clear()
            try:
                os.write(1, self.MARK)
            except OSError:
                return
            self._synced.wait(timeout)

    def _readable(self):
        with self._sync_lock:
            return bool(self._idle_poll.poll(0))

    def _run(self):
        import codecs
        decoder = codecs.getincrementaldecoder("utf-8")("replace")
        pending = b""
        readable = select.poll()
        readable.register(self._fd, select.POLLIN)
        while True:
            # A partial marker, or a partial UTF-8 sequence in the decoder,
            # is held, not emitted yet.
            self._busy = bool(pending) or bool(decoder.getstate()[0])
            try:
                readable.poll()
            except InterruptedError:
                continue
            self._busy = True
            try:
                data = os.read(self._fd, 65536)
            except InterruptedError:
                continue
            if not data:
                return
            data = pending + data
            pending = b""
            while True:
                i = data.find(self.MARK)
                if i < 0:
                    break
                self._emit(decoder.decode(data[:i], final=True))
                data = data[i + len(self.MARK):]
                self._synced.set()
            # Keep a partial marker for the next read.
            keep = 0
            for k in range(len(self.MARK) - 1, 0, -1):
                if data.endswith(self.MARK[:k]):
                    keep = k
                    break
            if keep:
                data, pending = data[:-keep], data[-keep:]
            self._emit(decoder.decode(data))

    def _emit(self, text):
        if text:
            self._capture.write("stderr", text)
