package engine

import (
	"testing"
	"time"
)

// TestFetchBound checks the overall deadline of a spill copy: twice the
// call's timeout, at most 10 s, at least 2 s.
func TestFetchBound(t *testing.T) {
	for _, tc := range []struct {
		timeout int
		want    time.Duration
	}{
		{0, 2 * time.Second},
		{1, 2 * time.Second},
		{2, 4 * time.Second},
		{5, 10 * time.Second},
		{30, 10 * time.Second},
		{3600, 10 * time.Second},
	} {
		if got := FetchBound(tc.timeout); got != tc.want {
			t.Errorf("FetchBound(%d) = %v, want %v", tc.timeout, got, tc.want)
		}
	}
}
