package bench

import (
	"math"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests if any goroutine outlives them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"3.924MB": 3924000, "536.9MB": 536900000, "10kB": 10000, "0B": 0,
		"12.5MiB": 12.5 * (1 << 20), "1GiB": 1 << 30, "2.5GB": 2500000000,
	} {
		got, err := parseSize(in)
		if err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "MB", "12 XB", "1.2.3MB", "--"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) succeeded", in)
		}
	}
}

func TestPct(t *testing.T) {
	d := []time.Duration{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	if got := pct(d, 50); got != 5 {
		t.Errorf("p50 = %d, want 5", got)
	}
	if got := pct(d, 95); got != 10 {
		t.Errorf("p95 = %d, want 10", got)
	}
	if got := pct(nil, 50); got != 0 {
		t.Errorf("p50 of nothing = %d", got)
	}
}

func TestReportRatiosAndMarkdown(t *testing.T) {
	r := &Report{Date: "2026-01-01", Machine: "m", Bridge: "v", Mode: "quick", Samples: 20}
	r.add(Figure{ID: "a", Name: "warm", Value: 2, Unit: "ms", Baseline: "fresh", BaseVal: 100, RatioIs: Faster,
		Samples: 20, Target: ">= 25x"}, true)
	r.skip("b", "real servers", "not installed")
	r.add(Figure{ID: "c", Name: "cold", Value: 200, Unit: "ms", Baseline: "fresh", BaseVal: 100, RatioIs: Faster, Samples: 3}, true)
	r.add(Figure{ID: "d", Name: "tokens", Value: 150, Unit: "tokens", Baseline: "classic", BaseVal: 600, Samples: 1,
		Target: "<= 150"}, false)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if f, _ := r.Figure("a"); f.Ratio != 50 || f.Met == nil || !*f.Met {
		t.Errorf("figure a: %+v", f)
	}
	if f, _ := r.Figure("d"); f.Ratio != 0.25 || f.RatioIs != Of || f.Met == nil || *f.Met {
		t.Errorf("figure d: %+v", f)
	}
	if f, _ := r.Figure("c"); f.Met != nil {
		t.Errorf("figure c has no target but Met is set: %+v", f)
	}
	md := r.Markdown()
	rows := strings.Split(strings.TrimSpace(md), "\n")
	want := []string{
		"| warm | 2 ms | fresh: 100 ms | 50x faster | 20 | >= 25x | yes |",
		"| real servers | not measured | not installed | | 0 | | |",
		"| cold | 200 ms | fresh: 100 ms | 2x slower | 3 |  |  |",
		"| tokens | 150 tokens | classic: 600 tokens | 0.25x baseline | 1 | <= 150 | **no** |",
	}
	got := rows[len(rows)-len(want):]
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}

	r.add(Figure{ID: "e", Value: math.NaN(), BaseVal: 1}, true)
	if r.err == nil || len(r.Figures) != 3 {
		t.Errorf("a NaN figure was recorded: err %v, %d figures", r.err, len(r.Figures))
	}
}
