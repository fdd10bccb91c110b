package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/thejerf/suture/v4"
)

// TestEventLogByKindAndCollapsed: supervisor events are logged at their
// kind's level, and a failure repeating the previous one is collapsed to
// debug (issue 14).
func TestEventLogByKindAndCollapsed(t *testing.T) {
	var buf bytes.Buffer
	l := eventLog{log: zerolog.New(&buf).Level(zerolog.DebugLevel)}
	boom := errors.New("boom")
	for _, ev := range []suture.Event{
		suture.EventServicePanic{ServiceName: "client:a", PanicMsg: "bad", Stacktrace: "stack"},
		suture.EventServiceTerminate{ServiceName: "client:a", Err: boom},
		suture.EventServiceTerminate{ServiceName: "client:a", Err: boom},
		suture.EventServiceTerminate{ServiceName: "client:a", Err: boom},
		suture.EventServiceTerminate{ServiceName: "client:b", Err: boom},
		suture.EventStopTimeout{ServiceName: "session:x"},
		suture.EventBackoff{SupervisorName: "servers"},
		suture.EventResume{SupervisorName: "servers"},
	} {
		l.event(ev)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec struct {
			Level   string `json:"level"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		got = append(got, rec.Level+" "+rec.Message)
	}
	want := []string{
		"error actor panicked: bad",
		"warn actor failed: boom",
		"debug actor failed again: boom",
		"debug actor failed again: boom",
		"warn actor failed: boom",
		"warn actor did not stop in time",
		"info too many failures; supervisor backing off",
		"info supervisor resumed after its backoff",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
