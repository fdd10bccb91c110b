"""Background jobs: start now, collect later.

runtime.start(code_or_coroutine_or_callable) runs work in a thread of the
session and returns a Job at once; runtime.result(job, wait=...) in this or a
later run_python call prints the job's new output and returns its value;
runtime.jobs() lists them. A job outlives the call that started it (threads
survive between calls), so a run longer than the client's request limit is
collected by later, short calls.

Whatever a job's thread writes to sys.stdout / sys.stderr goes to the job's
own capture, never to the active call: the capture keeps a head and a tail of
at most maxOutputBytes/2 between two collections, and once the job's output
exceeds that cap, all of it is saved to /workspace/.bridge/job-{n}.txt
(capped like the call spill files). The worker loads this module and calls
install(); CaptureStream asks route() first.

A job keeps the grant of the call that started it: the host issues that
call a token (job_scope), the job's thread sends it with every request
(link.JOB), and the host serves them with that call's servers and
tool-call count whenever they come. The worker keeps the job's mcp_<alias>
proxies in the session's globals while it runs (held()). While
runtime.result() waits, the job's newest output goes to the waiting call's
progress notifications.
"""
import ast
import collections
import linecache
import sys
import threading
import time

MAX_JOBS = 32
SPILL_DIR = "/workspace/.bridge"
RECENT_CHARS = 1024  # the newest output kept for progress previews (the host keeps 1 KiB of it)
PROGRESS_EVERY = 0.25  # seconds between previews while result() waits

_LOCAL = threading.local()  # .job: the Job whose thread this is
_LOCK = threading.Lock()
_JOBS = collections.OrderedDict()  # id -> Job, oldest first
_COUNT = [0]
_CO_COROUTINE = 0x80


# What install() passes in: the worker's helpers and the session's objects.
_RT = None  # mcp.runtime
_HEAD_TAIL = None  # capture.HeadTail: one job's capped output
_FORMAT_ERROR = None  # the error line of an exception ("ValueError: bad")
_FILTER_TB = None  # drops the sandbox's own frames from an exception's traceback
_PROGRESS = None  # sends text as the active call's progress preview
_JOB_TOKEN = None  # link.JOB: the grant token a job's thread sends
_NS = None  # the session's globals, where code jobs run
_LIMIT = 0  # a job's output cap, between two collections


def route(stream, text):
    """Sends text to the capture of the job running this thread, if any;
    False when the thread is not a job's (the active call captures it)."""
    job = getattr(_LOCAL, "job", None)
    if job is None:
        return False
    job._out.write(stream, text)
    return True


class _Output:
    """One job's capture: a HeadTail collected by drain(), plus the newest
    output for progress previews. Thread-safe."""

    def __init__(self, n, limit):
        self.lock = threading.Lock()
        self.out = _HEAD_TAIL(limit, "%s/job-%d.txt" % (SPILL_DIR, n), flush=True)
        self.recent = ""  # the newest output since the last drain, for progress previews
        self.seq = 0  # bumped on every write
        self.drained_seq = 0  # seq at the last drain

    def write(self, stream, text):
        if not text:
            return
        with self.lock:
            self.seq += 1
            self.recent = (self.recent + text[-RECENT_CHARS:])[-RECENT_CHARS:]
            self.out.write(stream, text)

    def drain(self):
        """The output since the last drain as (stream, text) runs, with an
        omission marker where the middle was cut."""
        with self.lock:
            self.recent = ""
            self.drained_seq = self.seq
            return self.out.drain()

    def preview(self):
        """(seq, the newest output) for a progress preview."""
        with self.lock:
            return self.seq, self.recent

    def close(self):
        with self.lock:
            self.out.close()


class Job:
    """A background job: what runtime.start() returns and runtime.result() takes."""

    def __init__(self, n, limit, token, grant):
        self.id = "job-%d" % n
        self._n = n
        self._token = token  # the host's token for the starting call's grant
        self._grant = grant  # mcp_<alias> -> proxy of that grant
        self._out = _Output(n, limit)
        self._started = time.monotonic()
        self._ended = None
        self._finished = threading.Event()
        self._value = None
        self._error = None

    @property
    def running(self):
        return not self._finished.is_set()

    def __repr__(self):
        if self.running:
            return "<Job %s: running for %.1fs; collect with runtime.result(%r, wait=...)>" % (
                self.id, time.monotonic() - self._started, self.id)
        took = self._ended - self._started
        if self._error is not None:
            return "<Job %s: failed after %.1fs: %s>" % (self.id, took, _FORMAT_ERROR(self._error))
        return "<Job %s: done in %.1fs>" % (self.id, took)

    def _run(self, target):
        _LOCAL.job = self
        _JOB_TOKEN.set(self._token)
        try:
            self._value = target()
        except SystemExit as e:
            if e.code not in (None, 0):
                self._error = e
        except BaseException as e:
            _FILTER_TB(e)
            self._error = e
        finally:
            _LOCAL.job = None
            self._out.close()
            self._ended = time.monotonic()
            self._finished.set()


def _code_target(code, n, ns):
    filename = "<job-%d>" % n
    linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
    tree = ast.parse(code, filename, "exec")
    name = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        name = "__bridge_job_%d__" % n
        expr = tree.body[-1]
        tree.body[-1] = ast.copy_location(
            ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=expr.value), expr)
        ast.fix_missing_locations(tree)
    co = compile(tree, filename, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)

    def target():
        if co.co_flags & _CO_COROUTINE:
            _run_coroutine(eval(co, ns))
        else:
            exec(co, ns)
        return ns.pop(name, None) if name else None
    return target


def _run_coroutine(coro):
    import asyncio  # loaded on first use, not at the sandbox's start
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(coro)
    finally:
        asyncio.set_event_loop(None)
        loop.close()


def start(work, *args, **kwargs):
    """Starts work in the background and returns a Job at once. work is code
    (a string, run in the session's globals like a cell; its last expression
    is the value), a coroutine, or a callable called with args and kwargs
    (awaited when it returns an awaitable). Collect it with
    runtime.result(job) in this or a later call; it ends with the session."""
    import inspect  # loaded on first use, not at the sandbox's start
    rt = _RT
    if isinstance(work, str):
        pass
    elif inspect.iscoroutine(work):
        if args or kwargs:
            raise rt.MCPError("start(coroutine) takes no further arguments")
    elif not callable(work):
        raise rt.MCPError("start() takes code (a string), a coroutine or a callable, not %s" % type(work).__name__)
    token, grant = _grant(rt)
    with _LOCK:
        _COUNT[0] += 1
        n = _COUNT[0]
    # Built before the job is registered: a SyntaxError leaves no job behind.
    if isinstance(work, str):
        target = _code_target(work, n, _NS)
    elif inspect.iscoroutine(work):
        def target():
            return _run_coroutine(work)
    else:
        def target():
            value = work(*args, **kwargs)
            if inspect.isawaitable(value):
                async def wrap():
                    return await value
                value = _run_coroutine(wrap())
            return value
    with _LOCK:
        _forget_finished()
        if len(_JOBS) >= MAX_JOBS:
            raise rt.MCPError("Too many background jobs (%d running); collect or wait for one" % MAX_JOBS)
        job = Job(n, _LIMIT, token, grant)
        _JOBS[job.id] = job
    threading.Thread(target=job._run, args=(target,), name=job.id, daemon=True).start()
    return job


def _grant(rt):
    """The token and proxies of the grant a new job keeps: its parent job's
    when a job starts it, else the current call's (one job_scope round
    trip per call; MCPError when no call is active)."""
    parent = getattr(_LOCAL, "job", None)
    if parent is not None:
        return parent._token, parent._grant
    call = rt._CALL
    if call.get("job_token") is None:
        call["job_token"] = rt._call("job_scope", {})["token"]
    return call["job_token"], {"mcp_" + s["alias"]: call["proxies"][s["name"]] for s in call["servers"]}


def held():
    """The proxy globals the grants of running jobs bind, oldest job first:
    the worker keeps them in the session's globals while a job may use them."""
    out = {}
    with _LOCK:
        for job in _JOBS.values():
            if job.running:
                out.update(job._grant)
    return out


def _forget_finished():
    """Drops finished jobs, oldest first, while the registry is full."""
    for jid in [j for j, job in _JOBS.items() if not job.running]:
        if len(_JOBS) < MAX_JOBS:
            return
        del _JOBS[jid]


def _lookup(job):
    rt = _RT
    if isinstance(job, Job):
        return job
    key = "job-%d" % job if isinstance(job, int) and not isinstance(job, bool) else job
    with _LOCK:
        found = _JOBS.get(key) if isinstance(key, str) else None
    if found is None:
        raise rt.MCPError("No background job %r; runtime.jobs() lists them" % (job,))
    return found


def result(job, wait=0):
    """Prints the job's output since the last collection and returns its
    value once it has finished (re-raising its exception); while it runs,
    returns the Job. wait: seconds to wait for it to finish first (None:
    until it finishes; the call's timeout still applies)."""
    job = _lookup(job)
    if wait is None or wait > 0:
        _wait(job, wait)
    for stream, text in job._out.drain():
        getattr(sys, stream).write(text)
    if job.running:
        return job
    if job._error is not None:
        raise job._error
    return job._value


def _wait(job, wait):
    """Waits for job to finish, at most wait seconds (None: no bound). On
    the main thread, the job's newest output goes meanwhile to the call's
    progress notifications (output since the last collection first), so a
    client sees the job move, not only that the call is running."""
    end = None if wait is None else time.monotonic() + wait
    main = threading.current_thread() is threading.main_thread()
    seen = job._out.drained_seq
    while True:
        step = PROGRESS_EVERY if end is None else min(PROGRESS_EVERY, end - time.monotonic())
        if step <= 0 or job._finished.wait(step):
            return
        if main:
            seq, text = job._out.preview()
            if seq != seen:
                seen = seq
                _PROGRESS(text)


def jobs():
    """Every background job this session knows, oldest first."""
    with _LOCK:
        return list(_JOBS.values())


def install(rt, head_tail, format_error, filter_tb, progress, job_token, namespace, call_limit):
    """Adds start, result and jobs to rt (mcp.runtime) and keeps what the
    jobs need: head_tail (capture.HeadTail), format_error(exc) (its error
    line), filter_tb(exc) (drops the sandbox's frames), progress(text) (the
    active call's progress preview), job_token (link.JOB), namespace (the
    session's globals) and call_limit (a call's output cap in bytes)."""
    global _RT, _HEAD_TAIL, _FORMAT_ERROR, _FILTER_TB, _PROGRESS, _JOB_TOKEN, _NS, _LIMIT
    _RT, _HEAD_TAIL, _FORMAT_ERROR, _FILTER_TB = rt, head_tail, format_error, filter_tb
    _PROGRESS, _JOB_TOKEN, _NS = progress, job_token, namespace
    # Half the call cap, so a collection's head, marker and tail fit within
    # the collecting call's own cap.
    _LIMIT = call_limit // 2
    for fn in (start, result, jobs):
        setattr(rt, fn.__name__, fn)
        if fn.__name__ not in rt.__all__:
            rt.__all__.append(fn.__name__)
    rt.Job = Job
