package entrypoint

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// snapHost plays the host's side of snapshots for box tests: it keeps the
// uploads it accepts and serves reads of the one it offers.
type snapHost struct {
	stored  []byte         // the last committed upload
	end     map[string]any // its snapshot_end params
	up      []byte         // the upload in progress
	refuse  string         // when set, snapshot_write fails with it
	offered []byte         // what snapshot_read serves
	reads   int
}

// serve answers box b's frames until the reply to exec id, and then, when
// wait is set, until an upload ends (committed or aborted); it returns the
// reply and the call's output.
func (h *snapHost) serve(b *box, id int, wait bool) (reply map[string]any, output string) {
	b.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for reply == nil || wait {
		m := b.next(time.Until(deadline))
		params, _ := m["params"].(map[string]any)
		var result any = map[string]any{"tools": []any{}}
		var errMsg string
		switch {
		case m["dataLine"] != nil:
			f := strings.Fields(m["dataLine"].(string))
			data := m["data"].([]byte)
			if len(f) != 4 || f[0] != "#W" || f[2] != fmt.Sprint(len(h.up)) || f[3] != fmt.Sprint(len(data)) {
				b.t.Fatalf("data frame %.80q (have %d bytes)", m["dataLine"], len(h.up))
			}
			h.up = append(h.up, data...)
			continue
		case m["method"] == "output":
			output += fmt.Sprint(params["data"])
			continue
		case m["method"] == nil && m["id"] == float64(id):
			reply = m
			output += replyOutput(m)
			continue
		case m["method"] == nil || m["id"] == nil:
			continue
		case m["method"] == "snapshot_begin":
			h.up = nil
			result = map[string]any{"upload": "u1", "chunk": 65536}
		case m["method"] == "snapshot_write":
			if int(params["offset"].(float64)) != len(h.up) {
				b.t.Fatalf("snapshot_write at %v, want %d", params["offset"], len(h.up))
			}
			errMsg = h.refuse
		case m["method"] == "snapshot_end":
			h.stored, h.end = h.up, params
			result = map[string]any{"bytes": len(h.up)}
			wait = false
		case m["method"] == "snapshot_abort":
			wait = false
		case m["method"] == "snapshot_read":
			h.reads++
			off, n := int(params["offset"].(float64)), int(params["length"].(float64))
			data := h.offered[off:min(off+n, len(h.offered))]
			frame := append([]byte(fmt.Sprintf("#R %d %d\n", off, len(data))), data...)
			if _, err := b.in.Write(frame); err != nil {
				b.t.Fatal(err)
			}
			result = map[string]any{"bytes": len(data)}
		}
		if errMsg != "" {
			b.send(map[string]any{"jsonrpc": "2.0", "id": m["id"], "error": map[string]any{"code": -32002, "message": errMsg}})
			continue
		}
		b.send(map[string]any{"jsonrpc": "2.0", "id": m["id"], "result": result})
	}
	return reply, output
}

func notesOf(reply map[string]any) string {
	res, _ := reply["result"].(map[string]any)
	notes, _ := res["notes"].([]any)
	var out []string
	for _, n := range notes {
		out = append(out, fmt.Sprint(n))
	}
	return strings.Join(out, "\n")
}

// TestBoxSnapshotRoundTrip: a session's globals go to the host after a
// cell (in chunks, in order); a new sandbox offered them loads them in its
// first cell before the code runs, objects shared between globals stay
// shared, and what cannot be kept is named in the stored summary and in
// the restore note. A cell that only prints takes no snapshot, and a
// refused upload is said in the next result.
func TestBoxSnapshotRoundTrip(t *testing.T) {
	h := &snapHost{}
	a := startBoxLimits(t, "stdio", map[string]any{"durability": "cell"})
	a.send(execFrame(1, "data = {'n': 41, 'l': list(range(300000))}\nalias = data['l']\nfh = open('/dev/null')\ngen = (i for i in ())\nimport json"))
	if reply, _ := h.serve(a, 1, true); outcome(reply) != "ok" {
		t.Fatalf("setup: %v", reply)
	}
	if got := fmt.Sprint(h.end["names"], h.end["left"], h.end["call"], h.end["files"]); got != "3 [fh (open file) gen (generator)] 1 0" {
		t.Errorf("snapshot_end: names, left, call = %s", got)
	}
	// A cell that only prints takes none: the next snapshot is cell 3's.
	a.send(execFrame(2, "print(data['n'], alias[0])"))
	h.serve(a, 2, false)
	a.send(execFrame(3, "data['n'] = 41"))
	h.serve(a, 3, true)
	if got := h.end["call"]; got != 3.0 {
		t.Errorf("the snapshot after cells 2 and 3 holds call %v, want 3", got)
	}

	h.offered = h.stored
	b := startBoxLimits(t, "stdio", map[string]any{"durability": "cell"})
	frame := execFrame(1, "print(data['n'] + 1, alias is data['l'], len(alias), 'fh' in globals(), json.dumps([1]))")
	frame["params"].(map[string]any)["restore"] = map[string]any{"session": "s", "bytes": len(h.offered), "call": 3, "lastCall": 4, "cell": 3}
	b.send(frame)
	reply, out := h.serve(b, 1, true)
	if out != "42 True 300000 False [1]\n" {
		t.Errorf("restored values: %q (notes %q)", out, notesOf(reply))
	}
	notes := notesOf(reply)
	if !strings.Contains(notes, "session 's' restored to call 3 of 4 (") || !strings.Contains(notes, "; not restored: fh (open file), gen (generator)") {
		t.Errorf("restore note: %q", notes)
	}
	if h.reads < 2 {
		t.Errorf("the snapshot was read in %d piece(s), want it streamed in several", h.reads)
	}

	h.refuse = "session 's' is no longer durable: its snapshot is over MCP_BRIDGE_SNAPSHOT_MAX (1m)"
	b.send(execFrame(2, "more = bytearray(20 << 20)"))
	h.serve(b, 2, true)
	b.send(execFrame(3, "print(more)"))
	reply, _ = h.serve(b, 3, false)
	if notes := notesOf(reply); !strings.Contains(notes, "call 2's state is not durable: session 's' is no longer durable") {
		t.Errorf("after a refused upload: notes %q", notes)
	}
}
