package main

import (
	"strings"
	"testing"
	"time"
)

// The scheduled-events table gives each case's median with its lowest and highest, the ratios of
// each repetition (not the ratio of medians), and the early arrivals summed over the repetitions.
func TestPrintSchedTable(t *testing.T) {
	o := options{events: 20000, future: 1_000_000, rate: 1000}
	reps := []schedRep{
		{beside0: 10000, besideFuture: 9000, burst: 8000, p50: 40 * time.Millisecond, p99: 300 * time.Millisecond},
		{beside0: 8000, besideFuture: 8000, burst: 4000, p50: 60 * time.Millisecond, p99: 900 * time.Millisecond, early: 1},
		{beside0: 12000, besideFuture: 6000, burst: 12000, p50: 50 * time.Millisecond, p99: 500 * time.Millisecond},
	}
	var b strings.Builder
	printSchedTable(&b, "PostgreSQL", o, reps)
	out := b.String()
	for _, want := range []string{
		"| PostgreSQL | due, beside 0 scheduled | 10000 events/s | 8000–12000 |",
		"| PostgreSQL | due, beside 1000000 scheduled for tomorrow | 8000 events/s | 6000–9000 |",
		"| PostgreSQL | beside the future rows / beside 0 (per repetition) | 0.90× | 0.50–1.00× |",
		"| PostgreSQL | burst / ordinary backlog (per repetition) | 0.80× | 0.50–1.00× |",
		"| PostgreSQL | lateness p99 at 1000 scheduled events/s | 500ms | 300ms–900ms |",
		"| PostgreSQL | received before deliver_at (all repetitions) | 1 | |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
}
