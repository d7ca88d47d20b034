package forwarder

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

// generationOf is the generation number in a plan label ("" is 0).
func generationOf(t *testing.T, label string) int {
	t.Helper()
	if label == "" {
		return 0
	}
	_, n, ok := strings.Cut(label, ".")
	g, err := strconv.Atoi(n)
	if !ok || err != nil {
		t.Fatalf("plan label %q: want <tag>.<generation>", label)
	}
	return g
}

// TestReplannerMovesOnBacklogs: small batches never move the statements to a new generation; a
// backlog's first large batch does at once, then again after 1, 2, 4, 8 and 16 s while batches
// stay large, then no more; after a quiet spell, a new backlog starts over.
func TestReplannerMovesOnBacklogs(t *testing.T) {
	start := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	now := start
	r := &relay.Replanner{Now: func() time.Time { return now }}
	at := func(d time.Duration, rows, want int) {
		t.Helper()
		now = start.Add(d)
		if got := generationOf(t, r.Observe(rows, 0)); got != want {
			t.Fatalf("a batch of %d rows at %v: generation %d, want %d", rows, d, got, want)
		}
		if got := generationOf(t, r.Current()); got != want {
			t.Fatalf("after a batch of %d rows at %v: current generation %d, want %d", rows, d, got, want)
		}
	}
	for i := range 20 {
		at(time.Duration(i)*time.Second, relay.LargeBatch-1, 0)
	}
	at(20*time.Second, relay.LargeBatch, 1) // a backlog starts
	at(20*time.Second+900*time.Millisecond, 1000, 1)
	at(21*time.Second, 1000, 2)
	at(22*time.Second, 3, 2) // a small batch in between changes nothing
	at(22*time.Second+500*time.Millisecond, 1000, 2)
	at(23*time.Second, 1000, 3)
	at(27*time.Second, 1000, 4)
	at(35*time.Second-time.Millisecond, 1000, 4)
	at(35*time.Second, 1000, 5)
	at(44*time.Second, 1000, 5) // large batches 9 s apart: the same backlog
	at(51*time.Second, 1000, 6) // 16 s after the fifth: the last of the backlog
	for d := 51 * time.Second; d < 10*time.Minute; d += 5 * time.Second {
		at(d, 1000, 6)
	}
	// A quiet spell of backlogQuiet, then a new backlog: new plans at once.
	at(10*time.Minute+relay.BacklogQuiet-5*time.Second-time.Millisecond, 1000, 6)
	at(10*time.Minute+2*relay.BacklogQuiet, 1000, 7)
	at(10*time.Minute+2*relay.BacklogQuiet+time.Second, 1000, 8)
}

// TestReplannerLabelsAreItsOwn: two relays' replanners in one process label their generations
// differently, so relays sharing a connection pool never share a statement of a later
// generation, which the other may have planned on a small table.
func TestReplannerLabelsAreItsOwn(t *testing.T) {
	var a, b relay.Replanner
	la, lb := a.Observe(relay.LargeBatch, 0), b.Observe(relay.LargeBatch, 0)
	if la == "" || lb == "" || la == lb {
		t.Fatalf("first generations of two replanners: %q and %q, want two different labels", la, lb)
	}
}

// TestReplannerByteRule: a batch that reached half its byte bound shows a backlog whatever its
// rows (large payloads fill a batch before largeBatch rows), and so do full batches smaller
// than largeBatch.
func TestReplannerByteRule(t *testing.T) {
	r := relay.Replanner{MinRows: 20, MinBytes: 1 << 19}
	if got := r.Observe(19, 1<<19-1); got != "" {
		t.Fatalf("19 rows of %d bytes moved the statements to generation %q", 1<<19-1, got)
	}
	if got := r.Observe(5, 1<<19); got == "" {
		t.Fatal("5 rows of half the byte bound did not move the statements")
	}
	r = relay.Replanner{MinRows: 20}
	if got := r.Observe(20, 0); got == "" {
		t.Fatal("a batch of minRows rows did not move the statements")
	}
}
