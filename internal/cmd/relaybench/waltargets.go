package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Issue 39's targets, each a figure of the run (-source wal, with cdc and the polling relay
// beside it for the table modes' restatements), checked in every repetition.
const (
	walPgxOverhead  = 0.10 // pgx: one event adds at most this to the bare business transaction
	walSQLOverhead  = 0.05 // database/sql: at most this over the transaction plus one SELECT 1
	walOfCeiling    = 0.85 // drain ≥ this × wal-ceiling
	walOfPolling    = 1.5  // drain ≥ this × the polling relay
	walSteadyP99    = 30 * time.Millisecond
	walSteadyRate   = 1000
	walHotKey       = 0.8 // 1 key ≥ this × the largest-key drain
	walEOOfALO      = 0.8 // exactly-once drain ≥ this × at-least-once
	pollingOfInsert = 1.1 // polling write transaction ≤ this × the same row with no trigger or lock
	cdcCPUOfPolling = 1.5 // table-cdc relay CPU per event ≤ this × polling's
)

// walTarget is one line of the target table: the figure of each repetition, in the order they
// ran, and whether a figure meets the target.
type walTarget struct {
	name   string
	want   string
	values []float64
	format func(float64) string
	meets  func(float64) bool
	// missing says why the target has no figure ("" when it has one).
	missing string
}

// printWALTargets prints issue 39's target table when the run measured the wal relay: per
// target the median of the repetitions' figures, their lowest–highest, in how many repetitions
// the target was met, and the verdict on the median.
func printWALTargets(w io.Writer, r *results, steady []steadyResult, writes writeResults, o options) {
	if !contains(o.relays, relayWAL) || !containsDB(o.dbs, "postgres") {
		return
	}
	size, top := o.payloads[0], maxInt(o.keys)
	var targets []walTarget
	targets = append(targets, walWriteTargets(writes)...)
	targets = append(targets, walDrainTargets(r, size, top)...)
	targets = append(targets, walSteadyTarget(steady, o))
	targets = append(targets, walCPUTargets(r, size, top)...)
	fmt.Fprintf(w, "\ntargets of the wal source (issue 39), PostgreSQL, %s, drains of %d events (%s unless said), %d repetition(s) interleaved; the figure is the median of the repetitions' figures:\n\n",
		sizeLabel(size), o.events, keysLabel(top), o.repeat)
	fmt.Fprintln(w, "| target | figure (median) | lowest–highest | met in | verdict |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---|")
	for _, t := range targets {
		fmt.Fprintln(w, t.line())
	}
	if len(writes.slots) > 0 {
		fmt.Fprintf(w, "\nreplication slots on the server when each write-side repetition began: %v (the wal writer's slot guard reads every one)", writes.slots)
	}
	fmt.Fprintf(w, "\ncommand: %s\n", o.command)
	fmt.Fprintf(w, "drain ratios pair the two drains of each repetition; CPU per event is the relay process's user+system time over the events drained; load average now %s.\n", orUnknown(loadavg()))
}

func (t walTarget) line() string {
	if t.missing != "" || len(t.values) == 0 {
		return fmt.Sprintf("| %s (%s) | – | – | – | %s |", t.name, t.want, cmpOrString(t.missing, "not measured"))
	}
	sorted := slices.Sorted(slices.Values(t.values))
	med := median(sorted)
	met := 0
	for _, v := range t.values {
		if t.meets(v) {
			met++
		}
	}
	return fmt.Sprintf("| %s (%s) | %s | %s–%s | %d of %d | %s |", t.name, t.want, t.format(med), t.format(sorted[0]), t.format(sorted[len(sorted)-1]),
		met, len(t.values), verdict(t.meets(med)))
}

func cmpOrString(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func overheadLabel(v float64) string { return fmt.Sprintf("%+.0f %%", 100*v) }
func ratioLabel(v float64) string    { return fmt.Sprintf("%.2f×", v) }
func shareLabel(v float64) string    { return fmt.Sprintf("%.0f %%", 100*v) }

// walWriteTargets are the write-side targets, one figure per repetition of the write side.
func walWriteTargets(writes writeResults) []walTarget {
	overhead := func(costs []writeCost, role, baseRole string) (float64, bool) {
		c, okC := findRole(costs, role)
		b, okB := findRole(costs, baseRole)
		if !okC || !okB || b.median == 0 {
			return 0, false
		}
		return float64(c.median)/float64(b.median) - 1, true
	}
	single := func(name, want, role, baseRole string, limit float64) walTarget {
		t := walTarget{name: name, want: want, format: overheadLabel, meets: func(v float64) bool { return v <= limit }}
		for _, costs := range writes.singleReps {
			if v, ok := overhead(costs, role, baseRole); ok {
				t.values = append(t.values, v)
			}
		}
		return t
	}
	noWrites := ""
	if len(writes.singleReps) == 0 {
		noWrites = "not measured: no write side in this run (-write-side=false)"
	}
	kept := func(name, role string) walTarget {
		t := walTarget{name: name, want: fmt.Sprintf("≥ %.0f %%", 100*walKeep), format: shareLabel, meets: func(v float64) bool { return v >= walKeep }}
		for _, costs := range writes.concurrentReps {
			for _, c := range costs {
				if c.role == role {
					t.values = append(t.values, c.kept)
				}
			}
		}
		return t
	}
	polling := func(path string) walTarget {
		t := single("polling write transaction / the same row with no trigger or key lock, "+path, fmt.Sprintf("≤ %.1f×", pollingOfInsert),
			"polling:"+path, "cdc:"+path, pollingOfInsert-1)
		for i := range t.values {
			t.values[i]++ // a ratio, not an overhead
		}
		t.format = ratioLabel
		t.meets = func(v float64) bool { return v <= pollingOfInsert }
		return t
	}
	out := []walTarget{
		single("write, pgx: one event over the bare business transaction", "≤ +10 %", "wal:pgx", "base:pgx", walPgxOverhead),
		single("write, database/sql: one event over the transaction + SELECT 1", "≤ +5 %", "wal:sql", "floor:sql", walSQLOverhead),
		kept("write, 8 writers, pgx: transactions kept", "wal:pgx"),
		kept("write, 8 writers, database/sql: transactions kept", "wal:sql"),
		polling("pgx"),
		polling("sql"),
	}
	for i := range out {
		out[i].missing = noWrites
	}
	return out
}

func findRole(costs []writeCost, role string) (writeCost, bool) {
	for _, c := range costs {
		if c.role == role {
			return c, true
		}
	}
	return writeCost{}, false
}

// pairedRatios returns a/b for each repetition both rows drained, and the reason there is none.
func pairedRatios(r *results, a, b drainKey) ([]float64, string) {
	for _, k := range []drainKey{a, b} {
		if reason := r.unavailable(k); reason != "" {
			return nil, fmt.Sprintf("not measured: %s: %s", k.relay, reason)
		}
	}
	as, bs := r.samples[a], r.samples[b]
	var out []float64
	for i := range min(len(as), len(bs)) {
		if bs[i].rate() > 0 {
			out = append(out, as[i].rate()/bs[i].rate())
		}
	}
	if len(out) == 0 {
		return nil, notPaired(a, b)
	}
	return out, ""
}

// notPaired says that the drains of a target's two rows were not both measured.
func notPaired(a, b drainKey) string {
	return fmt.Sprintf("not measured: this run has not both %s at %s and %s at %s", a.relay, keysLabel(a.keys), b.relay, keysLabel(b.keys))
}

// walDrainTargets are the drain targets, ratios of two drains of the same repetition.
func walDrainTargets(r *results, size, top int) []walTarget {
	key := func(relay string, keys int) drainKey {
		return drainKey{db: "postgres", size: size, keys: keys, relay: relay}
	}
	ratioTarget := func(name string, limit float64, a, b drainKey) walTarget {
		t := walTarget{name: name, want: fmt.Sprintf("≥ %.2g×", limit), format: ratioLabel, meets: func(v float64) bool { return v >= limit }}
		t.values, t.missing = pairedRatios(r, a, b)
		return t
	}
	wal := key(relayWAL, top)
	hot := ratioTarget(fmt.Sprintf("hot key: outboxkit-wal 1 key / %s", keysLabel(top)), walHotKey, key(relayWAL, 1), wal)
	if top == 1 {
		hot.values, hot.missing = nil, "not measured: -keys has no number of keys above 1"
	}
	return []walTarget{
		ratioTarget("drain: outboxkit-wal / wal-ceiling", walOfCeiling, wal, key(relayWALCeiling, top)),
		ratioTarget("drain: outboxkit-wal / polling (outboxkit)", walOfPolling, wal, key(relayOutboxkit, top)),
		hot,
		ratioTarget("exactly-once drain: outboxkit-wal-eo / outboxkit-wal", walEOOfALO, key(relayWALExactlyOnce, top), wal),
	}
}

// walSteadyTarget is the steady-rate target: p99 within walSteadyP99 with the writer reaching
// the rate (a repetition whose writer did not reach 90 % of it does not meet it).
func walSteadyTarget(steady []steadyResult, o options) walTarget {
	t := walTarget{name: fmt.Sprintf("steady commit → consume p99 at %d events/s, writer reaching the rate", o.rate),
		want: fmt.Sprintf("≤ %v", walSteadyP99), format: func(v float64) string { return time.Duration(v).Round(100 * time.Microsecond).String() }}
	var slow []string
	for _, s := range steady {
		if s.relay != relayWAL || s.relays != 1 {
			continue
		}
		t.values = append(t.values, float64(s.p99))
		if s.written < 0.9*float64(o.rate) {
			slow = append(slow, fmt.Sprintf("%.0f/s", s.written))
		}
	}
	t.meets = func(v float64) bool { return v <= float64(walSteadyP99) && len(slow) == 0 }
	if len(slow) > 0 {
		t.name += fmt.Sprintf(" (written at %s: the writer did not reach it)", strings.Join(slow, ", "))
	}
	if o.rate != walSteadyRate {
		t.name += fmt.Sprintf(" — the target is set at %d events/s", walSteadyRate)
	}
	if o.rate == 0 {
		t.missing = "not measured: -rate 0"
	}
	return t
}

// walCPUTargets compare the relays' CPU per event, per repetition.
func walCPUTargets(r *results, size, top int) []walTarget {
	key := func(relay string) drainKey { return drainKey{db: "postgres", size: size, keys: top, relay: relay} }
	cpuRatio := func(name string, limit float64, a, b drainKey) walTarget {
		t := walTarget{name: name, want: fmt.Sprintf("≤ %.2g×", limit), format: ratioLabel, meets: func(v float64) bool { return v <= limit }}
		as, bs := r.samples[a], r.samples[b]
		for i := range min(len(as), len(bs)) {
			if bs[i].cpuPerEvent() > 0 {
				t.values = append(t.values, float64(as[i].cpuPerEvent())/float64(bs[i].cpuPerEvent()))
			}
		}
		if len(t.values) == 0 {
			t.missing = notPaired(a, b)
		}
		return t
	}
	poll := key(relayOutboxkit)
	return []walTarget{
		cpuRatio("relay CPU per event: outboxkit-wal / polling", 1, key(relayWAL), poll),
		cpuRatio("relay CPU per event: table-cdc (outboxkit-cdc) / polling", cdcCPUOfPolling, key(relayCDC), poll),
	}
}
