package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// With -baseline, each outboxkit forwarder relay of the run (outboxkit, outboxkit-eo,
// outboxkit-cdc, outboxkit-cdc-eo) is measured twice in every repetition: as built into this
// relaybench, and as built into the baseline binary (a relaybench built from another commit,
// whose relay child speaks the same protocol: -role, ready, go, SIGTERM), named <relay>@base.
// Both drain the same backlog size on the same services in the same run, alternately, so that
// the machine's load weighs on both alike; printCPUPerEvent compares their CPU per event.
// scripts/cpu-compare.sh builds the two binaries from two git refs and runs them.

// baseSuffix names the baseline binary's run of a relay.
const baseSuffix = "@base"

// baseOf returns the relay a name stands for and whether it is the baseline binary's run.
func baseOf(relay string) (string, bool) { return strings.CutSuffix(relay, baseSuffix) }

// forwarderRelays are the relays that are the outboxkit forwarder on Kafka: those -baseline
// measures twice.
var forwarderRelays = []string{relayOutboxkit, relayExactlyOnce, relayCDC, relayCDCExactlyOnce, relayWAL, relayWALExactlyOnce}

// withBaseline returns relays with <relay>@base after each forwarder relay.
func withBaseline(relays []string) []string {
	var out []string
	for _, r := range relays {
		out = append(out, r)
		if contains(forwarderRelays, r) {
			out = append(out, r+baseSuffix)
		}
	}
	return out
}

// checkBaseline checks that -baseline names an executable file.
func checkBaseline(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("-baseline: %q: %w", path, err)
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("-baseline: %q is not an executable file (a relaybench binary built from the baseline commit)", path)
	}
	return nil
}

// ordered returns the drain cases of repetition rep: with a baseline, every other repetition
// runs <relay>@base before <relay>, so that neither always drains right after the other.
func ordered(cases []drainCase, rep int) []drainCase {
	out := slices.Clone(cases)
	if rep%2 == 1 {
		return out
	}
	for i := 0; i+1 < len(out); i++ {
		if b, ok := baseOf(out[i+1].relay); ok && b == out[i].relay && out[i+1].keys == out[i].keys {
			out[i], out[i+1] = out[i+1], out[i]
			i++
		}
	}
	return out
}

// cpuPerEvent is a drain's relay CPU time per event drained.
func (s sample) cpuPerEvent() time.Duration {
	if s.events == 0 {
		return 0
	}
	return s.cpu / time.Duration(s.events)
}

// printCPUPerEvent prints, for every forwarder relay drained, its CPU per event in each run
// (the relay process's user+system time, from its start to its exit, over the events drained),
// the median and the spread, and with -baseline the ratio of the medians to the baseline's.
func printCPUPerEvent(w io.Writer, r *results, o options) {
	type row struct {
		k   drainKey
		per []time.Duration // by run
	}
	var rows []row
	for _, d := range o.dbs {
		for _, size := range o.payloads {
			for _, keys := range o.keys {
				for _, relay := range o.relays {
					b, _ := baseOf(relay)
					if !contains(forwarderRelays, b) {
						continue
					}
					k := drainKey{db: d.name, size: size, keys: keys, relay: relay}
					var per []time.Duration
					for _, s := range r.samples[k] {
						per = append(per, s.cpuPerEvent())
					}
					if len(per) > 0 {
						rows = append(rows, row{k, per})
					}
				}
			}
		}
	}
	if len(rows) == 0 {
		return
	}
	fmt.Fprintf(w, "\nrelay CPU per event (user+system time of the relay process over the events drained, µs; %d events per drain)\n\n", o.events)
	fmt.Fprintln(w, "| database | payload | keys | relay | runs | median | spread | vs @base |")
	fmt.Fprintln(w, "|---|---:|---:|---|---|---:|---:|---:|")
	for _, x := range rows {
		sorted := slices.Clone(x.per)
		slices.Sort(sorted)
		med := medianOfSorted(sorted)
		runs := make([]string, len(x.per))
		for i, p := range x.per {
			runs[i] = micros(p)
		}
		spread := "–"
		if len(sorted) > 1 && med > 0 {
			spread = fmt.Sprintf("±%.0f %%", 50*float64(sorted[len(sorted)-1]-sorted[0])/float64(med))
		}
		vs := ""
		if _, isBase := baseOf(x.k.relay); !isBase {
			bk := x.k
			bk.relay += baseSuffix
			if base := r.samples[bk]; len(base) > 0 {
				vs = ratio(float64(med), float64(medianCPUPerEvent(base)))
			}
		}
		fmt.Fprintf(w, "| %s | %s | %d | %s | %s | %s | %s | %s |\n", r.label(x.k.db), sizeLabel(x.k.size), x.k.keys, x.k.relay,
			strings.Join(runs, ", "), micros(med), spread, vs)
	}
	fmt.Fprintln(w, "\nspread: ±(max−min)/2 of the runs, relative to the median; vs @base: the median over the baseline binary's median")
	if o.baseline != "" {
		fmt.Fprintf(w, "@base: the relay of %s, drained alternately with this binary's in the same run\n", o.baseline)
	}
}

// medianCPUPerEvent is the median CPU per event of samples.
func medianCPUPerEvent(samples []sample) time.Duration {
	per := make([]time.Duration, len(samples))
	for i, s := range samples {
		per[i] = s.cpuPerEvent()
	}
	slices.Sort(per)
	return medianOfSorted(per)
}

func medianOfSorted(sorted []time.Duration) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

// micros prints d in microseconds with one decimal.
func micros(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d)/float64(time.Microsecond)) }
