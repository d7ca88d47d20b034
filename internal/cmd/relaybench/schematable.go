package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
)

// schemaCostTarget is issue 41's target: the encoding costs at most this share of the raw drain
// (the schema relay drains at least 1 − schemaCostTarget of the raw relay's events/s).
const schemaCostTarget = 0.15

// schemaRow is one schema relay's drain beside the raw relay's, in one (db, size, keys).
type schemaRow struct {
	relay          string
	raw, enc       stat
	paired         []float64 // enc/raw per repetition, in the order they ran
	pairedCPU      []float64 // enc/raw relay CPU per event per repetition
	requests       int       // registry requests over every drain of the row
	events         int       // events over every drain of the row
	rawCPU, encCPU cpuStat   // relay CPU per event
}

// cpuStat is the relay CPU per event of a row's drains, in µs: median, lowest and highest.
type cpuStat struct{ median, min, max float64 }

func (c cpuStat) String() string {
	if c.min == c.max {
		return fmt.Sprintf("%.0f", c.median)
	}
	return fmt.Sprintf("%.0f (%.0f–%.0f)", c.median, c.min, c.max)
}

// cost is the share of the raw drain's rate the encoding costs (median over median).
func (s schemaRow) cost() float64 { return 1 - s.enc.rate/s.raw.rate }

// pairedCosts are the encoding's costs per repetition, 1 − enc/raw of the repetition's two
// drains, sorted.
func (s schemaRow) pairedCosts() []float64 {
	costs := make([]float64, len(s.paired))
	for i, r := range s.paired {
		costs[i] = 1 - r
	}
	slices.Sort(costs)
	return costs
}

// schemaRows returns the schema relays' rows of (db, size, keys) that were measured with the raw
// relay.
func schemaRows(r *results, db string, size, keys int) []schemaRow {
	rawKey := drainKey{db: db, size: size, keys: keys, relay: relayOutboxkit}
	raw, ok := r.stat(rawKey)
	if !ok {
		return nil
	}
	var rows []schemaRow
	for _, relay := range []string{relayAvro, relayProtobuf} {
		k := drainKey{db: db, size: size, keys: keys, relay: relay}
		enc, ok := r.stat(k)
		if !ok {
			continue
		}
		row := schemaRow{relay: relay, raw: raw, enc: enc}
		rs, es := r.samples[rawKey], r.samples[k]
		for i := range min(len(rs), len(es)) {
			row.paired = append(row.paired, es[i].rate()/rs[i].rate())
			if rs[i].cpu > 0 && rs[i].events > 0 && es[i].events > 0 {
				perRaw := float64(rs[i].cpu) / float64(rs[i].events)
				row.pairedCPU = append(row.pairedCPU, float64(es[i].cpu)/float64(es[i].events)/perRaw)
			}
		}
		for _, s := range es {
			row.requests += s.registryRequests
			row.events += s.events
		}
		row.rawCPU, row.encCPU = cpuPerEvent(rs), cpuPerEvent(es)
		rows = append(rows, row)
	}
	return rows
}

// cpuPerEvent is the relay CPU per event of samples, in µs.
func cpuPerEvent(samples []sample) cpuStat {
	v := make([]float64, 0, len(samples))
	for _, s := range samples {
		if s.events > 0 {
			v = append(v, float64(s.cpu.Microseconds())/float64(s.events))
		}
	}
	if len(v) == 0 {
		return cpuStat{}
	}
	slices.Sort(v)
	return cpuStat{median: median(v), min: v[0], max: v[len(v)-1]}
}

// printSchemaTable prints the schema relays beside the raw relay (issue 41): the drains' rates
// and spreads, the ratio, the registry requests per 10,000 events, and the target.
func printSchemaTable(w io.Writer, r *results, o options) {
	if !o.hasSchemaRelay() {
		return
	}
	var lines []string
	var rows []schemaRow
	for _, d := range o.dbs {
		for _, size := range o.payloads {
			for _, keys := range o.keys {
				for _, row := range schemaRows(r, d.name, size, keys) {
					lines = append(lines, schemaLine(d.label, size, keys, row))
					rows = append(rows, row)
				}
			}
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "\nschema encoding (issue 41: the encoding costs at most %.0f %% of the raw drain; the same JSON backlog, registry %s, median of %d run(s), interleaved):\n\n",
		100*schemaCostTarget, o.registry, o.repeat)
	fmt.Fprintln(w, "| database | payload | keys | relay | events/s (spread) | raw events/s (spread) | of raw | per repetition | relay CPU µs/event: encoding (raw), median (lowest–highest) | registry requests / 10k events | cost ≤ 15 % | CPU cost ≤ 15 % |")
	fmt.Fprintln(w, "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---|")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	fmt.Fprintln(w, "\nof raw: median over median; per repetition: the ratio of the two drains of each repetition (they ran one after the other,")
	fmt.Fprintln(w, "raw first in repetition 1, the order rotated by one relay in each next repetition), lowest–highest;")
	fmt.Fprintln(w, "cost ≤ 15 %: the median of the per-repetition costs (1 − ratio); the verdict says whether its margin to the target is beyond")
	fmt.Fprintln(w, "the spread (± half the per-repetition costs' range) or within it (not decided by this run);")
	fmt.Fprintln(w, "relay CPU per event: user+system time of the relay process over the events drained, steadier than events/s on a busy machine;")
	fmt.Fprintln(w, "CPU cost: 1 − raw/encoding relay CPU per event, paired per repetition (the drain a CPU-bound relay would lose), median (lowest–highest);")
	fmt.Fprintln(w, "met or missed when every repetition says so, else the median's side, not decided.")
	fmt.Fprintln(w)
	printRepetitions(w, rows)
}

// schemaLine is one row of printSchemaTable.
func schemaLine(db string, size, keys int, s schemaRow) string {
	perRep := "–"
	if len(s.paired) > 0 {
		lo, hi := slices.Min(s.paired), slices.Max(s.paired)
		perRep = fmt.Sprintf("%.2f–%.2f", lo, hi)
	}
	perTenK := "–"
	if s.events > 0 {
		perTenK = fmt.Sprintf("%.2f (%d in %d events)", 1e4*float64(s.requests)/float64(s.events), s.requests, s.events)
	}
	return fmt.Sprintf("| %s | %s | %d | %s | %.0f (%s) | %.0f (%s) | %.2f× | %s | %s (%s) | %s | %s | %s |", db, sizeLabel(size), keys, s.relay,
		s.enc.rate, spreadLabel(s.enc), s.raw.rate, spreadLabel(s.raw), s.enc.rate/s.raw.rate, perRep, s.encCPU, s.rawCPU, perTenK, schemaVerdict(s), cpuVerdict(s))
}

// cpuVerdict says whether the encoding's CPU cost met the target: 1 − raw/encoding CPU per event
// of each repetition's pair of drains.
func cpuVerdict(s schemaRow) string {
	if len(s.pairedCPU) == 0 {
		return "–"
	}
	costs := make([]float64, len(s.pairedCPU))
	for i, r := range s.pairedCPU {
		costs[i] = 1 - 1/r
	}
	slices.Sort(costs)
	lo, mid, hi := costs[0], median(costs), costs[len(costs)-1]
	v := fmt.Sprintf("%.0f %% (%.0f–%.0f %%)", 100*mid, 100*lo, 100*hi)
	switch {
	case hi <= schemaCostTarget:
		return "met, every repetition: " + v
	case lo > schemaCostTarget:
		return "missed, every repetition: " + v
	}
	return fmt.Sprintf("%s by the median, not decided: %s", verdict(mid <= schemaCostTarget), v)
}

// spreadLabel prints a row's spread as the drain table does.
func spreadLabel(s stat) string {
	if s.n < 2 {
		return "1 run"
	}
	return fmt.Sprintf("±%.0f %%", 50*s.spread())
}

// schemaVerdict says whether the encoding's cost met the target and whether the margin is beyond
// the measurement's spread. The cost and the spread are those of the per-repetition costs (each
// repetition drains raw and encoding one after the other, schemaRows): their median, and ±half
// their range, which leaves out the machine's drift between repetitions that the two rows'
// own spreads would count twice.
func schemaVerdict(s schemaRow) string {
	costs := s.pairedCosts()
	if len(costs) < 2 {
		return fmt.Sprintf("%s (cost %.0f %%; one run: no spread)", verdict(s.cost() <= schemaCostTarget), 100*s.cost())
	}
	lo, mid, hi := costs[0], median(costs), costs[len(costs)-1]
	margin, spread := schemaCostTarget-mid, (hi-lo)/2
	v := fmt.Sprintf("%s (cost %.0f %%, per repetition %.0f–%.0f %%", verdict(margin >= 0), 100*mid, 100*lo, 100*hi)
	if math.Abs(margin) > spread {
		return v + fmt.Sprintf(", margin %.0f points beyond the spread ±%.0f points)", 100*math.Abs(margin), 100*spread)
	}
	return v + fmt.Sprintf(", margin %.0f points within the spread ±%.0f points: not decided)", 100*math.Abs(margin), 100*spread)
}

// printRepetitions prints each schema row's per-repetition ratios, in the order they ran.
func printRepetitions(w io.Writer, rows []schemaRow) {
	for _, row := range rows {
		ratios := make([]string, len(row.paired))
		for i, r := range row.paired {
			ratios[i] = fmt.Sprintf("%.2f", r)
		}
		cpu := make([]string, len(row.pairedCPU))
		for i, r := range row.pairedCPU {
			cpu[i] = fmt.Sprintf("%.2f", r)
		}
		fmt.Fprintf(w, "%s, per repetition: events/s of raw %s; relay CPU per event of raw's %s\n",
			row.relay, strings.Join(ratios, " "), strings.Join(cpu, " "))
	}
}
