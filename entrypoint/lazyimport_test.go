package entrypoint

import (
	"testing"
	"time"
)

// TestBoxAsyncioOnFirstUse: a new sandbox answers its first call without
// asyncio (and the ssl, concurrent.futures and inspect it pulls in); whoever
// imports it first finds it set up as an eager import did: the cells' loop
// current in the main thread, asyncio.run patched, top-level await running
// on that loop. An idle worker imports it by itself.
func TestBoxAsyncioOnFirstUse(t *testing.T) { forEachLink(t, testBoxAsyncioOnFirstUse) }

func testBoxAsyncioOnFirstUse(t *testing.T, link string) {
	first := execFrame(1, "import sys\nprint(sorted(m for m in ('asyncio', 'ssl', 'concurrent.futures', 'inspect') if m in sys.modules))")
	first["params"].(map[string]any)["savedTools"] = map[string]any{"tools": []any{}, "problems": []any{}} // as the host sends it
	b := startBox(t, link, first)
	b.next(30 * time.Second) // ready
	if reply, out := b.serve(1, 30*time.Second); outcome(reply) != "ok" || out != "[]\n" {
		t.Errorf("modules loaded at the first call: %v, output %q; want []", reply, out)
	}
	// A coroutine cell importing asyncio first: one loop is made (a second
	// one, dropped unclosed, warns when collected).
	b.send(execFrame(2, "import gc, warnings\nwarnings.simplefilter('error')\nimport asyncio\nL = asyncio.get_event_loop()\n"+
		"async def f():\n    return asyncio.get_running_loop() is L\nprint(await f(), asyncio.run.__module__)\ngc.collect()"))
	if reply, out := b.serve(2, 30*time.Second); outcome(reply) != "ok" || out != "True worker\n" {
		t.Errorf("asyncio set up on first import: %v, output %q; want %q", reply, out, "True worker\n")
	}

	idle := startBox(t, link)
	idle.next(30 * time.Second) // ready
	time.Sleep(time.Second)     // idle: the worker imports asyncio by itself
	idle.send(execFrame(1, "import sys\nprint('asyncio' in sys.modules, sys.modules['asyncio'].run.__module__)"))
	if reply, out := idle.serve(1, 30*time.Second); outcome(reply) != "ok" || out != "True worker\n" {
		t.Errorf("idle worker: %v, output %q; want asyncio imported and set up", reply, out)
	}
}
