"""mcp._toolcheck: the rules a saved tool obeys, so that loading it runs no code.

A saved tool is written by one session and loaded into the globals of every
later one, so its source is code from a possibly hostile sandbox. Loading
it must only bind a function: the module body is exactly one def (or async
def) named after the tool, without decorators or type parameters; its
defaults are literals (ast.literal_eval accepts them); its annotations are
plain type expressions, compiled as strings (the annotations future), since
Python 3.13 evaluates annotations when the def runs and 3.14 when anyone
reads them. The checked tree itself is compiled, so what runs is what was
checked. The name may not replace what code finds without defining it:
builtins, keywords, the stdlib's module names, the runtime's globals, and
names starting with "_" or "mcp_".

The load-time check in each new session is the defence; the check in
save_tool only helps honest users (the saving sandbox may lie). The host
refuses the same names at save from its own copy of these lists
(engine/store/pynames.go), which a test compares with reserved_names().
"""
import __future__
import ast
import builtins
import keyword
import sys

RUNTIME_GLOBALS = (
    "mcp", "runtime", "mcp_servers", "LOADED_MCP_SERVERS", "save_tool", "delete_tool", "display", "MCPError",
    "user_tools", "save_memory", "load_memory", "update_memory", "delete_memory", "list_memories", "memory_exists",
    "get_memory_info",
)

FLAGS = __future__.annotations.compiler_flag
_MAX_TYPE_DEPTH = 20


def _reserved():
    out = {}
    for names, why in ((RUNTIME_GLOBALS, "a sandbox global"),
                       (keyword.kwlist + keyword.softkwlist, "a Python keyword"),
                       (dir(builtins), "a Python builtin"),
                       (sys.stdlib_module_names, "a standard library module")):
        for n in names:
            if not n.startswith("_") and not n.startswith("mcp_") and n not in out:
                out[n] = why
    return out


# Taken when the worker loads this module, before any user code can add or
# remove builtins.
_RESERVED = _reserved()


def reserved_names():
    """Every reserved name that does not start with "_" or "mcp_", with the
    reason reserved_reason gives for it."""
    return dict(_RESERVED)


def reserved_reason(name):
    """Why the identifier name is reserved (a Python builtin, ...), or None."""
    if name.startswith("_"):
        return "it starts with '_'"
    if name.startswith("mcp_"):
        return "it starts with 'mcp_'"
    return _RESERVED.get(name)


def _type_problem(node, depth=0):
    """Why an annotation is not a plain type expression (names, dotted
    names, subscripts, X | Y, tuples, lists, constants), or None. A string
    that parses is checked as the expression it names, since
    typing.get_type_hints evaluates it."""
    if depth > _MAX_TYPE_DEPTH:
        return "it nests too deep"
    if isinstance(node, ast.Name):
        return None
    if isinstance(node, ast.Attribute):
        return _type_problem(node.value, depth + 1)
    if isinstance(node, ast.Subscript):
        return _type_problem(node.value, depth + 1) or _type_problem(node.slice, depth + 1)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _type_problem(node.left, depth + 1) or _type_problem(node.right, depth + 1)
    if isinstance(node, (ast.Tuple, ast.List)):
        for e in node.elts:
            p = _type_problem(e, depth + 1)
            if p:
                return p
        return None
    if isinstance(node, ast.Constant):
        if isinstance(node.value, str):
            try:
                inner = ast.parse(node.value.strip(), mode="eval")
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                return None  # evaluating it is a SyntaxError, nothing runs
            return _type_problem(inner.body, depth + 1)
        return None
    return "it is a %s, not a plain type" % type(node).__name__


def _def_problem(node):
    """Why a def would run code when it is executed, or None."""
    if node.decorator_list:
        return "its def has a decorator (line %d)" % node.decorator_list[0].lineno
    if getattr(node, "type_params", None):
        return "its def has type parameters"
    a = node.args
    positional = a.posonlyargs + a.args
    pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults))
    pairs += [(arg, d) for arg, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
    for arg, default in pairs:
        try:
            ast.literal_eval(default)
        except Exception:
            return "the default of '%s' is not a literal (line %d); use None and set it in the body" % (
                arg.arg, default.lineno)
    args = positional + a.kwonlyargs + [x for x in (a.vararg, a.kwarg) if x is not None]
    annotated = [(arg.arg, arg.annotation) for arg in args if arg.annotation is not None]
    if node.returns is not None:
        annotated.append(("return", node.returns))
    for what, ann in annotated:
        p = _type_problem(ann)
        if p:
            return "the annotation of '%s' is not a plain type: %s (line %d)" % (what, p, ann.lineno)
    return None


def source_problem(name, source):
    """(tree, None) when source is one plain def of name, else (None, why)."""
    if not isinstance(source, str):
        return None, "its source is not text"
    try:
        tree = ast.parse(source, "<user_tools/%s>" % name, "exec")
    except (SyntaxError, ValueError) as e:
        return None, "its source does not parse (%s: %s)" % (type(e).__name__, e)
    except (RecursionError, MemoryError):
        return None, "its source nests too deep to parse"
    body = tree.body
    if len(body) != 1:
        return None, "its source must be one def and nothing else; it has %d top-level statements" % len(body)
    node = body[0]
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None, "its source must be one def; it is a %s statement (line %d)" % (type(node).__name__, node.lineno)
    if node.name != name:
        return None, "its def is named '%s', not '%s'" % (node.name, name)
    try:
        why = _def_problem(node)
    except RecursionError:
        why = "its def nests too deep to check"
    return (None, why) if why else (tree, None)


def compile_tool(name, source):
    """(code, None): the code of a saved tool that passes every rule, which
    only binds the function name when run; else (None, why)."""
    if not isinstance(name, str) or not name.isascii() or not name.isidentifier() or len(name) > 64:
        return None, "its name is not a Python identifier of at most 64 ASCII characters"
    why = reserved_reason(name)
    if why:
        return None, "its name is reserved by the sandbox (%s)" % why
    tree, why = source_problem(name, source)
    if why:
        return None, why
    try:
        return compile(tree, "<user_tools/%s>" % name, "exec", flags=FLAGS, dont_inherit=True), None
    except (SyntaxError, ValueError, RecursionError, MemoryError) as e:
        return None, "its source does not compile (%s: %s)" % (type(e).__name__, e)
