package store

import (
	"maps"
	"strings"
	"sync"
)

// The names a saved tool may not take besides those starting with "_" or
// "mcp_": what code in a session finds without defining it. They are
// entrypoint/toolcheck.py's reserved_names() in the default image's Python
// (3.13), each name in the first group that has it; the sandbox checks its
// own Python's names again at load. TestSavedToolNamesMatchSandbox (tests/)
// compares these with a real session and prints the regenerated constants
// when they drift.
const (
	pyRuntimeGlobals = `
	LOADED_MCP_SERVERS MCPError delete_memory delete_tool display get_memory_info list_memories load_memory mcp
	memory_exists runtime save_memory save_tool update_memory user_tools
`
	pyKeywords = `
	False None True and as assert async await break case class continue def del elif else except finally for
	from global if import in is lambda match nonlocal not or pass raise return try type while with yield
`
	pyBuiltins = `
	ArithmeticError AssertionError AttributeError BaseException BaseExceptionGroup BlockingIOError
	BrokenPipeError BufferError BytesWarning ChildProcessError ConnectionAbortedError ConnectionError
	ConnectionRefusedError ConnectionResetError DeprecationWarning EOFError Ellipsis EncodingWarning
	EnvironmentError Exception ExceptionGroup FileExistsError FileNotFoundError FloatingPointError FutureWarning
	GeneratorExit IOError ImportError ImportWarning IndentationError IndexError InterruptedError
	IsADirectoryError KeyError KeyboardInterrupt LookupError MemoryError ModuleNotFoundError NameError
	NotADirectoryError NotImplemented NotImplementedError OSError OverflowError PendingDeprecationWarning
	PermissionError ProcessLookupError PythonFinalizationError RecursionError ReferenceError ResourceWarning
	RuntimeError RuntimeWarning StopAsyncIteration StopIteration SyntaxError SyntaxWarning SystemError
	SystemExit TabError TimeoutError TypeError UnboundLocalError UnicodeDecodeError UnicodeEncodeError
	UnicodeError UnicodeTranslateError UnicodeWarning UserWarning ValueError Warning ZeroDivisionError abs aiter
	all anext any ascii bin bool breakpoint bytearray bytes callable chr classmethod compile complex copyright
	credits delattr dict dir divmod enumerate eval exec exit filter float format frozenset getattr globals
	hasattr hash help hex id input int isinstance issubclass iter len license list locals map max memoryview min
	next object oct open ord pow print property quit range repr reversed round set setattr slice sorted
	staticmethod str sum super tuple vars zip
`
	pyStdlib = `
	abc antigravity argparse array ast asyncio atexit base64 bdb binascii bisect builtins bz2 cProfile calendar
	cmath cmd code codecs codeop collections colorsys compileall concurrent configparser contextlib contextvars
	copy copyreg csv ctypes curses dataclasses datetime dbm decimal difflib dis doctest email encodings
	ensurepip enum errno faulthandler fcntl filecmp fileinput fnmatch fractions ftplib functools gc genericpath
	getopt getpass gettext glob graphlib grp gzip hashlib heapq hmac html http idlelib imaplib importlib inspect
	io ipaddress itertools json keyword linecache locale logging lzma mailbox marshal math mimetypes mmap
	modulefinder msvcrt multiprocessing netrc nt ntpath nturl2path numbers opcode operator optparse os pathlib
	pdb pickle pickletools pkgutil platform plistlib poplib posix posixpath pprint profile pstats pty pwd
	py_compile pyclbr pydoc pydoc_data pyexpat queue quopri random re readline reprlib resource rlcompleter
	runpy sched secrets select selectors shelve shlex shutil signal site smtplib socket socketserver sqlite3
	sre_compile sre_constants sre_parse ssl stat statistics string stringprep struct subprocess symtable sys
	sysconfig syslog tabnanny tarfile tempfile termios textwrap this threading time timeit tkinter token
	tokenize tomllib trace traceback tracemalloc tty turtle turtledemo types typing unicodedata unittest urllib
	uuid venv warnings wave weakref webbrowser winreg winsound wsgiref xml xmlrpc zipapp zipfile zipimport zlib
	zoneinfo
`
)

// reservedToolNames maps each reserved name to why it is reserved.
var reservedToolNames = sync.OnceValue(func() map[string]string {
	out := map[string]string{}
	for _, g := range []struct{ names, why string }{
		{pyRuntimeGlobals, "a sandbox global"},
		{pyKeywords, "a Python keyword"},
		{pyBuiltins, "a Python builtin"},
		{pyStdlib, "a standard library module"},
	} {
		for _, n := range strings.Fields(g.names) {
			if _, ok := out[n]; !ok {
				out[n] = g.why
			}
		}
	}
	return out
})

// ReservedToolNames returns a copy of the reserved names (not those
// refused by prefix), each with its reason.
func ReservedToolNames() map[string]string { return maps.Clone(reservedToolNames()) }

// reservedReason says why name may not be a saved tool's, as the sandbox's
// reserved_reason does, or "" when it may.
func reservedReason(name string) string {
	switch {
	case strings.HasPrefix(name, "_"):
		return "it starts with '_'"
	case strings.HasPrefix(name, "mcp_"):
		return "it starts with 'mcp_'"
	}
	return reservedToolNames()[name]
}
