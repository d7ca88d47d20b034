package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// The cdc relay's targets of issue 22, each a ratio of two figures of the same run.
const (
	// cdcOfCeiling: the cdc relay drains at least this share of the cdc ceiling relay.
	cdcOfCeiling = 0.8
	// cdcHotKey: one key drains at least this share of the largest-key drain on cdc.
	cdcHotKey = 0.8
	// cdcSteadyP99 bounds commit → consumed at the 99th percentile at cdcSteadyRate events/s.
	cdcSteadyP99  = 30 * time.Millisecond
	cdcSteadyRate = 1000
)

// printCDCTargets checks the cdc relay (outboxkit-cdc) against issue 22's targets: its drain at
// the largest number of keys at least the polling relay's and at least 80 % of the cdc ceiling
// relay's, one key at least 80 % of that drain, and the steady p99 within 30 ms at 1,000
// events/s. A target whose figures this run did not measure is not printed.
func printCDCTargets(w io.Writer, r *results, steady []steadyResult, o options) {
	if !contains(o.relays, relayCDC) {
		return
	}
	top := maxInt(o.keys)
	var lines []string
	for _, size := range o.payloads {
		cdc := r.rate(drainKey{db: "postgres", size: size, keys: top, relay: relayCDC})
		if cdc == 0 {
			continue
		}
		var parts []string
		if poll := r.rate(drainKey{db: "postgres", size: size, keys: top, relay: relayOutboxkit}); poll > 0 {
			parts = append(parts, fmt.Sprintf("%.2f× polling (≥ 1: %s)", cdc/poll, verdict(cdc >= poll)))
		}
		if floor := r.rate(drainKey{db: "postgres", size: size, keys: top, relay: relayCDCCeiling}); floor > 0 {
			parts = append(parts, fmt.Sprintf("%.2f× cdc-ceiling (≥ %.1f: %s)", cdc/floor, cdcOfCeiling, verdict(cdc >= cdcOfCeiling*floor)))
		}
		if one := r.rate(drainKey{db: "postgres", size: size, keys: 1, relay: relayCDC}); one > 0 && top != 1 {
			parts = append(parts, fmt.Sprintf("1 key %.2f× %s (≥ %.1f: %s)", one/cdc, keysLabel(top), cdcHotKey, verdict(one >= cdcHotKey*cdc)))
		}
		if len(parts) > 0 {
			lines = append(lines, fmt.Sprintf("- drain, %s, %s: %s", sizeLabel(size), keysLabel(top), strings.Join(parts, "; ")))
		}
	}
	for _, s := range steady {
		if s.relay != relayCDC || s.relays != 1 {
			continue
		}
		line := fmt.Sprintf("- steady, %d events/s: p99 %v (≤ %v: %s)", o.rate, s.p99.Round(100*time.Microsecond), cdcSteadyP99, steadyVerdict(s, o.rate, s.p99 <= cdcSteadyP99))
		if o.rate != cdcSteadyRate {
			line += fmt.Sprintf(" — the target is set at %d events/s", cdcSteadyRate)
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\ntargets of the cdc relay (issue 22: drain ≥ polling and ≥ 0.8 × cdc-ceiling, 1 key ≥ 0.8 × the largest-key drain, p99 ≤ 30 ms at 1,000/s; ratios within this run):")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}
