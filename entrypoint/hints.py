"""mcp._hints: the fix for the usual dead ends of data work, one line each,
as mcp.runtime._explain gives one for network access.

- A coroutine that never ran: a cell's value, a printed one, or one dropped
  without `await`, made by a proxy, a runtime helper or the user's own code.
  The call's result gets a note (end()), and the coroutine is closed, never
  awaited for the user, so Python's "never awaited" RuntimeWarning does not
  land in the output (install() routes that warning here).
- An uncaught exception (explain(), which adds a "note: ..." line to it):
  ModuleNotFoundError (nothing can be installed; what the image has),
  FileNotFoundError for a path that looks like the host's (/home/...,
  /Users/...), and AttributeError, TypeError or KeyError on the dict a proxy
  returned as a tool's structured content (the key to use) or on a
  coroutine (add `await`).

The worker loads it, calls install() and drives begin() and end() around
each cell; mcp.runtime reports each proxy's structured result
(structured()); capture.py shows it call output that holds a coroutine's
repr (saw()). A hint is a courtesy: the worker catches any failure in here.
"""
import linecache
import os
import re
import sys
import threading
import types

# Code whose coroutines a note names: the runtime's proxies and helpers, the
# cells and the saved tools. A library's own stays Python's warning.
_OUR_CODE = ("<bridge/", "<cell-", "<user_tools/")
_CORO_RE = re.compile(r"<coroutine object ([\w.<>]{1,200}) at 0x([0-9a-fA-F]{1,16})>")
_MAIN = threading.main_thread()
_USER_FILES = ("<cell-", "<user_tools/")
_HOST_DIRS = ("/home/", "/Users/")
_PATH_RE = re.compile(r"(?:/home|/Users)/[^\s'\"]+")
# Shown first when the image has them; the rest follow in name order.
_WELL_KNOWN = ("numpy", "pandas", "scipy", "sklearn", "matplotlib", "PIL", "statsmodels", "seaborn", "polars",
               "pyarrow", "sympy", "networkx", "bs4", "lxml", "yaml", "openpyxl", "requests")
_SHOWN_PACKAGES = 10
_STRUCTURED_KEEP = 64  # the newest structured results a note can recognise


class _State:
    active = False  # a cell of a call runs on the main thread
    names = []  # the un-awaited coroutines' names, in order
    printed = set()  # ids of coroutines whose repr the call's output shows


_STATE = _State()
_LOCK = threading.Lock()
_STRUCTURED = {}  # id(dict) -> (tool, keys): proxies' structured results, newest last
_PACKAGES = []  # the image's packages, once computed


def install():
    """Routes Python's "coroutine ... was never awaited" warning through
    _unawaited (CPython looks warnings._warn_unawaited_coroutine up each
    time it warns)."""
    import warnings
    orig = getattr(warnings, "_warn_unawaited_coroutine", None)
    if orig is None:
        return

    def unawaited(coro):
        if not _unawaited(coro):
            orig(coro)

    warnings._warn_unawaited_coroutine = unawaited


def _ours(coro):
    code = getattr(coro, "cr_code", None)
    return code is not None and code.co_filename.startswith(_OUR_CODE)


def _name(coro):
    return (getattr(coro, "__qualname__", None) or "coroutine").rsplit(".", 1)[-1]


def _unawaited(coro):
    """Takes the warning for a coroutine of ours dropped without running
    during a cell: the call's note says it. False leaves it to Python."""
    if not (_STATE.active and threading.current_thread() is _MAIN and _ours(coro)):
        return False
    _add_name(_name(coro))
    return True


def _add_name(name):
    if name not in _STATE.names:
        _STATE.names.append(name)


def begin():
    """Starts a cell's notes (main thread)."""
    _STATE.names, _STATE.printed = [], set()
    _STATE.active = True


def saw(text):
    """Keeps the id of each coroutine whose repr text, output of the active
    call, shows: end() closes and notes it if the session's globals hold it
    and it never ran. One that was a temporary was dropped by now, and the
    warning it raised noted it."""
    if not _STATE.active:
        return
    for m in _CORO_RE.finditer(text):
        _STATE.printed.add(int(m.group(2), 16))


def value(v):
    """Closes and notes the coroutines that never ran which a cell's value
    is or holds (one level down)."""
    for coro in _coroutines_in(v):
        _close(coro)


def _unstarted(coro):
    """Whether coro never ran: not finished or closed (no frame), not
    running, not suspended at an await."""
    return coro.cr_frame is not None and not coro.cr_running and not getattr(coro, "cr_suspended", False)


def _coroutines_in(v, most=1000):
    """The coroutines that never ran which v is or holds (one level down)."""
    if isinstance(v, types.CoroutineType):
        return [v] if _unstarted(v) else []
    if isinstance(v, dict):
        items = v.values()
    elif isinstance(v, (list, tuple, set, frozenset)):
        items = v
    else:
        return []
    out = []
    for i, x in enumerate(items):
        if i >= most:
            break
        if isinstance(x, types.CoroutineType) and _unstarted(x):
            out.append(x)
    return out


def _close(coro):
    _add_name(_name(coro))
    try:
        coro.close()
    except Exception:  # noqa: BLE001 (a coroutine closing badly is not the cell's failure)
        pass


def end(ns):
    """Ends the cell: closes the printed coroutines the session's globals
    still hold, and returns the call's notes (a list, empty or one line)."""
    _STATE.active = False
    if _STATE.printed:
        for v in list(ns.values()):
            for coro in _coroutines_in(v):
                if id(coro) in _STATE.printed:
                    _close(coro)
    names, _STATE.names, _STATE.printed = _STATE.names, [], set()
    return [_await_note(names)] if names else []


def _await_note(names):
    shown = ", ".join("`%s(...)`" % n for n in names[:5])
    if len(names) > 5:
        shown += " and %d more" % (len(names) - 5)
    if len(names) == 1:
        return "%s was not awaited, so it did not run: add `await` before the call" % shown
    return "%s were not awaited, so they did not run: add `await` before each call" % shown


# --- structured results -------------------------------------------------------

def structured(v, tool):
    """Remembers that a proxy of tool returned v, its structured content."""
    if not isinstance(v, dict):
        return
    with _LOCK:
        _STRUCTURED.pop(id(v), None)
        _STRUCTURED[id(v)] = (tool, frozenset(v))
        while len(_STRUCTURED) > _STRUCTURED_KEEP:
            del _STRUCTURED[next(iter(_STRUCTURED))]


def _tool_of(v):
    """The tool whose structured content v is, or None."""
    if not isinstance(v, dict):
        return None
    with _LOCK:
        rec = _STRUCTURED.get(id(v))
    return rec[0] if rec is not None and rec[1] == frozenset(v) else None


# --- exceptions -------------------------------------------------------------

def explain(exc):
    """Adds a note with the fix to an uncaught exception of the kinds above."""
    note = None
    if isinstance(exc, ModuleNotFoundError):
        note = _module_note(exc)
    elif isinstance(exc, (AttributeError, TypeError, KeyError)):
        note = _coroutine_note(exc) or _structured_note(exc)
    else:
        e, seen = exc, set()
        while e is not None and id(e) not in seen and note is None:
            seen.add(id(e))
            if isinstance(e, FileNotFoundError):
                note = _host_path_note(e)
            e = e.__cause__ or e.__context__
    if note:
        exc.add_note("note: " + note)


def _module_note(exc):
    name = exc.name
    if not isinstance(name, str) or not name or name.startswith(("mcp.", ".")) or name == "mcp":
        return None
    import importlib.util
    try:
        if importlib.util.find_spec(name.split(".")[0]) is not None:
            return None  # a missing submodule of a package the image has
    except (ImportError, ValueError):
        pass
    have = _packages()
    if not have:
        return "packages cannot be installed (no network, no pip), and the image has only the standard library"
    shown = ", ".join(have[:_SHOWN_PACKAGES])
    if len(have) > _SHOWN_PACKAGES:
        shown += " and %d more" % (len(have) - _SHOWN_PACKAGES)
    return "packages cannot be installed (no network, no pip); the image has " + shown


def _packages():
    """The top-level packages of the site directories on sys.path: the
    well-known ones first, then the others by name. Computed once."""
    if _PACKAGES:
        return _PACKAGES[0]
    import pkgutil
    dirs = [p for p in sys.path if isinstance(p, str) and os.path.basename(p) in ("site-packages", "dist-packages")]
    names = set()
    try:
        for m in pkgutil.iter_modules([d for d in dirs if os.path.isdir(d)]):
            if m.ispkg and not m.name.startswith("_"):
                names.add(m.name)
    except (OSError, ImportError):
        pass
    first = [n for n in _WELL_KNOWN if n in names]
    have = first + sorted(names.difference(first), key=str.lower)
    _PACKAGES.append(have)
    return have


def _host_path_note(exc):
    path = exc.filename
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if not isinstance(path, str) or not path.startswith(_HOST_DIRS):
        m = _PATH_RE.search(str(exc))
        if m is None:
            return None
        path = m.group(0)
    if _under_mount(path):
        return None  # a folder mounted into the sandbox: the file is just not there
    return ("%s looks like a host path, and the sandbox sees no host files: read it through an MCP server that can, "
            "or have its folder mounted (MCP_BRIDGE_MOUNTS, a bridge setting)" % _shown(path))


def _under_mount(path):
    """Whether path is under a mount point other than / (a folder of
    MCP_BRIDGE_MOUNTS, in a container)."""
    try:
        with open("/proc/self/mountinfo", "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return False
    for line in lines:
        fields = line.split(" ")
        if len(fields) < 5:
            continue
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])
        if point != "/" and (path == point or path.startswith(point.rstrip("/") + "/")):
            return True
    return False


def _shown(s, most=120):
    return repr(s if len(s) <= most else s[:most] + "...")


def _user_line(exc):
    """(frame, line number) of the innermost user code (a cell or a saved
    tool) in exc's traceback, or (None, None)."""
    tb, frame, line = exc.__traceback__, None, None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(_USER_FILES):
            frame, line = tb.tb_frame, tb.tb_lineno
        tb = tb.tb_next
    return frame, line


def _line_text(exc):
    frame, line = _user_line(exc)
    return linecache.getline(frame.f_code.co_filename, line) if frame is not None else ""


def _line_values(exc):
    """(name, value) of each name on the failing line of the user code in
    exc's traceback, in order."""
    frame, line = _user_line(exc)
    if frame is None:
        return []
    text = linecache.getline(frame.f_code.co_filename, line)
    out, seen = [], set()
    for name in re.findall(r"[A-Za-z_]\w*", text):
        if name in seen:
            continue
        seen.add(name)
        for scope in (frame.f_locals, frame.f_globals):
            if name in scope:
                out.append((name, scope[name]))
                break
    return out


def _coroutine_note(exc):
    """A note for an error on a coroutine used as its result: "'coroutine'
    object is not subscriptable", "has no attribute 'get'"."""
    if "coroutine" not in str(exc):
        return None
    obj = getattr(exc, "obj", None) if isinstance(exc, AttributeError) else None
    coros = [obj] if isinstance(obj, types.CoroutineType) else \
        [v for _, v in _line_values(exc) if isinstance(v, types.CoroutineType)]
    coros = [c for c in coros if _unstarted(c)]
    if not coros:
        return None
    names = []
    for c in coros:
        if _name(c) not in names:
            names.append(_name(c))
        try:
            c.close()
        except Exception:  # noqa: BLE001
            pass
    return _await_note(names)


def _structured_note(exc):
    """A note for an error on the dict a proxy returned, used as if it were
    the tool's text or a wrong key of it: the key to use."""
    attr = getattr(exc, "name", None) if isinstance(exc, AttributeError) else None
    if isinstance(exc, TypeError) and "dict" not in str(exc) and "slice" not in str(exc):
        return None
    named = [(n, v) for n, v in _line_values(exc) if _tool_of(v) is not None]
    if isinstance(exc, AttributeError):
        obj = getattr(exc, "obj", None)
        if _tool_of(obj) is None:
            return None
        found = [(n, v) for n, v in named if v is obj][:1] or [(None, obj)]
    elif isinstance(exc, KeyError):
        key = exc.args[0] if exc.args else None
        if isinstance(key, str):
            # A misspelt key: only when the line reads it from that dict.
            found = [(n, v) for n, v in named if key not in v and re.search(
                r"\b%s\s*\[\s*(['\"])%s\1\s*\]" % (re.escape(n), re.escape(key)), _line_text(exc))]
        else:
            found = named  # txt[0], txt[:100] (a KeyError since 3.12)
    else:
        found = named
    if not found:
        return None
    name, d = found[0]
    tool = _tool_of(d)
    keys = _keys_for(d, attr)
    if name:
        head, use = "`%s` is the dict %s returned (its structured content)" % (name, tool), "use"
    else:
        head, use, name = "%s returned a dict (its structured content)" % tool, "take its", ""
    if len(keys) == 1:
        return "%s: %s `%s[%r]`" % (head, use, name, keys[0])
    if keys:
        return "%s: %s %s" % (head, use, " or ".join("`%s[%r]`" % (name, k) for k in keys[:4]))
    return "%s, with keys %s" % (head, ", ".join(repr(k) for k in list(d)[:6]))


def _keys_for(d, attr):
    """The keys to suggest: attr itself when d has that key (txt.content);
    d's one key; else those whose values fit, str values for a str method
    (or no attribute), list values for a list method; none for another
    attribute."""
    if attr is not None and attr in d:
        return [attr]
    if len(d) == 1:
        return list(d)
    if attr is None or hasattr(str, attr):
        want = str
    elif hasattr(list, attr):
        want = list
    else:
        return []
    return [k for k, v in d.items() if isinstance(v, want)]
