package main

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// drainKey names one drain row: a relay on a database, with a payload size and a number of keys.
type drainKey struct {
	db    string // database.name
	size  int
	keys  int
	relay string
}

// results collects the samples of every drain row, and the rows that could not run.
type results struct {
	o       options
	samples map[drainKey][]sample
	na      map[drainKey]string // row -> reason
}

func newResults(o options) *results {
	return &results{o: o, samples: map[drainKey][]sample{}, na: map[drainKey]string{}}
}

func (r *results) add(k drainKey, s sample) { r.samples[k] = append(r.samples[k], s) }

func (r *results) markUnavailable(k drainKey, reason string) { r.na[k] = reason }

func (r *results) unavailable(k drainKey) string { return r.na[k] }

// unavailableRelay returns the reason a relay could not run on a database, if any of its rows
// could not.
func (r *results) unavailableRelay(db, relay string) string {
	for k, reason := range r.na {
		if k.db == db && k.relay == relay {
			return reason
		}
	}
	return ""
}

// stat is the summary of a row's samples: medians, and the spread of the rates.
type stat struct {
	n        int
	rate     float64 // median events/s
	min, max float64 // of events/s
	cpu      time.Duration
	rssMiB   float64
}

// spread is (max - min) / median of the rates; 0 with a single sample.
func (s stat) spread() float64 {
	if s.n < 2 || s.rate == 0 {
		return 0
	}
	return (s.max - s.min) / s.rate
}

func (r *results) stat(k drainKey) (stat, bool) {
	ss := r.samples[k]
	if len(ss) == 0 {
		return stat{}, false
	}
	rates := make([]float64, len(ss))
	cpus := make([]time.Duration, len(ss))
	rss := make([]float64, len(ss))
	for i, s := range ss {
		rates[i], cpus[i], rss[i] = s.rate(), s.cpu, s.rssMiB
	}
	slices.Sort(rates)
	slices.Sort(cpus)
	slices.Sort(rss)
	return stat{n: len(ss), rate: median(rates), min: rates[0], max: rates[len(rates)-1],
		cpu: cpus[len(cpus)/2], rssMiB: median(rss)}, true
}

// rate returns the median events/s of a row, 0 when it was not measured.
func (r *results) rate(k drainKey) float64 {
	s, ok := r.stat(k)
	if !ok {
		return 0
	}
	return s.rate
}

// ceilingKey is the ceiling row of (db, size): measured once, at the largest number of keys.
func (r *results) ceilingKey(db string, size int) drainKey {
	return drainKey{db: db, size: size, keys: maxInt(r.o.keys), relay: relayCeiling}
}

// label returns the printed name of a database.
func (r *results) label(db string) string {
	for _, d := range r.o.dbs {
		if d.name == db {
			return d.label
		}
	}
	return db
}

func median(sorted []float64) float64 {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func ratio(a, b float64) string {
	if a <= 0 || b <= 0 {
		return "–"
	}
	r := a / b
	if r >= 10 {
		return fmt.Sprintf("%.1f×", r)
	}
	return fmt.Sprintf("%.2f×", r)
}

func sizeLabel(size int) string {
	if size >= 1024 && size%1024 == 0 {
		return strconv.Itoa(size/1024) + " KiB"
	}
	return strconv.Itoa(size) + " B"
}

// printDrainTable prints the drain table: per (db, payload) the ceiling row, then per number of
// keys outboxkit's row with its ratios and the stock forwarder's row.
func printDrainTable(w io.Writer, r *results, o options) {
	topKeys := maxInt(o.keys)
	compression := o.compress
	if compression == "" {
		compression = "lz4"
	}
	fmt.Fprintf(w, "\nrelay benchmark, backlog drain: %d events per drain, Kafka %s (compression %s), median of %d run(s) per row\n",
		o.events, strings.Join(o.brokers, ","), compression, o.repeat)
	fmt.Fprintf(w, "command: %s\n\n", o.command)
	fmt.Fprintf(w, "| database | payload | keys | relay | events/s | spread | relay CPU | relay peak RSS | outboxkit / stock | outboxkit / ceiling | vs %d keys |\n", topKeys)
	fmt.Fprintln(w, "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|")
	t := &drainTable{w: w, r: r}
	for _, d := range o.dbs {
		for _, size := range o.payloads {
			ck := r.ceilingKey(d.name, size)
			t.row(d, size, ck, "| | |")
			for _, keys := range o.keys {
				t.keysRows(d, size, keys, topKeys)
			}
		}
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "events/s: events drained / seconds from the relay's go to the last event consumed; spread: ±(max−min)/2 of the runs, relative to the median.\n")
	fmt.Fprintf(w, "ceiling: claim+delete %d rows (SKIP LOCKED), one franz-go ProduceSync, commit; no order, no retries; measured with %d keys.\n", ceilingBatch, topKeys)
	for _, other := range otherBrokerRelays {
		if contains(o.relays, other) {
			fmt.Fprintf(w, "%s: the same forwarder publishing to %s instead of Kafka; x of Kafka: its rate over outboxkit's.\n", other, targetOf(other).describe(o))
		}
	}
	if contains(o.relays, relayWALCeiling) {
		fmt.Fprintf(w, "wal-ceiling: the backlog written by outbox.Writer in ModeWAL (logical decoding messages, no row), streamed from its slot (pgoutput, messages on), each envelope decoded and its events produced with franz-go, the slot confirmed behind the acknowledgements; no order, no parking, no retries: the floor the wal source's drain is set against; x of polling: its rate over outboxkit's.\n")
	}
	if contains(o.relays, relaySQLWriters) {
		fmt.Fprintf(w, "outboxkit-sql: the same forwarder draining a backlog written by plain-SQL INSERTs (one per event, key_hash and the key's lock from the table's trigger, docs/writers.md) instead of outbox.Writer; x of outbox.Writer's: its rate over outboxkit's.\n")
	}
	for i, f := range t.footnotes {
		fmt.Fprintf(w, "[%d] %s\n", i+1, f)
	}
	printTargets(w, r, o)
}

// drainTable writes the rows of the drain table, numbering the reasons of unavailable rows as
// footnotes.
type drainTable struct {
	w         io.Writer
	r         *results
	footnotes []string
}

// footnote returns the mark of reason, numbering it on its first use.
func (t *drainTable) footnote(reason string) string {
	for i, f := range t.footnotes {
		if f == reason {
			return fmt.Sprintf("[%d]", i+1)
		}
	}
	t.footnotes = append(t.footnotes, reason)
	return fmt.Sprintf("[%d]", len(t.footnotes))
}

// row writes the row of k, if it was measured, with the ratio cells extra.
func (t *drainTable) row(d database, size int, k drainKey, extra string) {
	if reason := t.r.unavailable(k); reason != "" {
		fmt.Fprintf(t.w, "| %s | %s | %d | %s | n/a %s | | | | | | |\n", d.label, sizeLabel(size), k.keys, k.relay, t.footnote(reason))
		return
	}
	s, ok := t.r.stat(k)
	if !ok {
		return
	}
	spread := "–"
	if s.n > 1 {
		spread = fmt.Sprintf("±%.0f %%", 50*s.spread())
	}
	fmt.Fprintf(t.w, "| %s | %s | %d | %s | %.0f | %s | %.2f s | %.0f MiB | %s\n", d.label, sizeLabel(size), k.keys, k.relay,
		s.rate, spread, s.cpu.Seconds(), s.rssMiB, extra)
}

// keysRows writes the rows of every relay's drain of keys keys, each with its ratios.
func (t *drainTable) keysRows(d database, size, keys, topKeys int) {
	r := t.r
	key := func(relay string) drainKey { return drainKey{db: d.name, size: size, keys: keys, relay: relay} }
	ceiling := r.rate(r.ceilingKey(d.name, size))
	top := r.rate(drainKey{db: d.name, size: size, keys: topKeys, relay: relayOutboxkit})
	ok, sk := key(relayOutboxkit), key(relayStock)
	okRate := r.rate(ok)
	stockCell := ratio(okRate, r.rate(sk))
	if reason := r.unavailable(sk); reason != "" {
		stockCell = "n/a " + t.footnote(reason)
	}
	t.row(d, size, ok, fmt.Sprintf("%s | %s | %s |", stockCell, ratio(okRate, ceiling), ratio(okRate, top)))
	qk := key(relaySQLWriters)
	t.row(d, size, qk, fmt.Sprintf("| %s | %s of outbox.Writer's |", ratio(r.rate(qk), ceiling), ratio(r.rate(qk), okRate)))
	for _, other := range otherBrokerRelays {
		bk := key(other)
		t.row(d, size, bk, fmt.Sprintf("| %s | %s of Kafka |", ratio(r.rate(bk), ceiling), ratio(r.rate(bk), okRate)))
	}
	for _, enc := range []string{relayAvro, relayProtobuf} {
		xk := key(enc)
		t.row(d, size, xk, fmt.Sprintf("| %s | %s of raw |", ratio(r.rate(xk), ceiling), ratio(r.rate(xk), okRate)))
	}
	ek := key(relayExactlyOnce)
	t.row(d, size, ek, fmt.Sprintf("| %s | %s of at-least-once |", ratio(r.rate(ek), ceiling), ratio(r.rate(ek), okRate)))
	ck := key(relayCDC)
	t.row(d, size, ck, fmt.Sprintf("%s | %s | %s of polling |", ratio(r.rate(ck), r.rate(sk)), ratio(r.rate(ck), ceiling), ratio(r.rate(ck), okRate)))
	wk := key(relayWALCeiling)
	t.row(d, size, wk, fmt.Sprintf("| %s | %s of polling |", ratio(r.rate(wk), ceiling), ratio(r.rate(wk), okRate)))
	wlk := key(relayWAL)
	t.row(d, size, wlk, fmt.Sprintf("%s | %s | %s of polling, %s of wal-ceiling |", ratio(r.rate(wlk), r.rate(sk)), ratio(r.rate(wlk), ceiling),
		ratio(r.rate(wlk), okRate), ratio(r.rate(wlk), r.rate(drainKey{db: d.name, size: size, keys: topKeys, relay: relayWALCeiling}))))
	wek := key(relayWALExactlyOnce)
	t.row(d, size, wek, fmt.Sprintf("| %s | %s of wal at-least-once |", ratio(r.rate(wek), ceiling), ratio(r.rate(wek), r.rate(wlk))))
	cek := key(relayCDCExactlyOnce)
	t.row(d, size, cek, fmt.Sprintf("| %s | %s of cdc at-least-once |", ratio(r.rate(cek), ceiling), ratio(r.rate(cek), r.rate(ck))))
	t.row(d, size, sk, "| | |")
}

// printTargets checks the figures against the targets of issue 10: the 1- and 10-key drains at
// least 80 % of the largest-key drain, that one at least 80 % of the ceiling, and at least 20×
// the stock forwarder in every row.
func printTargets(w io.Writer, r *results, o options) {
	topKeys := maxInt(o.keys)
	var lines []string
	for _, d := range o.dbs {
		for _, size := range o.payloads {
			top := r.rate(drainKey{db: d.name, size: size, keys: topKeys, relay: relayOutboxkit})
			if top == 0 {
				continue
			}
			var parts []string
			for _, keys := range o.keys {
				if keys == topKeys {
					continue
				}
				if v := r.rate(drainKey{db: d.name, size: size, keys: keys, relay: relayOutboxkit}); v > 0 {
					parts = append(parts, fmt.Sprintf("%s %s of %s (%s)", keysLabel(keys), percent(v/top), keysLabel(topKeys), verdict(v/top >= 0.8)))
				}
			}
			if c := r.rate(r.ceilingKey(d.name, size)); c > 0 {
				parts = append(parts, fmt.Sprintf("%s %s of the ceiling (%s)", keysLabel(topKeys), percent(top/c), verdict(top/c >= 0.8)))
			}
			worst := 0.0
			for _, keys := range o.keys {
				v := r.rate(drainKey{db: d.name, size: size, keys: keys, relay: relayOutboxkit})
				s := r.rate(drainKey{db: d.name, size: size, keys: keys, relay: relayStock})
				if v > 0 && s > 0 && (worst == 0 || v/s < worst) {
					worst = v / s
				}
			}
			if worst > 0 {
				parts = append(parts, fmt.Sprintf("lowest outboxkit/stock %.1f× (%s)", math.Floor(10*worst)/10, verdict(worst >= 20)))
			}
			if len(parts) > 0 {
				lines = append(lines, fmt.Sprintf("- %s, %s: %s", d.label, sizeLabel(size), strings.Join(parts, "; ")))
			}
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\ntargets (issue 10: ≥ 80 % of the 1,000-key drain, ≥ 80 % of the ceiling, ≥ 20× stock):")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

// percent prints a share rounded down, so that a missed 80 % target never prints as 80 %.
func percent(share float64) string { return fmt.Sprintf("%.0f %%", math.Floor(100*share)) }

func keysLabel(n int) string {
	if n == 1 {
		return "1 key"
	}
	return strconv.Itoa(n) + " keys"
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

// steadyVerdict is verdict(ok) for a target of the steady run at rate events/s, or "not
// measured" when the writers committed at under 90 % of that rate: the latency was then measured
// at a lower load than the target's.
func steadyVerdict(s steadyResult, rate int, ok bool) string {
	if s.written > 0 && s.written < 0.9*float64(rate) {
		return fmt.Sprintf("not measured: written at %.0f/s", s.written)
	}
	return verdict(ok)
}

func printSteadyTable(w io.Writer, rows []steadyResult, o options) {
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\nsteady rate: single-event transactions at %d/s from %d writers for %d s, %s payloads, %d keys; latency from commit to consumed\n\n",
		o.rate, o.writers, o.seconds, sizeLabel(o.payloads[0]), maxInt(o.keys))
	fmt.Fprintln(w, "| database | relay | events | committed/s | p50 | p99 | relay CPU | relay peak RSS | commit → on the stream p50 / p99 |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|---:|---:|")
	recv := false
	for _, r := range rows {
		lag := "–"
		if r.hasRecv {
			recv = true
			lag = fmt.Sprintf("%s / %s", r.recvP50.Round(100*time.Microsecond), r.recvP99.Round(100*time.Microsecond))
		}
		label := r.relay
		if r.relays > 1 {
			label = fmt.Sprintf("%s ×%d", r.relay, r.relays)
		}
		fmt.Fprintf(w, "| %s | %s | %d | %.0f | %s | %s | %.2f s | %.0f MiB | %s |\n", r.db, label, r.events, r.written,
			r.p50.Round(100*time.Microsecond), r.p99.Round(100*time.Microsecond), r.cpu.Seconds(), r.rssMiB, lag)
	}
	printRelaysTarget(w, rows, o.rate)
	fmt.Fprintf(w, "\ncommitted/s: the writers' transactions per second from the first write to the last commit; a row below %d/s was measured at that lower rate (commits took longer than the rate allows).\n", o.rate)
	if recv {
		fmt.Fprintln(w, "\ncommit → on the stream: the cdc relay's outboxkit_cdc_receive_lag_seconds over the run (from the commit timestamp PostgreSQL writes to the WAL to the relay receiving the commit: the walsender's decoding and sending), interpolated in its buckets; a floor under the cdc relay's latency that the relay does not control.")
	}
}

// noise records how busy the machine was during the run: the load average before, during
// (sampled before every measurement) and after, and the share of all cores busy over the run.
type noise struct {
	before, after string
	min1, max1    float64
	samples       int
	cpuStart      cpuTimes
	busy          float64 // share of all cores busy over the run, from /proc/stat
	elapsed       time.Duration
}

func newNoise() *noise {
	n := &noise{before: loadavg(), cpuStart: readCPUTimes()}
	return n
}

func (n *noise) sample() {
	f := strings.Fields(loadavg())
	if len(f) == 0 {
		return
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return
	}
	if n.samples == 0 || v < n.min1 {
		n.min1 = v
	}
	n.max1 = max(n.max1, v)
	n.samples++
}

func (n *noise) finish(elapsed time.Duration) {
	n.after = loadavg()
	n.elapsed = elapsed
	end := readCPUTimes()
	if total := end.total - n.cpuStart.total; total > 0 {
		n.busy = 1 - float64(end.idle-n.cpuStart.idle)/float64(total)
	}
}

func (n *noise) print(w io.Writer, r *results) {
	n.printMachine(w)
	n.printSpread(w, r)
}

// printMachine prints the run's duration, the load average and how busy the cores were.
func (n *noise) printMachine(w io.Writer) {
	fmt.Fprintf(w, "\nmachine noise: run took %s on %d cores; load average (1, 5, 15 min) before %s, after %s",
		n.elapsed.Round(time.Second), runtime.NumCPU(), orUnknown(n.before), orUnknown(n.after))
	if n.samples > 0 {
		fmt.Fprintf(w, ", 1-min load %.2f–%.2f over the run", n.min1, n.max1)
	}
	if n.busy > 0 {
		fmt.Fprintf(w, "; all cores %.0f %% busy (benchmark, services and everything else)", 100*n.busy)
	}
	fmt.Fprintln(w)
}

// printSpread prints the spread of the repeated drains.
func (n *noise) printSpread(w io.Writer, r *results) {
	var spreads []float64
	worst, worstKey := 0.0, drainKey{}
	for k := range r.samples {
		s, _ := r.stat(k)
		if s.n < 2 {
			continue
		}
		spreads = append(spreads, s.spread())
		if s.spread() > worst {
			worst, worstKey = s.spread(), k
		}
	}
	if len(spreads) == 0 {
		fmt.Fprintln(w, "repeat: 1 run per row, no spread measured (use -repeat 3 for one)")
		return
	}
	slices.Sort(spreads)
	fmt.Fprintf(w, "repeat: %d runs per row; spread of events/s, ±(max−min)/2 relative to the median: median ±%.0f %%, worst ±%.0f %% (%s %s, %s, %s)\n",
		r.o.repeat, 50*median(spreads), 50*worst, r.label(worstKey.db), worstKey.relay, sizeLabel(worstKey.size), keysLabel(worstKey.keys))
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// loadavg returns the first three fields of /proc/loadavg, "" when it cannot be read.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

type cpuTimes struct{ total, idle uint64 }

// readCPUTimes reads the aggregate "cpu" line of /proc/stat (zero when it cannot be read).
func readCPUTimes() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 5 || f[0] != "cpu" {
		return cpuTimes{}
	}
	var t cpuTimes
	for i, s := range f[1:] {
		v, _ := strconv.ParseUint(s, 10, 64)
		t.total += v
		if i == 3 || i == 4 { // idle, iowait
			t.idle += v
		}
	}
	return t
}

// printRelaysTarget checks issue 22's target for every (database, relay) measured with 1 and 3
// relay processes: the p99 of 3 relays at most 1.5 times the p99 of 1.
func printRelaysTarget(w io.Writer, rows []steadyResult, rate int) {
	for _, three := range rows {
		if three.relays != 3 {
			continue
		}
		for _, one := range rows {
			if one.relays == 1 && one.db == three.db && one.relay == three.relay {
				ratio := three.p99.Seconds() / one.p99.Seconds()
				fmt.Fprintf(w, "\ntarget (issue 22: p99 of 3 relays ≤ 1.5 × p99 of 1): %s %s: %.2f× (%s)\n",
					three.db, three.relay, ratio, steadyVerdict(slowerWriters(one, three), rate, ratio <= 1.5))
			}
		}
	}
}

// slowerWriters returns the one of a and b whose writers committed at the lower rate.
func slowerWriters(a, b steadyResult) steadyResult {
	if b.written < a.written {
		return b
	}
	return a
}
