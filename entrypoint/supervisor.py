"""Supervisor: the first process under the container's init.

It owns the container's stdin and relays host frames to the worker, which
runs user code and writes its frames to the container's stdout through a
private descriptor (stdout carries frames only). The worker is
forked before any thread starts, so it skips a second interpreter start. On
stdin EOF or a shutdown frame the supervisor closes the worker's input,
waits 2 s, kills the worker and exits; on an interrupt frame for the active
call it sends SIGINT to the worker. When the worker dies on its own, the
supervisor exits with the worker's status (128+signal for a signal), with
one exception: a worker the kernel's OOM killer ended (the container
cgroup's oom_kill counter rose) exits with OOM_EXIT, so the host can tell a
memory limit from any other SIGKILL (an external kill shows as 137). A
worker that exits with OOM_EXIT itself is reported as 1, so user code
cannot claim an OOM it did not cause.
"""
import json
import os
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
    to_w_r, to_w_w = os.pipe()
    # The worker writes its frames straight to the container's stdout through
    # a private copy; only the host→worker direction is relayed, so the
    # supervisor can act on interrupt and shutdown frames.
    frames_out = os.dup(1)
    pid = os.fork()
    if pid == 0:
        os.close(to_w_w)
        _run_worker(boot, to_w_r, frames_out)
    os.close(to_w_r)
    os.close(frames_out)
    # Stray prints must never reach the frame channel.
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    to_worker = os.fdopen(to_w_w, "wb")
    state = {"call": None, "stopping": False}
    lock = threading.Lock()
    exited = threading.Event()  # set by the main thread, the only one that reaps the worker

    def stop():
        with lock:
            if state["stopping"]:
                return
            state["stopping"] = True
        try:
            to_worker.close()
        except OSError:
            pass
        if not exited.wait(GRACE):
            _kill(pid, signal.SIGKILL)
            exited.wait(GRACE)
        os._exit(0)

    def relay_in():
        for line in iter(src.readline, b""):
            method = _method(line)
            if method == "interrupt":
                call = _param(line, "call")
                if call is not None and call == state["call"]:
                    _kill(pid, signal.SIGINT)
                continue
            if method == "shutdown":
                break
            if method == "exec":
                state["call"] = _param(line, "call")
            try:
                to_worker.write(line if line.endswith(b"\n") else line + b"\n")
                to_worker.flush()
            except OSError:
                break
        stop()

    threading.Thread(target=relay_in, daemon=True).start()
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


def _run_worker(boot, rfd, wfd):
    """Runs the worker module in the forked child; never returns."""
    try:
        mod = types.ModuleType("worker")
        mod.__file__ = "<bridge/worker.py>"
        sys.modules["worker"] = mod
        exec(compile(boot["files"]["worker.py"], mod.__file__, "exec"), mod.__dict__)
        mod.main(dict(boot, main="worker"), None, [str(rfd), str(wfd)])
    finally:
        os._exit(1)


def _kill(pid, sig):
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def _method(line):
    # Cheap checks first: only host frames the supervisor acts on are parsed.
    if b'"interrupt"' in line or b'"shutdown"' in line or b'"exec"' in line:
        try:
            return json.loads(line).get("method")
        except ValueError:
            return None
    return None


def _param(line, key):
    try:
        return json.loads(line).get("params", {}).get(key)
    except (ValueError, AttributeError):
        return None
