"""mcp.runtime: discovery helpers and server proxies inside the sandbox.

LINK (the worker's frame link), MANUAL, TOOLCHECK (mcp._toolcheck, the
saved-tool rules) and HINTS (mcp._hints, which names the key of a proxy's
structured result in an error's note) are set by the worker before this
module runs. Every failure raises MCPError, a RuntimeError subclass.

It is over 500 lines on purpose: it is the module user code sees as
`runtime`, so every documented name (runtime.__all__) is defined here,
the memory and saved-tool helpers included. Its sections start with
`# ---` headers.
"""
import ast
import base64
import errno
import json
import keyword
import linecache
import os
import re
import signal
import sys
import textwrap
import types
import warnings

__all__ = [
    "MCPError", "Image", "Audio", "Resource", "discovered_servers", "list_servers", "list_servers_sync",
    "describe_server", "list_loaded_server_metadata", "list_tools", "list_tools_sync", "call_tool",
    "query_tool_docs", "query_tool_docs_sync", "search_tool_docs", "search_tool_docs_sync",
    "capability_summary", "reset", "save_tool", "delete_tool",
    "save_memory", "load_memory", "update_memory", "delete_memory", "list_memories", "memory_exists",
    "get_memory_info", "ResourceLink", "list_resources", "list_resource_templates", "read_resource",
    "history", "signins", "signout",
]


class MCPError(RuntimeError):
    """A failed runtime call or proxied tool call."""

    def __init__(self, message, server=None, tool=None, kind=None, result=None):
        super().__init__(message)
        self.server = server
        self.tool = tool
        self.kind = kind
        self.result = result


_CALL = {"servers": [], "proxies": {}, "reset": False, "notes": []}

# The server entries of the previous exec frame, by digest: (entry, proxy,
# module). A frame names an entry the worker keeps by its digest alone
# ("cached"), so a server granted call after call costs neither its tool
# list on the link nor a rebuild of its proxies. Exactly these are kept:
# the host mirrors them (actors/grants.go).
_KEPT = {}


class _StaleServers(Exception):
    """An exec frame named a server entry this worker does not keep."""


def _begin_call(params):
    """Binds the servers the exec frame grants. It raises _StaleServers
    before changing anything when the frame names an entry not kept."""
    servers = params.get("servers") or []
    for srv in servers:
        if srv.get("cached") and srv.get("digest") not in _KEPT:
            raise _StaleServers("server %r: entry %s is not kept" % (srv.get("name"), srv.get("digest")))
    pkg = sys.modules["mcp.servers"]
    for name in list(vars(pkg)):
        mod = getattr(pkg, name)
        if isinstance(mod, types.ModuleType):
            delattr(pkg, name)
            sys.modules.pop(mod.__name__, None)
    kept, entries, proxies = {}, [], {}
    for srv in servers:
        digest = srv.get("digest")
        entry = _KEPT.get(digest) if digest else None
        if entry is None:
            entry = _server_entry(srv)
        if digest:
            kept[digest] = entry
        srv, proxy, mod = entry
        entries.append(srv)
        proxies[srv["name"]] = proxy
        sys.modules[mod.__name__] = mod
        setattr(pkg, srv["alias"], mod)
    _KEPT.clear()
    _KEPT.update(kept)
    servers = entries
    _CALL.update(servers=servers, proxies=proxies, reset=False, uncovered=set(), job_token=None, call=params.get("call"),
                 notes=_skip_notes(proxies.values()))
    # Objects, as the reference gives, but only these three keys: the
    # variable is inherited by subprocesses, and a large one makes every
    # exec fail with E2BIG.
    _setenv("MCP_AVAILABLE_SERVERS", json.dumps(
        [{"name": s["name"], "alias": s["alias"], "description": s.get("description") or ""} for s in servers]))
    _setenv("MCP_DISCOVERED_SERVERS", json.dumps(list(params.get("discovered") or ())))


def _setenv(name, value):
    """Sets an environment variable unless it already holds value: each
    set is a putenv, and the same grant comes call after call."""
    if os.environ.get(name) != value:
        os.environ[name] = value


def _server_entry(srv):
    """A granted server's proxy and its module mcp.servers.<alias>."""
    proxy = _ServerProxy(srv)
    mod = types.ModuleType("mcp.servers." + srv["alias"])
    mod.__file__ = "<bridge/mcp/servers/%s.py>" % srv["alias"]
    for alias, fn in proxy._fns.items():
        setattr(mod, alias, fn)
    mod.__all__ = list(proxy._fns)
    if srv.get("error"):
        mod.__getattr__ = proxy.__getattr__ if srv.get("signIn") else proxy._broken
    mod.TOOLS = [_tool_entry(t) for t in proxy._tools]
    mod.TOOL_MAP = {t["alias"]: _tool_entry(t) for t in proxy._tools}
    return srv, proxy, mod


def _tool_entry(tool):
    """A TOOLS / TOOL_MAP dict: the tool with the reference's input_schema key too."""
    entry = dict(tool)
    entry["input_schema"] = tool.get("inputSchema")
    return entry


def _end_call():
    return _CALL["reset"]


def _call_notes():
    """The notes this call's proxy builder left for the exec result."""
    return list(_CALL.get("notes") or ())


_NOTED = set()  # (server, tool) pairs whose skip a call's notes already named


def _skip_notes(proxies):
    """One note per server with tools its proxy builder skipped, naming
    each tool once per session: describe_server and the proxy's repr keep
    saying it afterwards."""
    notes = []
    for p in proxies:
        fresh = [s for s in p._skipped if (p._name, s["name"]) not in _NOTED]
        _NOTED.update((p._name, s["name"]) for s in fresh)
        if fresh:
            named = ["%s (%s)" % (_skip_label(s), s["reason"]) for s in fresh[:10]]
            if len(fresh) > 10:
                named.append("and %d more" % (len(fresh) - 10))
            notes.append("the sandbox skipped %d tools of server '%s' it could not build a proxy for: %s" % (
                len(fresh), p._name, ", ".join(named)))
    return notes


def _globals_for_call():
    g = {
        "mcp": sys.modules["mcp"],
        "runtime": sys.modules[__name__],
        "mcp_servers": _Proxies(_CALL["proxies"]),
        "LOADED_MCP_SERVERS": tuple(s["name"] for s in _CALL["servers"]),
        "save_tool": save_tool,
        "MCPError": MCPError,
    }
    for name in _MEMORY_GLOBALS:
        g[name] = globals()[name]
    for srv in _CALL["servers"]:
        g["mcp_" + srv["alias"]] = _CALL["proxies"][srv["name"]]
    return g


class _Proxies(dict):
    """mcp_servers: a missing key says how to grant a configured server."""

    def __missing__(self, key):
        raise KeyError(_not_granted_text(name=key) or key)


def _configured(name=None, alias=None):
    """The configured server name with this name or alias, or None. Only
    error paths ask, so the round trip costs nothing on the hot path."""
    try:
        servers = _call("discovered_servers", {"detailed": True})["servers"]
    except MCPError:
        return None
    for s in servers:
        if "skipped" in s:
            continue
        if (name is not None and s.get("name") == name) or (alias is not None and s.get("alias") == alias):
            return s.get("name")
    return None


def _not_granted_text(name=None, alias=None):
    """The one wording for a configured server the call does not grant
    (the host's call_tool error says the same), or None when no configured
    server matches."""
    found = _configured(name=name, alias=alias)
    if found is None or found in (s["name"] for s in _CALL["servers"]):
        return None
    return "server %r is configured but not granted to this call; pass servers=%s to run_python" % (
        found, json.dumps([found]))


class _GrantFinder:
    """A meta path finder for `import mcp.servers.<alias>` of a server the
    call does not grant: ModuleNotFoundError says how to grant it."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        prefix = "mcp.servers."
        if not fullname.startswith(prefix) or "." in fullname[len(prefix):]:
            return None
        text = _not_granted_text(alias=fullname[len(prefix):])
        if text is None:
            return None
        raise ModuleNotFoundError("No module named %r: %s" % (fullname, text), name=fullname)


sys.meta_path.append(_GrantFinder)

_NO_NETWORK = ("the sandbox has no network: reach outside services through a proxied MCP server "
               "(runtime.discovered_servers() lists them)")
_NET_TEXTS = ("Temporary failure in name resolution", "Name or service not known", "Network is unreachable",
              "No address associated with hostname")


def _explain(exc):
    """Adds the fix to an uncaught exception the model's first mistakes
    raise: a proxy name of a server the call does not grant, and network
    access from a sandbox that has none. The exception keeps its type."""
    if isinstance(exc, NameError) and not isinstance(exc, UnboundLocalError):
        name = getattr(exc, "name", None) or ""
        text = _not_granted_text(alias=name[4:]) if name.startswith("mcp_") else None
        if text is not None:
            exc.args = ("name %r is not defined: %s" % (name, text),)
            exc.name = None  # Python's own "Did you mean" would point elsewhere
        return
    import socket  # loaded when first needed (like inspect below), not at the sandbox's start
    seen = set()
    e = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        reason = getattr(e, "reason", None)  # urllib's URLError wraps the socket error
        if isinstance(e, socket.gaierror) or isinstance(reason, socket.gaierror) or \
                (isinstance(e, OSError) and e.errno in (errno.ENETUNREACH, errno.EHOSTUNREACH)) or \
                any(t in str(e) for t in _NET_TEXTS):
            exc.add_note("note: " + _NO_NETWORK)
            return
        e = e.__cause__ or e.__context__


def _call(method, params):
    return LINK.call(method, params)  # noqa: F821 (set by the worker)


async def _acall(method, params):
    return await LINK.acall(method, params)  # noqa: F821


def history(n=10):
    """Your last n run_python calls (at most 100), oldest first, from the audit trail: dicts with id, time,
    session, call, status, code and the inner calls (method, server, tool, outcome). Empty, with a note,
    when the audit trail is off."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError("history(n): n must be an int")
    res = _call("history", {"n": n})
    if res.get("note") and res["note"] not in _LATE_NOTES:
        _LATE_NOTES.append(res["note"])
    return res["records"]


def signins():
    """Your own sign-ins to servers configured with identity: principal (bridge serve): dicts with server,
    state, account (the upstream's name for you, or None), scope and expires (ISO time or None); never a
    token. Empty elsewhere."""
    res = _call("signins", {})
    return tuple({"server": s.get("server"), "state": s.get("state"), "account": s.get("account") or None,
                  "scope": s.get("scope") or None, "expires": s.get("expires") or None}
                 for s in res.get("signins") or ())


def signout(server):
    """Forget your own tokens for server (identity: principal, bridge serve); the next call asks you to sign
    in again. True when there were tokens to forget."""
    if not isinstance(server, str):
        raise TypeError("signout(server): server must be a str")
    return bool(_call("signout", {"server": server})["signed_out"])


_LATE_NOTES = []  # notes the running cell's calls left for its result


def _take_late_notes():
    """The notes left while the cell ran; the list is emptied."""
    notes = list(_LATE_NOTES)
    _LATE_NOTES.clear()
    return notes


# --- discovery -------------------------------------------------------------

def discovered_servers(detailed=False):
    """Names of every configured server, in config order (dicts with detailed=True)."""
    servers = _call("discovered_servers", {"detailed": bool(detailed)})["servers"]
    return tuple(servers)


def list_servers_sync():
    """Names of the servers granted to this call, in argument order."""
    return tuple(s["name"] for s in _CALL["servers"])


async def list_servers():
    """Names of the servers granted to this call, sorted."""
    return tuple(sorted(s["name"] for s in _CALL["servers"]))


def describe_server(name):
    """Metadata and tools of any discovered server."""
    server = _call("describe_server", {"name": name})["server"]
    proxy = _CALL["proxies"].get(name)
    if proxy is not None and proxy._skipped and isinstance(server, dict):
        # Tools the host listed but this sandbox could not build a proxy for.
        server.setdefault("skipped", []).extend(dict(s, sandbox=True) for s in proxy._skipped)
    return server


def list_loaded_server_metadata():
    """describe_server() of every server granted to this call."""
    return tuple(describe_server(s["name"]) for s in _CALL["servers"])


def list_tools_sync(server=None):
    """Tools of any discovered server: dicts with name, alias, description, input_schema."""
    if server is None:
        raise MCPError("list_tools_sync(server) requires a server name")
    return tuple(describe_server(server)["tools"])


async def list_tools(server):
    """The raw tools/list of any discovered server."""
    return (await _acall("list_tools", {"server": server}))["tools"]


async def call_tool(server, tool, arguments=None, validate=True):
    """Calls a tool of a granted server and returns the raw CallToolResult dict.
    server and tool may be names or the aliases proxies show. validate=False
    skips the bridge's argument check, for a server whose schema is wrong."""
    if not tool:
        raise MCPError("Missing tool name", server=server)
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise MCPError("Arguments must be an object", server=server, tool=tool)
    params = {"server": server, "tool": tool, "arguments": arguments}
    if not validate:
        params["validate"] = False  # only when asked: every other frame stays as it was
    result = (await _acall("call_tool", params))["result"]
    if isinstance(result, dict):
        result.setdefault("isError", False)
    return result


def _docs_params(server, tool, detail):
    if tool is not None and not isinstance(tool, str):
        raise MCPError("'tool' must be a string when provided", server=server)
    params = {"server": server, "detail": detail if isinstance(detail, str) else "summary"}
    if tool is not None:
        params["tool"] = tool
    return params


async def query_tool_docs(server, tool=None, detail="summary"):
    """Docs of a server's tools; the dict itself when tool names exactly one."""
    docs = (await _acall("query_tool_docs", _docs_params(server, tool, detail)))["docs"]
    return docs[0] if tool is not None and len(docs) == 1 else docs


def query_tool_docs_sync(server, tool=None, detail="summary"):
    """Like query_tool_docs, always a list."""
    return _call("query_tool_docs", _docs_params(server, tool, detail))["docs"]


def _search_params(query, limit, detail):
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise MCPError("'limit' must be an integer")
    if not isinstance(query, str) or not query.strip():
        raise MCPError("Missing 'query' value")
    return {"query": query, "limit": max(1, min(20, limit)), "detail": detail if isinstance(detail, str) else "summary"}


def _empty_query(query, limit):
    # The reference answers an empty query with []; a bad limit still raises.
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise MCPError("'limit' must be an integer")
    return isinstance(query, str) and not query.strip()


def _search_results(reply):
    for w in reply.get("warnings") or ():
        warnings.warn(w, RuntimeWarning, stacklevel=3)
    # A server the search could not cover is named once per call, however
    # many searches the call makes.
    warned = _CALL.setdefault("uncovered", set())
    for name, state in sorted((reply.get("uncovered") or {}).items()):
        if name not in warned:
            warned.add(name)
            warnings.warn("search did not cover server '%s': %s" % (name, state), RuntimeWarning, stacklevel=3)
    return reply["results"]


async def search_tool_docs(query, limit=5, detail="summary"):
    """Ranked tool docs over every discovered server (and saved tools); [] for an empty query."""
    if _empty_query(query, limit):
        return []
    return _search_results(await _acall("search_tool_docs", _search_params(query, limit, detail)))


def search_tool_docs_sync(query, limit=5, detail="summary"):
    """Like search_tool_docs, from sync code."""
    if _empty_query(query, limit):
        return []
    return _search_results(_call("search_tool_docs", _search_params(query, limit, detail)))


def capability_summary():
    """The sandbox manual."""
    return MANUAL  # noqa: F821


def reset():
    """Replaces this session's container after the current call ends, and
    forgets its snapshot: the next call starts empty."""
    _call("reset", {})
    _CALL["reset"] = True
    if _SNAPSHOTS is not None:
        _SNAPSHOTS.forget()


_SNAPSHOTS = None  # the worker's Snapshotter


def _snapshot_summary(s):
    return {"bytes": s.get("bytes", 0), "names": s.get("names", 0), "files": s.get("files", 0),
            "left_out": list(s.get("left") or ())}


def snapshot():
    """Takes a snapshot of this session now and waits until the host has
    it. Returns {"bytes", "names", "files", "left_out"}: left_out names each
    global that cannot be kept, and why."""
    if _SNAPSHOTS is None:
        raise MCPError("snapshots are not available in this sandbox", kind="not_available")
    return _snapshot_summary(_SNAPSHOTS.take(_CALL.get("call")))


def fork_session(name):
    """Creates session `name` as a copy of this session's current state:
    its next call starts from it. For trying something without risking this
    session. Refused when `name` is live or is this session."""
    if not isinstance(name, str) or not name:
        raise MCPError("fork_session needs a session name", kind="invalid_arguments")
    if _SNAPSHOTS is None:
        raise MCPError("snapshots are not available in this sandbox", kind="not_available")
    return _snapshot_summary(_SNAPSHOTS.take(_CALL.get("call"), target=name))


# --- saved tools -------------------------------------------------------------

def save_tool(func):
    """Saves a function defined in a run_python cell for every future session
    (module user_tools, and a global of the same name)."""
    import inspect
    why = _decorated(func)
    if why:
        raise MCPError(why, kind="invalid_arguments")
    if not inspect.isfunction(func):
        raise ValueError("save_tool expects a function")
    name = func.__code__.co_name  # the name its def statement binds
    if not name.isidentifier():
        raise MCPError("save_tool needs a function defined with def, not %s" % name, kind="invalid_arguments")
    # The same rules as at load (mcp._toolcheck); here they only give an
    # honest user the reason at once.
    check = TOOLCHECK  # noqa: F821 (set by the worker)
    why = check.reserved_reason(name)
    if why:
        raise MCPError("Tool name '%s' is reserved by the sandbox (%s); rename the function" % (name, why),
                       kind="invalid_arguments")
    source = _function_source(func)
    why = check.source_problem(name, source)[1]
    if why:
        raise MCPError("save_tool cannot save '%s': %s. A saved tool is one plain def: no decorators, literal "
                       "defaults, plain type annotations" % (name, why), kind="invalid_arguments")
    try:
        sig = str(inspect.signature(func))
    except (TypeError, ValueError):
        sig = "(...)"
    _call("save_tool", {"name": name, "source": source, "doc": inspect.getdoc(func) or "", "signature": sig})
    _user_tools_module().__dict__[name] = func
    msg = "Tool '%s' saved. It will be available in future sessions." % name
    unsaved = _unsaved_globals(func)
    if unsaved:
        msg += "\nNote: it uses globals %s that are not saved." % ", ".join(sorted(unsaved))
    return msg


def _decorated(func):
    """Why save_tool cannot save func, which a decorator made (a wrapper, a
    cache, a staticmethod: anything with __wrapped__, or a closure such as a
    wrapper without functools.wraps), or None."""
    import inspect
    try:
        inner = getattr(func, "__wrapped__", None)
    except Exception:  # noqa: BLE001 (an object whose __getattr__ raises: not a decorator's)
        inner = None
    if inner is not None:
        try:
            inner = inspect.unwrap(inner)
        except ValueError:  # a cycle of __wrapped__
            pass
    elif inspect.isfunction(func) and func.__closure__:
        cells = []
        for c in func.__closure__:
            try:
                cells.append(c.cell_contents)
            except ValueError:  # an empty cell
                pass
        defs = [f for f in cells if inspect.isfunction(f) and f.__code__.co_filename.startswith("<cell-")]
        if len(defs) != 1:
            return ("save_tool cannot save '%s': a saved tool is one plain top-level def, and this one is nested in "
                    "another function (it uses %s from there); define it at the top level of a cell" % (
                        func.__name__, ", ".join(func.__code__.co_freevars[:3])))
        inner = defs[0]
    else:
        return None
    name = getattr(inner, "__name__", None) or getattr(func, "__name__", None) or "?"
    deco = _decorator_text(inner)
    return "save_tool cannot save '%s': a saved tool is one plain def, and this one is decorated%s; save it without the decorator" % (
        name, " (@%s)" % deco if deco else "")


def _decorator_text(func):
    """The decorators of func's def in its cell, as "deco" or "a @b(1)";
    "" when unknown."""
    try:
        node = ast.parse(_function_source(func)).body[0]
        text = " @".join(ast.unparse(d) for d in node.decorator_list)
    except Exception:  # noqa: BLE001 (the note is a courtesy)
        return ""
    return text if len(text) <= 60 else text[:57] + "..."


def delete_tool(name):
    """Removes a saved tool from future sessions."""
    import inspect
    if inspect.isfunction(name):
        name = name.__name__
    if not isinstance(name, str):
        raise MCPError("delete_tool expects a tool name", kind="invalid_arguments")
    deleted = _call("delete_tool", {"name": name})["deleted"]
    mod = sys.modules.get("user_tools")
    if mod is not None:
        mod.__dict__.pop(name, None)
    return ("Tool '%s' deleted." if deleted else "Tool '%s' not found.") % name


def _function_source(func):
    """The def (with decorators) of func, from the text of the cell that
    defined it: the worker keeps each cell in linecache as <cell-n>."""
    code = func.__code__
    entry = linecache.cache.get(code.co_filename)
    lines = entry[2] if entry and len(entry) >= 3 else None
    if lines:
        try:
            tree = ast.parse("".join(lines))
        except SyntaxError:
            tree = None
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name:
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                if start == code.co_firstlineno:
                    return textwrap.dedent("".join(lines[start - 1:node.end_lineno]))
    raise MCPError("The source of '%s' is not known; save_tool saves functions defined with def in a run_python cell"
                   % func.__name__, kind="invalid_arguments")


_BRIDGE_GLOBALS = {"mcp", "runtime", "mcp_servers", "LOADED_MCP_SERVERS", "save_tool", "user_tools"}


def _unsaved_globals(func):
    names = set()

    def walk(co):
        names.update(co.co_names)
        for c in co.co_consts:
            if isinstance(c, types.CodeType):
                walk(c)
    walk(func.__code__)
    g = func.__globals__
    tools = vars(_user_tools_module())
    return {n for n in names if n in g and n != func.__name__ and n not in _BRIDGE_GLOBALS
            and n not in _MEMORY_GLOBALS and not n.startswith("mcp_") and not n.startswith("__") and n not in tools}


def _user_tools_module():
    mod = sys.modules.get("user_tools")
    if mod is None:
        mod = types.ModuleType("user_tools")
        mod.__file__ = "<bridge/user_tools.py>"
        mod.__doc__ = "Tools saved with save_tool()."
        sys.modules["user_tools"] = mod
    return mod


_LOADING = [None]  # the saved tool being loaded, for the worker's interrupt note
_LOAD_BUDGET = 1.0  # seconds one saved tool may take to load


class _SlowLoad(BaseException):
    """Raised by SIGALRM in a saved tool that loads too long; a
    BaseException, so the tool's own `except Exception` cannot swallow it."""


def _slow_load(signum, frame):
    raise _SlowLoad()


def _load_user_tools(ns, reply=None):
    """Binds every saved tool in the session namespace ns (the first call of
    a session) and fills module user_tools. reply is the host's saved_tools
    reply when the exec frame carried it; else it is asked for. A tool is
    run only once mcp._toolcheck found it to be one plain def, so loading
    runs no code of its author; the others are skipped with a note and
    their files kept. Each tool gets _LOAD_BUDGET seconds. Returns the
    notes: the loaded names first, then one per tool not loaded."""
    mod = _user_tools_module()
    if not isinstance(reply, dict):
        try:
            reply = _call("saved_tools", {})
        except MCPError as e:
            return ["saved tools were not loaded: %s" % e]
    check = TOOLCHECK  # noqa: F821
    notes = list(reply.get("problems") or ())
    loaded = []
    old = signal.signal(signal.SIGALRM, _slow_load)
    try:
        for t in reply.get("tools") or ():
            name, src = t["name"], t.get("source") or ""
            code, why = check.compile_tool(name, src)
            if why:
                notes.append("saved tool '%s' not loaded: %s; runtime.delete_tool('%s')" % (name, why, name))
                continue
            filename = "<user_tools/%s>" % name
            linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
            _LOADING[0] = name
            hint = "save it again or remove it with runtime.delete_tool('%s')" % name
            try:
                signal.setitimer(signal.ITIMER_REAL, _LOAD_BUDGET)
                try:
                    exec(code, ns)
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
                fn = ns.get(name)
                if not callable(fn):
                    raise NameError("its source does not define %s" % name)
            except _SlowLoad:
                notes.append("saved tool '%s' took over %gs to load and was skipped; %s" % (name, _LOAD_BUDGET, hint))
                continue
            except Exception as e:
                notes.append("saved tool '%s' failed to load (%s: %s); %s" % (name, type(e).__name__, e, hint))
                continue
            setattr(mod, name, fn)
            loaded.append(name)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    if loaded:
        notes.insert(0, _loaded_note(loaded))
    return notes


def _loaded_note(names, budget=900):
    """The note naming the loaded tools, cut to budget bytes (the host keeps
    1 KiB of a note) with the count of the rest."""
    note = "loaded saved tools: " + ", ".join(names)
    if len(note) <= budget:
        return note
    shown = []
    for i, n in enumerate(names):
        more = " ... and %d more" % (len(names) - i)
        if len("loaded saved tools: " + ", ".join(shown + [n])) + len(more) > budget:
            return "loaded saved tools: " + ", ".join(shown) + more
        shown.append(n)
    return note


# --- memory -----------------------------------------------------------------

_MEMORY_GLOBALS = ("save_memory", "load_memory", "update_memory", "delete_memory", "list_memories",
                   "memory_exists", "get_memory_info")
_UPDATE_TRIES = 50


def _memory_key(key):
    if not isinstance(key, str):
        raise MCPError("Memory key must be a string, not %s" % type(key).__name__, kind="invalid_arguments")
    return key


def _json_check(key, value, what):
    # NaN and non-JSON objects are refused here: the link carries strict JSON.
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise MCPError("Memory %s for '%s' is not JSON: %s" % (what, key, e), kind="invalid_arguments") from None


def save_memory(key, value, *, metadata=None):
    """Stores a JSON value under key, on the host: every session and later
    bridge runs see it."""
    key = _memory_key(key)
    _json_check(key, value, "value")
    params = {"key": key, "value": value}
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise MCPError("Memory metadata for '%s' must be a dict" % key, kind="invalid_arguments")
        _json_check(key, metadata, "metadata")
        params["metadata"] = metadata
    _call("memory_put", params)
    return "Memory '%s' saved." % key


def load_memory(key, *, default=None):
    """The value stored under key, or default."""
    rec = _call("memory_get", {"key": _memory_key(key)})
    return rec.get("value") if rec.get("found") else default


def update_memory(key, updater):
    """Stores updater(current value or None) under key and returns it. The
    write happens only if nobody wrote key meanwhile; otherwise updater runs
    again on the newer value."""
    key = _memory_key(key)
    if not callable(updater):
        raise MCPError("update_memory expects a function of the current value", kind="invalid_arguments")
    for _ in range(_UPDATE_TRIES):
        rec = _call("memory_get", {"key": key})
        new = updater(rec.get("value") if rec.get("found") else None)
        _json_check(key, new, "value")
        try:
            _call("memory_put", {"key": key, "value": new, "rev": rec.get("rev") or "", "keepMetadata": True})
            return new
        except MCPError as e:
            if e.kind != "conflict":
                raise
    raise MCPError("update_memory('%s') lost the race to other writers %d times; try again" % (key, _UPDATE_TRIES),
                   kind="conflict")


def delete_memory(key):
    """Removes key."""
    key = _memory_key(key)
    deleted = _call("memory_delete", {"key": key})["deleted"]
    return ("Memory '%s' deleted." if deleted else "Memory '%s' not found.") % key


def list_memories():
    """Every memory as {key, metadata, created_at, updated_at}, sorted by key."""
    out, after = [], ""
    while True:
        # The host answers in pages that each fit one frame.
        page = _call("memory_list", {"after": after} if after else {})
        out.extend({k: m.get(k) for k in ("key", "metadata", "created_at", "updated_at")}
                   for m in page["memories"])
        nxt = page.get("next") or ""
        if not nxt or nxt <= after:
            return out
        after = nxt


def memory_exists(key):
    """Whether key is stored."""
    return bool(_call("memory_get", {"key": _memory_key(key)}).get("found"))


def get_memory_info(key):
    """{key, value, metadata, created_at, updated_at, size} of key, or None."""
    rec = _call("memory_get", {"key": _memory_key(key)})
    if not rec.get("found"):
        return None
    return {k: rec.get(k) for k in ("key", "value", "metadata", "created_at", "updated_at", "size")}


# --- results ---------------------------------------------------------------

# The repr and str of a result never carry base64: an image (or audio or
# blob) shows as a short placeholder, so printing a result costs the model a
# few tokens, not kilobytes of noise. The bytes stay reachable: .data of an
# Image, ['data'] of a block dict.

def _size_text(n):
    if n < 1024:
        return "%d B" % n
    if n < 1 << 20:
        return "%.1f KB" % (n / 1024)
    return "%.1f MB" % (n / (1 << 20))


class _Placeholder:
    """Stands for base64 data in a repr: <image/png 1.2 KB>."""
    __slots__ = ("text",)

    def __init__(self, mime, nbytes):
        self.text = "<%s %s>" % (mime or "binary", _size_text(nbytes))

    def __repr__(self):
        return self.text


def _b64_size(s):
    """Decoded size of base64 text s, without decoding it."""
    n = len(s.rstrip())
    return max(0, n * 3 // 4 - (2 if s.endswith("==") else 1 if s.endswith("=") else 0))


def _block_data(d):
    """(holder, key, mime) of the base64 string of an MCP image, audio or
    embedded-resource blob block d, or None for any other dict."""
    kind = d.get("type")
    if kind in ("image", "audio") and isinstance(d.get("data"), str):
        return d, "data", d.get("mimeType") or kind
    res = d.get("resource") if kind == "resource" else None
    if isinstance(res, dict) and isinstance(res.get("blob"), str):
        return res, "blob", res.get("mimeType") or "application/octet-stream"
    return None


def _redacted_block(d, found):
    """A plain copy of block d whose base64 is a _Placeholder (found is
    _block_data(d))."""
    holder, key, mime = found
    copy = dict(holder)
    copy[key] = _Placeholder(mime if isinstance(mime, str) else None, _b64_size(holder[key]))
    if holder is d:
        return copy
    out = dict(d)
    out["resource"] = copy
    return out


class _Block(dict):
    """An MCP content block in a proxy's structured result: a plain dict
    (json.dumps and ['data'] work as before) whose repr shows a placeholder
    for its base64."""

    def __repr__(self):
        found = _block_data(self)
        return repr(_redacted_block(self, found) if found else dict(self))

    __str__ = __repr__


def _wrap_blocks(value, depth=0):
    """value with each MCP content block dict in it made a _Block, in place
    (value is fresh from the link)."""
    if depth > 50:
        return value
    if isinstance(value, dict):
        if "type" in value and _block_data(value):
            return _Block(value)
        for k, v in value.items():
            if isinstance(v, (dict, list)):
                value[k] = _wrap_blocks(v, depth + 1)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            if isinstance(v, (dict, list)):
                value[i] = _wrap_blocks(v, depth + 1)
    return value


class _Blob:
    def __init__(self, block):
        self.mime_type = block.get("mimeType")
        self.data = base64.b64decode(block.get("data") or "")

    def save(self, path):
        with open(path, "wb") as f:
            f.write(self.data)
        return path

    def __repr__(self):
        return repr(_Placeholder(self.mime_type or type(self).__name__.lower(), len(self.data)))


class Image(_Blob):
    """An image content block; display() shows it. repr: <image/png 1.2 KB>."""


class Audio(_Blob):
    """An audio content block. repr: <audio/wav 3.0 KB>."""


class Resource:
    """An embedded resource content block; display() shows one with an image
    MIME type."""

    def __init__(self, block):
        res = block.get("resource") or {}
        self.uri = res.get("uri")
        self.mime_type = res.get("mimeType")
        self.text = res.get("text")
        self.data = base64.b64decode(res["blob"]) if "blob" in res else None

    def __repr__(self):
        if self.data is None:
            return "Resource(uri=%r, mime_type=%r)" % (self.uri, self.mime_type)
        return "Resource(uri=%r, %r)" % (self.uri, _Placeholder(self.mime_type, len(self.data)))


def _block_value(block, server=None):
    kind = block.get("type")
    if kind == "resource_link" and isinstance(block.get("uri"), str):
        return ResourceLink(block, server)
    if kind == "text":
        return block.get("text", "")
    if kind == "image":
        return Image(block)
    if kind == "audio":
        return Audio(block)
    if kind == "resource":
        return Resource(block)
    return block


def _convert(result, server, tool):
    content = result.get("content") or []
    if result.get("isError"):
        text = "\n".join(b.get("text", "") for b in content if b.get("type") == "text")
        raise MCPError(text or "%s.%s failed" % (server, tool), server=server, tool=tool, kind="server_error", result=result)
    if result.get("structuredContent") is not None:
        value = _wrap_blocks(result["structuredContent"])
        HINTS.structured(value, tool)  # noqa: F821 (set by the worker): an error on it names the key to use
        return value
    if not content:
        return None
    if len(content) == 1 and content[0].get("type") == "text":
        text = content[0].get("text", "")
        stripped = text.strip()
        if stripped[:1] in ("{", "["):
            try:
                return _wrap_blocks(json.loads(stripped))
            except ValueError:
                pass
        return text
    values = [_block_value(b, server) for b in content]
    return values[0] if len(values) == 1 else values


# --- resources -------------------------------------------------------------

class ResourceLink:
    """A resource a tool result links to, or list_resources() lists: uri,
    name, mime_type, description. `await link.read()` reads it from the
    server that returned it."""

    def __init__(self, item, server):
        self.uri = item.get("uri")
        self.name = item.get("name")
        self.mime_type = item.get("mimeType")
        self.description = item.get("description")
        self.server = server

    async def read(self):
        if self.server is None:
            raise MCPError("This resource link has no server to read it from", kind="not_available")
        return await read_resource(self.server, self.uri)

    def __repr__(self):
        return "ResourceLink(uri=%r, name=%r, mime_type=%r, server=%r)" % (
            self.uri, self.name, self.mime_type, self.server)


def _contents_value(c, server, uri):
    """One resources/read part: str for text, bytes for a blob, Image for a
    blob with an image MIME type."""
    blob = c.get("blob")
    if not isinstance(blob, str):
        text = c.get("text")
        return text if isinstance(text, str) else ""
    mime = c.get("mimeType")
    try:
        data = base64.b64decode("".join(blob.split()), validate=True)
    except ValueError as e:
        raise MCPError("Resource %s of server '%s' has an invalid blob: %s" % (uri, server, e), server=server,
                       kind="server_error") from None
    if isinstance(mime, str) and mime.startswith("image/"):
        img = Image({"mimeType": mime})
        img.data = data
        return img
    return data


async def read_resource(server, uri):
    """Reads a resource of a granted server: str for text, bytes for a blob,
    Image for an image; a list when it has several parts."""
    if not isinstance(uri, str) or not uri:
        raise MCPError("read_resource needs a uri string", server=server, kind="invalid_arguments")
    result = (await _acall("read_resource", {"server": server, "uri": uri}))["result"]
    contents = result.get("contents") if isinstance(result, dict) else None
    values = [_contents_value(c, server, uri) for c in contents or () if isinstance(c, dict)]
    if not values:
        return None
    return values[0] if len(values) == 1 else values


async def list_resources(server):
    """The resources of a granted server, as ResourceLink objects."""
    items = (await _acall("list_resources", {"server": server}))["resources"]
    return [ResourceLink(r, server) for r in items if isinstance(r, dict)]


async def list_resource_templates(server):
    """The raw resource templates of a granted server."""
    return (await _acall("list_resource_templates", {"server": server}))["resourceTemplates"]


# --- proxies ---------------------------------------------------------------

def _identifier(name, taken, fallback="arg"):
    ident = re.sub(r"[^A-Za-z0-9_]+", "_", name) or fallback
    if ident[0].isdigit():
        ident = "_" + ident
    if keyword.iskeyword(ident):
        ident += "_"
    base, n = ident, 2
    while ident in taken:
        ident = "%s_%d" % (base, n)
        n += 1
    taken.add(ident)
    return ident


def _type_text(spec):
    t = spec.get("type")
    if isinstance(t, list):
        return " | ".join(str(x) for x in t)
    if t == "array" and isinstance(spec.get("items"), dict) and spec["items"].get("type"):
        return "array of %s" % (spec["items"]["type"],)
    return str(t) if t else "any"


_PY_TYPES = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "array": "list",
             "object": "dict", "null": "None"}


def _py_type(spec, depth=0):
    """A short Python name for a JSON schema: str, list[dict], int | None.
    A type of any JSON shape gives some text; nesting past 8 is "any"."""
    if not isinstance(spec, dict) or depth > 8:
        return "any"
    t = spec.get("type")
    if isinstance(t, list):
        return " | ".join(_PY_TYPES.get(x, x) if isinstance(x, str) else str(x) for x in t)
    if t == "array" and isinstance(spec.get("items"), dict) and spec["items"].get("type"):
        return "list[%s]" % _py_type(spec["items"], depth + 1)
    return _PY_TYPES.get(t, "any") if isinstance(t, str) else "any"


def _returns_text(schema, most=8):
    """The Returns line of a proxy's doc: what the proxy gives back. With an
    outputSchema the proxy returns the structured content, a dict, though
    the tool's text may look like a plain string, so help() says so."""
    if not isinstance(schema, dict):
        return ("Returns: text (parsed JSON when the text is JSON; runtime.Image, Audio, Resource or ResourceLink "
                "for other content, a list when there are several blocks).")
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    keys = ["%r: %s" % (k, _py_type(v)) for k, v in list(props.items())[:most]]
    if len(props) > most:
        keys.append("...")
    if keys:
        return "Returns: dict {%s} (the tool's structured content)." % ", ".join(keys)
    return "Returns: %s (the tool's structured content)." % _py_type(schema)


def _json_kind(v):
    """The JSON type of a decoded value, for a reason: "a string", "an array"."""
    for kind, types_ in (("a string", str), ("a boolean", bool), ("a number", (int, float)), ("an array", list),
                         ("an object", dict)):
        if isinstance(v, types_):
            return kind
    return "null" if v is None else type(v).__name__


def _schema_parts(tool):
    """inputSchema's properties and required names; ValueError when the
    schema or its properties is not an object. required of any other shape
    is read as none, and a property schema that is not an object (true, a
    number) as one that says nothing."""
    schema = tool.get("inputSchema")
    if schema is None:
        schema = {}
    if not isinstance(schema, dict):
        raise ValueError("inputSchema is %s, not an object" % _json_kind(schema))
    props = schema.get("properties")
    if props is None:
        props = {}
    if not isinstance(props, dict):
        raise ValueError("inputSchema.properties is %s, not an object" % _json_kind(props))
    req = schema.get("required")
    req = {r for r in req if isinstance(r, str)} if isinstance(req, list) else set()
    return schema, props, req


def _signature_text(alias, props, req):
    """The tool's signature as the host's messages render it
    (protocol/schema.Signature): required parameters, then optional ones
    defaulting to None, each group in property order, with the JSON type."""
    parts = []
    for optional in (False, True):
        for prop, spec in props.items():
            if (prop not in req) != optional:
                continue
            t = spec.get("type") if isinstance(spec, dict) else None
            if isinstance(t, list):
                t = " | ".join(x if isinstance(x, str) else json.dumps(x) for x in t)
            elif not isinstance(t, str):
                t = "any"
            parts.append("%s: %s%s" % (prop, t, " = None" if optional else ""))
    return "%s(%s)" % (alias, ", ".join(parts))


def _make_tool(server, tool):
    import inspect
    schema, props, req = _schema_parts(tool)
    order = [p for p in props if p in req] + [p for p in props if p not in req]
    taken, params, names, lines = set(), [], {}, []
    for prop in order:
        pname = _identifier(prop, taken)
        names[pname] = prop
        spec = props.get(prop)
        if not isinstance(spec, dict):
            spec = {}
        params.append(inspect.Parameter(
            pname, inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=inspect.Parameter.empty if prop in req else None))
        line = "    %s (%s, %s" % (pname, _type_text(spec), "required" if prop in req else "optional")
        if isinstance(spec.get("enum"), list):
            line += ", one of: " + ", ".join(repr(v) for v in spec["enum"])
        if "default" in spec:
            line += ", default: %r" % (spec["default"],)
        line += ")"
        if spec.get("description"):
            line += ": " + " ".join(str(spec["description"]).split())
        lines.append(line)
    # The signature help() shows keeps **kwargs unless additionalProperties
    # is false, as before: names that only an allOf or a $ref declares pass
    # through them. Binding always takes them, and leaves required ones
    # unchecked: the host checks every name (actors' validate, issue 35), so
    # a misspelt or missing argument gets the message runtime.call_tool
    # gets, and no sandbox code can skip the check.
    var_kw = _identifier("kwargs", taken)
    kw = inspect.Parameter(var_kw, inspect.Parameter.VAR_KEYWORD)
    shown = inspect.Signature(params + [kw] if schema.get("additionalProperties") is not False else params)
    binder = inspect.Signature(params + [kw])
    raw_name = tool["name"]

    async def proxy(*args, **kwargs):
        try:
            bound = binder.bind_partial(*args, **kwargs)
        except TypeError as e:  # too many positional arguments, or one given twice: no name for the host to check
            raise MCPError("Invalid arguments for %s.%s: %s; %s" % (server, raw_name, e, _signature_text(tool["alias"], props, req)),
                           server=server, tool=raw_name, kind="invalid_arguments") from None
        arguments = {}
        for pname, value in bound.arguments.items():
            if pname == var_kw:
                arguments.update({k: v for k, v in value.items() if v is not None})
            elif value is not None:
                arguments[names[pname]] = value
        return _convert(await call_tool(server, raw_name, arguments), server, raw_name)

    proxy.__signature__ = shown
    proxy.__name__ = proxy.__qualname__ = tool["alias"]
    doc = tool.get("description")
    doc = doc.strip() if isinstance(doc, str) else ""
    if lines:
        doc = (doc + "\n\n" if doc else "") + "Parameters:\n" + "\n".join(lines)
    doc = (doc + "\n\n" if doc else "") + _returns_text(tool.get("outputSchema"))
    proxy.__doc__ = doc
    return proxy


def _tool_alias(tool):
    """The alias a proxy is bound under; ValueError when the tool has no
    name, or an alias Python cannot take as a plain attribute."""
    if not isinstance(tool, dict):
        raise ValueError("the entry is %s, not an object" % _json_kind(tool))
    name, alias = tool.get("name"), tool.get("alias")
    if not isinstance(name, str) or not name:
        raise ValueError("it has no name")
    if not isinstance(alias, str) or not alias.isidentifier() or keyword.iskeyword(alias):
        raise ValueError("its alias %s is not a Python identifier" % _shown(alias))
    if alias.startswith("__") and alias.endswith("__"):
        raise ValueError("its alias %s is one of Python's special names" % alias)
    return alias


def _shown(value, most=60):
    """A name as a note shows it: repr, so control and bidi characters are
    escapes, cut after most characters."""
    if isinstance(value, str) and len(value) > most:
        value = value[:most] + "..."
    return repr(value)


def _skip_label(skip):
    """A skipped tool as a message names it: its quoted name, if it has one."""
    return "'%s'" % skip["name"] if skip["name"] is not None else "a tool without a name"


def _build_tools(server, tools):
    """The proxies of a server's tools by alias, the tools they were built
    from, and a {name, reason} per tool skipped. Any name or schema costs
    at most its own tool, never the call or the sandbox. The host skips the
    tools it knows to be unusable before they get here
    (actors/toolentry.go), so a skip here is a gap between the two."""
    fns, built, skipped = {}, [], []
    for tool in tools if isinstance(tools, list) else ():
        try:
            alias = _tool_alias(tool)
            if alias in fns:
                raise ValueError("another tool has its alias %s" % alias)
            fns[alias] = _make_tool(server, tool)
            built.append(tool)
        except Exception as e:  # noqa: BLE001 (any failure skips this tool only)
            # As the host's describe_server names a skipped tool: the name
            # escaped and cut short, without quotes; None without one.
            name = tool.get("name") if isinstance(tool, dict) else None
            why = str(e) if isinstance(e, ValueError) else "%s: %s" % (type(e).__name__, e)
            skipped.append({"name": _shown(name)[1:-1] if isinstance(name, str) and name else None,
                            "alias": tool.get("alias") if isinstance(tool, dict) else None,
                            "reason": _shown(why, 200)[1:-1]})
    return fns, built, skipped


_RESOURCE_METHODS = ("list_resources", "list_resource_templates", "read_resource")


class _ServerProxy:
    """mcp_<alias>: one async function per tool of a granted server."""

    def __init__(self, srv):
        self._name = srv["name"]
        self._alias = srv["alias"]
        self._error = srv.get("error")  # disabled or failed to start
        self._sign_in = srv.get("signIn")  # the error is a sign-in the host may do during a call
        self._fns, self._tools, self._skipped = _build_tools(self._name, srv.get("tools"))
        for name in _RESOURCE_METHODS:
            if name in self._fns:  # a tool of that name wins; runtime.read_resource(...) still reads
                self.__dict__[name] = self._fns[name]

    def _broken(self, attr):
        """Any name of a server that cannot be used: its cause."""
        if attr.startswith("__"):
            raise AttributeError(attr)
        raise MCPError(self._error, server=self._name, kind="not_available")

    def __getattr__(self, attr):
        # Only called when normal lookup fails. Tool aliases may start with
        # "_" (a tool named "9lives" is "_9lives"), so look them up first;
        # other underscore names fail at once, without an RPC.
        fns = self.__dict__.get("_fns")
        fn = fns.get(attr) if fns is not None else None
        if fn is not None:
            return fn
        for s in self.__dict__.get("_skipped") or ():
            if s["alias"] == attr:
                raise AttributeError("Server '%s' has a tool %s the sandbox could not build a proxy for: %s; "
                                     "runtime.call_tool may still call it by name" % (self._name, _skip_label(s), s["reason"]),
                                     name=None, obj=None)
        if self.__dict__.get("_sign_in") and not attr.startswith("_"):
            return self._via_host(attr)
        if self.__dict__.get("_error") and not attr.startswith("__"):
            self._broken(attr)
        if attr.startswith("_"):
            raise AttributeError(attr)
        try:
            suggestions = _call("suggest_tools", {"server": self._name, "name": attr})["suggestions"]
        except MCPError:
            suggestions = []
        msg = "Server '%s' has no tool '%s'." % (self._name, attr)
        if suggestions:
            msg += " Did you mean: %s?" % ", ".join(suggestions)
        # name and obj set (to None) keep Python from adding its own
        # suggestion from dir(self), which repeated this one.
        raise AttributeError(msg, name=None, obj=None)

    def _via_host(self, attr):
        """A proxy for a tool of a server that needs a sign-in and has no
        catalog yet: keyword arguments go as they are, and the host resolves
        attr (a name or an alias) once the call has signed in."""
        server = self._name

        async def proxy(*args, **kwargs):
            if args:
                raise MCPError("%s.%s: pass arguments by keyword until the server is signed in" % (server, attr),
                               server=server, tool=attr, kind="invalid_arguments")
            arguments = {k: v for k, v in kwargs.items() if v is not None}
            result = (await _acall("call_tool", {"server": server, "tool": attr, "arguments": arguments,
                                                 "alias": True}))["result"]
            if isinstance(result, dict):
                result.setdefault("isError", False)
            return _convert(result, server, attr)

        proxy.__name__ = proxy.__qualname__ = attr
        proxy.__doc__ = "A tool of %s, which needs a sign-in before its tools are known." % server
        return proxy

    def __dir__(self):
        return sorted(self._fns) + ["list_resource_templates", "list_resources", "list_tools", "read_resource"]

    async def list_tools(self):
        """The raw tools/list of this server."""
        return await list_tools(self._name)

    async def list_resources(self):
        """This server's resources, as ResourceLink objects."""
        return await list_resources(self._name)

    async def list_resource_templates(self):
        """This server's raw resource templates (uriTemplate, name, ...)."""
        return await list_resource_templates(self._name)

    async def read_resource(self, uri):
        """Reads one of this server's resources (see runtime.read_resource)."""
        return await read_resource(self._name, uri)

    def __repr__(self):
        skipped = " (%d skipped: see runtime.describe_server)" % len(self._skipped) if self._skipped else ""
        return "<MCP server %r: %d tools%s>" % (self._name, len(self._fns), skipped)
