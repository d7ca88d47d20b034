package main

import (
	"fmt"
	"io"
	"slices"
	"time"
)

// printSchedTable prints the scheduled-events table of one database: each figure's median over
// the repetitions with its lowest and highest, and the ratios of each repetition.
func printSchedTable(w io.Writer, db string, o options, reps []schedRep) {
	col := func(f func(schedRep) float64) []float64 {
		out := make([]float64, len(reps))
		for i, r := range reps {
			out[i] = f(r)
		}
		slices.Sort(out)
		return out
	}
	rate := func(label string, f func(schedRep) float64) {
		v := col(f)
		fmt.Fprintf(w, "| %s | %s | %.0f events/s | %.0f–%.0f |\n", db, label, median(v), v[0], v[len(v)-1])
	}
	ratio := func(label string, f func(schedRep) float64) {
		v := col(f)
		fmt.Fprintf(w, "| %s | %s | %.2f× | %.2f–%.2f× |\n", db, label, median(v), v[0], v[len(v)-1])
	}
	dur := func(label string, f func(schedRep) time.Duration) {
		v := col(func(r schedRep) float64 { return float64(f(r)) })
		ms := func(x float64) string { return time.Duration(x).Round(time.Millisecond).String() }
		fmt.Fprintf(w, "| %s | %s | %s | %s–%s |\n", db, label, ms(median(v)), ms(v[0]), ms(v[len(v)-1]))
	}
	fmt.Fprintf(w, "\n%d repetitions, interleaved; %d due events of 256 B over 1,000 keys per drain\n\n", len(reps), o.events)
	fmt.Fprintln(w, "| database | case | median | lowest–highest |")
	fmt.Fprintln(w, "|---|---|---|---|")
	rate("due, beside 0 scheduled", func(r schedRep) float64 { return r.beside0 })
	rate(fmt.Sprintf("due, beside %d scheduled for tomorrow", o.future), func(r schedRep) float64 { return r.besideFuture })
	ratio("beside the future rows / beside 0 (per repetition)", func(r schedRep) float64 { return r.besideFuture / r.beside0 })
	rate("burst: all due at the same instant", func(r schedRep) float64 { return r.burst })
	ratio("burst / ordinary backlog (per repetition)", func(r schedRep) float64 { return r.burst / r.beside0 })
	dur(fmt.Sprintf("lateness p50 at %d scheduled events/s", o.rate), func(r schedRep) time.Duration { return r.p50 })
	dur(fmt.Sprintf("lateness p99 at %d scheduled events/s", o.rate), func(r schedRep) time.Duration { return r.p99 })
	early := 0
	for _, r := range reps {
		early += r.early
	}
	fmt.Fprintf(w, "| %s | received before deliver_at (all repetitions) | %d | |\n", db, early)
	if reps[0].cdcEvents == 0 {
		return
	}
	dur(fmt.Sprintf("cdc source: lateness p50 at %d scheduled events/s", o.rate), func(r schedRep) time.Duration { return r.cdcP50 })
	dur(fmt.Sprintf("cdc source: lateness p99 at %d scheduled events/s", o.rate), func(r schedRep) time.Duration { return r.cdcP99 })
	early = 0
	for _, r := range reps {
		early += r.cdcEarly
	}
	fmt.Fprintf(w, "| %s | cdc source: received before deliver_at (all repetitions) | %d | |\n", db, early)
}
