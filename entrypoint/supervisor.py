"""Supervisor: the first process under the container's init.

It owns the container's stdin and stdout (stdout carries frames only) and
relays frames to and from the worker, which runs user code. On stdin EOF or a
shutdown frame it closes the worker's input, waits 2 s, kills the worker and
exits; on an interrupt frame for the active call it sends SIGINT to the
worker. When the worker dies on its own, the supervisor exits with the
worker's status (128+signal for a signal), so the host sees, e.g., 137 for an
out-of-memory kill.
"""
import json
import os
import signal
import subprocess
import sys
import threading

GRACE = 2.0


def main(boot, src, argv):
    out = os.fdopen(os.dup(1), "wb")
    # Stray prints must never reach the frame channel.
    os.dup2(2, 1)
    sys.stdout = sys.stderr

    to_w_r, to_w_w = os.pipe()
    from_w_r, from_w_w = os.pipe()
    boot = dict(boot, main="worker")
    bootstrap = boot["files"]["bootstrap.py"]
    worker = subprocess.Popen(
        [sys.executable, "-u", "-c", bootstrap, str(to_w_r), str(from_w_w)],
        stdin=subprocess.DEVNULL,
        pass_fds=(to_w_r, from_w_w),
        close_fds=True,
    )
    os.close(to_w_r)
    os.close(from_w_w)
    to_worker = os.fdopen(to_w_w, "wb")
    to_worker.write(json.dumps({"jsonrpc": "2.0", "method": "boot", "params": boot}).encode() + b"\n")
    to_worker.flush()

    state = {"call": None, "stopping": False}
    lock = threading.Lock()

    def relay_out():
        with os.fdopen(from_w_r, "rb") as f:
            for line in iter(f.readline, b""):
                try:
                    out.write(line)
                    out.flush()
                except OSError:
                    return

    def stop():
        with lock:
            if state["stopping"]:
                return
            state["stopping"] = True
        try:
            to_worker.close()
        except OSError:
            pass
        try:
            worker.wait(GRACE)
        except subprocess.TimeoutExpired:
            worker.kill()
        os._exit(0)

    def relay_in():
        for line in iter(src.readline, b""):
            method = _method(line)
            if method == "interrupt":
                call = _param(line, "call")
                if call is not None and call == state["call"]:
                    try:
                        worker.send_signal(signal.SIGINT)
                    except OSError:
                        pass
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

    threading.Thread(target=relay_out, daemon=True).start()
    threading.Thread(target=relay_in, daemon=True).start()
    code = worker.wait()
    with lock:
        if state["stopping"]:
            threading.Event().wait()  # stop() exits the process
    os._exit(128 - code if code < 0 else code)


def _method(line):
    # Cheap checks first: only host notifications the supervisor acts on are parsed.
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
