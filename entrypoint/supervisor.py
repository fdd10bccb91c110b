"""Supervisor: the first process under the container's init.

It forks the worker, which runs user code and owns the link. The link is
the socket the host named in argv (podman hands it over as fd 3), or
else the container's stdin and stdout (stdout then carries frames only);
the worker reads host frames from a private copy and writes its frames
through another.
The worker is forked before any thread starts, so it skips a second
interpreter start, and no frame crosses an extra process. The worker acts
on interrupt, shutdown and stdin EOF itself; the supervisor only watches
stdin for hangup (poll, never reading), so a worker stuck where its link
reader cannot run still ends: 2 s after the host closed its side of the
link the supervisor kills it and exits. When the worker dies on its own, the
supervisor exits with the worker's status (128+signal for a signal), with
one exception: a worker the kernel's OOM killer ended (the container
cgroup's oom_kill counter rose) exits with OOM_EXIT, so the host can tell a
memory limit from any other SIGKILL (an external kill shows as 137). A
worker that exits with OOM_EXIT itself is reported as 1, so user code
cannot claim an OOM it did not cause.
"""
import os
import select
import signal
import sys
import threading
import types

GRACE = 2.0
OOM_EXIT = 99  # protocol.ExitOOMKilled
_OOM_COUNTERS = (
    ("/sys/fs/cgroup/memory.events", "oom_kill"),  # cgroup v2 (private cgroupns)
    ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill"),  # cgroup v1
)


def _oom_kills():
    """The container cgroup's OOM kill count, or None when unreadable."""
    for path, key in _OOM_COUNTERS:
        try:
            with open(path) as f:
                for line in f:
                    name, _, value = line.partition(" ")
                    if name == key:
                        return int(value)
        except (OSError, ValueError):
            continue
    return None


def main(boot, src, argv):
    ooms = _oom_kills()
    pending = _read_ahead(src)
    frames_in = os.dup(src.fileno())
    frames_out = os.dup(src.fileno() if argv else 1)  # a socket link goes both ways
    pid = os.fork()
    if pid == 0:
        _run_worker(dict(boot, pendingFrames=pending), frames_in, frames_out)
    os.close(frames_in)
    os.close(frames_out)
    # Stray prints must never reach the frame channel.
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    lock = threading.Lock()
    state = {"stopping": False}
    exited = threading.Event()  # set by the main thread, the only one that reaps the worker

    def stop():
        with lock:
            if state["stopping"]:
                return
            state["stopping"] = True
        if not exited.wait(GRACE):
            _kill(pid, signal.SIGKILL)
            exited.wait(GRACE)
        os._exit(0)

    def watch_hangup():
        # No input events asked: poll reports only a hangup (every writer of
        # stdin closed; the host shut down its side of a socket: POLLRDHUP),
        # POLLERR or POLLNVAL, and never consumes a frame.
        p = select.poll()
        p.register(src.fileno(), getattr(select, "POLLRDHUP", 0) if argv else 0)
        while True:
            try:
                if p.poll():
                    break
            except InterruptedError:
                continue
        stop()

    threading.Thread(target=watch_hangup, daemon=True).start()
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except ChildProcessError:
            status = 0
            break
        except InterruptedError:
            continue
    exited.set()
    with lock:
        if state["stopping"]:
            threading.Event().wait()  # stop() exits the process
    code = os.waitstatus_to_exitcode(status)
    if code == -signal.SIGKILL and ooms is not None and (_oom_kills() or 0) > ooms:
        os._exit(OOM_EXIT)
    if code == OOM_EXIT:
        code = 1
    os._exit(128 - code if code < 0 else code)


def _read_ahead(src):
    """The bytes src (the bootstrap's buffered reader of stdin) holds past
    the boot frame, without waiting for more: the worker reads them first.
    The host sends nothing before the ready frame, so this is b"" as a rule."""
    fd = src.fileno()
    os.set_blocking(fd, False)
    try:
        return src.peek(1 << 16) or b""
    except (BlockingIOError, AttributeError):
        return b""
    finally:
        os.set_blocking(fd, True)


def _run_worker(boot, rfd, wfd):
    """Runs the worker module in the forked child; never returns. A crash
    of the worker is written to the container's stderr (the worker's
    private copy once it has one), which the host keeps."""
    mod = types.ModuleType("worker")
    try:
        mod.__file__ = "<bridge/worker.py>"
        sys.modules["worker"] = mod
        exec(compile(boot["files"]["worker.py"], mod.__file__, "exec"), mod.__dict__)
        mod.main(dict(boot, main="worker"), None, [str(rfd), str(wfd)])
    except BaseException:
        import traceback
        try:
            os.write(getattr(mod, "DIAG", 2), ("bridge worker crashed:\n" + traceback.format_exc()).encode("utf-8", "replace"))
        except OSError:
            pass
    finally:
        os._exit(1)


def _kill(pid, sig):
    try:
        os.kill(pid, sig)
    except OSError:
        pass
