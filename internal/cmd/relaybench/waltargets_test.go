package main

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder"
)

// TestPrintWALTargetsSaysMetMissedAndNotBuilt: every target of issue 39 gets its median, its
// lowest–highest over the repetitions, in how many it was met and the verdict; the exactly-once
// row says "not built" while the forwarder lacks it.
func TestPrintWALTargetsSaysMetMissedAndNotBuilt(t *testing.T) {
	o := options{keys: []int{1, 1000}, payloads: []int{256}, relays: []string{relayOutboxkit, relayCDC, relayWAL, relayWALCeiling, relayWALExactlyOnce},
		rate: 1000, repeat: 2, dbs: []database{{name: "postgres", label: "PostgreSQL"}}}
	r := newResults(o)
	drain := func(relay string, keys int, rates ...float64) {
		for _, rate := range rates {
			r.add(drainKey{db: "postgres", size: 256, keys: keys, relay: relay}, sample{events: int(rate), seconds: 1, cpu: time.Duration(rate) * 20 * time.Microsecond})
		}
	}
	drain(relayOutboxkit, 1000, 20000, 20000)
	drain(relayCDC, 1000, 20000, 20000) // CPU per event as polling's: 1.00×
	drain(relayWAL, 1000, 40000, 30000)
	drain(relayWAL, 1, 38000, 21000) // 0.95× and 0.70×: met in 1 of 2, median 0.82× met
	drain(relayWALCeiling, 1000, 44000, 40000)
	r.markUnavailable(drainKey{db: "postgres", size: 256, keys: 1000, relay: relayWALExactlyOnce}, notBuilt)
	steady := []steadyResult{
		{relay: relayWAL, relays: 1, p99: 20 * time.Millisecond, written: 1000},
		{relay: relayWAL, relays: 1, p99: 40 * time.Millisecond, written: 1000},
	}
	cost := func(role string, us int) writeCost {
		return writeCost{role: role, median: time.Duration(us) * time.Microsecond}
	}
	writes := writeResults{
		singleReps: [][]writeCost{
			{cost("base:pgx", 1000), cost("wal:pgx", 1060), cost("floor:sql", 2000), cost("wal:sql", 2200),
				cost("polling:pgx", 1300), cost("cdc:pgx", 1200), cost("polling:sql", 2300), cost("cdc:sql", 2200)},
			{cost("base:pgx", 1000), cost("wal:pgx", 1120), cost("floor:sql", 2000), cost("wal:sql", 2040),
				cost("polling:pgx", 1300), cost("cdc:pgx", 1200), cost("polling:sql", 2300), cost("cdc:sql", 2200)},
		},
		concurrentReps: [][]concurrentCost{{{role: "wal:pgx", kept: 0.95}, {role: "wal:sql", kept: 0.85}}},
	}
	var b strings.Builder
	printWALTargets(&b, r, steady, writes, o)
	for _, want := range []string{
		"| write, pgx: one event over the bare business transaction (≤ +10 %) | +9 % | +6 %–+12 % | 1 of 2 | met |",
		"| write, database/sql: one event over the transaction + SELECT 1 (≤ +5 %) | +6 % | +2 %–+10 % | 1 of 2 | missed |",
		"| write, 8 writers, pgx: transactions kept (≥ 90 %) | 95 % | 95 %–95 % | 1 of 1 | met |",
		"| write, 8 writers, database/sql: transactions kept (≥ 90 %) | 85 % | 85 %–85 % | 0 of 1 | missed |",
		"no trigger or key lock, pgx (≤ 1.1×) | 1.08× | 1.08×–1.08× | 2 of 2 | met |",
		"| drain: outboxkit-wal / wal-ceiling (≥ 0.85×) | 0.83× | 0.75×–0.91× | 1 of 2 | missed |",
		"| drain: outboxkit-wal / polling (outboxkit) (≥ 1.5×) | 1.75× | 1.50×–2.00× | 2 of 2 | met |",
		"| hot key: outboxkit-wal 1 key / 1000 keys (≥ 0.8×) | 0.82× | 0.70×–0.95× | 1 of 2 | met |",
		"| exactly-once drain: outboxkit-wal-eo / outboxkit-wal (≥ 0.8×) | – | – | – | not measured: outboxkit-wal-eo: not built |",
		"(≤ 30ms) | 30ms | 20ms–40ms | 1 of 2 | met |",
		"| relay CPU per event: outboxkit-wal / polling (≤ 1×) | 1.00× | 1.00×–1.00× | 2 of 2 | met |",
		"| relay CPU per event: table-cdc (outboxkit-cdc) / polling (≤ 1.5×) | 1.00× |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("target table lacks %q:\n%s", want, b.String())
		}
	}
}

// TestWALExactlyOnceProbeTurnsOnTheRefusal: the at-least-once probe is not refused as
// unsupported, and the probe says not built exactly when the forwarder refuses exactly_once with
// Source wal as unsupported (forwarder.ErrUnsupported, whatever its wording).
func TestWALExactlyOnceProbeTurnsOnTheRefusal(t *testing.T) {
	if err := walProbeConfig(forwarder.AtLeastOnce).Validate(); errors.Is(err, forwarder.ErrUnsupported) {
		t.Fatalf("the at-least-once probe is refused as unsupported: %v", err)
	}
	err := walProbeConfig(forwarder.ExactlyOnce).Validate()
	if refused := errors.Is(err, forwarder.ErrUnsupported); walExactlyOnceBuilt() == refused {
		t.Fatalf("walExactlyOnceBuilt() = %v, but the forwarder's check says %v", walExactlyOnceBuilt(), err)
	}
	t.Logf("exactly-once on the wal source built: %v", walExactlyOnceBuilt())
}

// TestMedianSteadyRunsKeepsOneCurvePerRelay: the relays plot draws one curve per relay, the
// repeated wal steady run's of the median p99.
func TestMedianSteadyRunsKeepsOneCurvePerRelay(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	got := medianSteadyRuns([]steadyResult{
		{relay: relayOutboxkit, relays: 1, p99: ms(60)},
		{relay: relayWAL, relays: 1, p99: ms(50)}, {relay: relayWAL, relays: 1, p99: ms(200)}, {relay: relayWAL, relays: 1, p99: ms(96)},
	})
	if len(got) != 2 || got[0].relay != relayOutboxkit || got[1].relay != relayWAL || got[1].p99 != ms(96) {
		t.Fatalf("medianSteadyRuns = %+v, want outboxkit's run and the wal run of p99 96ms", got)
	}
}

// TestWALDrainCases: -source wal drains the wal ceiling and the exactly-once wal relay once, at
// the largest number of keys, and every other relay at every number of keys.
func TestWALDrainCases(t *testing.T) {
	o := options{keys: []int{1, 1000}, relays: []string{relayOutboxkit, relayWAL, relayWALCeiling, relayWALExactlyOnce}}
	want := []drainCase{{relayWALCeiling, 1000}, {relayOutboxkit, 1}, {relayWAL, 1}, {relayOutboxkit, 1000}, {relayWAL, 1000}, {relayWALExactlyOnce, 1000}}
	if got := drainCases(o); !slices.Equal(got, want) {
		t.Fatalf("drainCases = %v, want %v", got, want)
	}
}

// TestWALTargetsSayWhichDrainIsMissing: a target whose two drains were not both measured names
// them; one key alone measures no hot-key ratio.
func TestWALTargetsSayWhichDrainIsMissing(t *testing.T) {
	o := options{keys: []int{100}, payloads: []int{256}, relays: []string{relayOutboxkit, relayWAL}, repeat: 1,
		dbs: []database{{name: "postgres", label: "PostgreSQL"}}}
	r := newResults(o)
	r.add(drainKey{db: "postgres", size: 256, keys: 100, relay: relayWAL}, sample{events: 100, seconds: 1})
	var b strings.Builder
	printWALTargets(&b, r, nil, writeResults{}, o)
	for _, want := range []string{
		"not measured: this run has not both outboxkit-wal at 100 keys and wal-ceiling at 100 keys",
		"not measured: this run has not both outboxkit-cdc at 100 keys and outboxkit at 100 keys",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("target table lacks %q:\n%s", want, b.String())
		}
	}
	o.keys = []int{1}
	b.Reset()
	printWALTargets(&b, newResults(o), nil, writeResults{}, o)
	if !strings.Contains(b.String(), "not measured: -keys has no number of keys above 1") {
		t.Errorf("one key alone measured a hot-key ratio:\n%s", b.String())
	}
}
