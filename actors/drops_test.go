package actors

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestDroppedFramesReport checks that a flood of refused frames costs one
// bounded log line per call, and outside calls at most one a minute.
func TestDroppedFramesReport(t *testing.T) {
	var logs bytes.Buffer
	s := &sandbox{log: zerolog.New(&logs)}
	s.active.Store(&activeCall{scope: Scope{Call: 7}})
	mime := "image/" + strings.Repeat("\x1b]52;c;", 20000)
	for i := 0; i < 10000; i++ {
		s.dropped("image frame refused", "mimeType "+mime)
		s.dropped("unknown notification", strings.Repeat("n", 1<<16))
	}
	if logs.Len() != 0 {
		t.Fatalf("%d bytes logged during the call, want none until it ends", logs.Len())
	}
	s.active.Store(nil)
	s.reportDrops(7)
	line := logs.String()
	if strings.Count(line, "\n") != 1 || len(line) > 2<<10 {
		t.Fatalf("report is %d lines, %d bytes, want one line within 2 KiB: %s", strings.Count(line, "\n"), len(line), line)
	}
	var got struct {
		Call    int64
		Frames  int
		Reasons map[string]int
		Samples map[string]string
	}
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"image frame refused": 10000, "unknown notification": 10000}
	if got.Call != 7 || got.Frames != 20000 || len(got.Reasons) != 2 || got.Reasons["image frame refused"] != 10000 || got.Reasons["unknown notification"] != 10000 {
		t.Errorf("report: call %d, %d frames, reasons %v; want call 7, 20000 frames, %v", got.Call, got.Frames, got.Reasons, want)
	}
	for reason, sample := range got.Samples {
		if len(sample) > 200 || strings.Contains(sample, "\x1b") {
			t.Errorf("sample for %q is %d bytes (escape: %v), want at most 200, rendered", reason, len(sample), strings.Contains(sample, "\x1b"))
		}
	}

	// Outside calls: the first drop is reported at once, the next only a
	// minute later (or when the next call ends).
	logs.Reset()
	s.reportDrops(0)
	if logs.Len() != 0 {
		t.Errorf("an empty report logged %q", logs.String())
	}
	now := time.Now()
	for i := 0; i < 1000; i++ {
		if s.drops.add("invalid output frame", "", true, now.Add(time.Duration(i)*time.Millisecond)) != (i == 0) {
			t.Fatalf("idle drop %d: due %v, want %v", i, !(i == 0), i == 0)
		}
	}
	if !s.drops.add("invalid output frame", "", true, now.Add(dropReportEvery)) {
		t.Errorf("an idle drop a minute after the last report is not due")
	}
	if s.drops.add("invalid output frame", "", false, now.Add(3*dropReportEvery)) {
		t.Errorf("a drop during a call is due; calls report when they end")
	}
	if total, _, _ := s.drops.take(); total != 1002 {
		t.Errorf("take after 1002 drops: %d", total)
	}
}
