package forwarder

import (
	"testing"
	"time"
)

// TestReplannerMovesOnBacklogs: small batches never move the statements to a new generation; a
// backlog's first large batch does at once, then again after 1 s, 2 s, 4 s and so on up to once a
// minute while batches stay large; after a quiet spell, a new backlog starts over.
func TestReplannerMovesOnBacklogs(t *testing.T) {
	start := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	now := start
	r := &replanner{now: func() time.Time { return now }}
	at := func(d time.Duration, rows, want int) {
		t.Helper()
		now = start.Add(d)
		if got := r.observe(rows); got != want {
			t.Fatalf("a batch of %d rows at %v: generation %d, want %d", rows, d, got, want)
		}
		if got := r.current(); got != want {
			t.Fatalf("after a batch of %d rows at %v: current generation %d, want %d", rows, d, got, want)
		}
	}
	for i := range 20 {
		at(time.Duration(i)*time.Second, largeBatch-1, 0)
	}
	at(20*time.Second, largeBatch, 1) // a backlog starts
	at(20*time.Second+900*time.Millisecond, 1000, 1)
	at(21*time.Second, 1000, 2)
	at(22*time.Second, 3, 2) // a small batch in between changes nothing
	at(22*time.Second+500*time.Millisecond, 1000, 2)
	at(23*time.Second, 1000, 3)
	at(27*time.Second, 1000, 4)
	at(35*time.Second-time.Millisecond, 1000, 4)
	at(35*time.Second, 1000, 5)
	// Once a minute at most while the backlog lasts.
	gen := r.current()
	for d := time.Duration(0); d <= 10*time.Minute; d += 100 * time.Millisecond {
		now = start.Add(time.Hour + d)
		r.observe(1000)
	}
	// at 0, 1, 3, 7, 15, 31 and 63 s, then every minute: 123, 183, ..., 543 s
	if moves := r.current() - gen; moves != 15 {
		t.Fatalf("10 minutes of large batches made %d generations, want 15", moves)
	}
	// A quiet spell of backlogQuiet, then a new backlog: new plans at once.
	gen = r.current()
	last := now
	at(last.Sub(start)+backlogQuiet-time.Millisecond, 5, gen)
	at(last.Sub(start)+backlogQuiet, 1000, gen+1)
	at(last.Sub(start)+backlogQuiet+time.Second, 1000, gen+2)
}
