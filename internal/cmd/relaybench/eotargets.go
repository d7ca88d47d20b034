package main

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// The exactly-once targets, each measured within one run beside at-least-once. On one broker
// (issue 22): commit → consumed p99 below eoSteadyP99 at eoSteadyRate events/s. On a cluster of
// several brokers (issue 25): the drain at least eoClusterDrain of at-least-once's (the goal is
// eoClusterGoal), and p99 below eoClusterP99 at eoClusterRate events/s.
const (
	eoSteadyP99    = 100 * time.Millisecond
	eoSteadyRate   = 1000
	eoClusterDrain = 0.5
	eoClusterGoal  = 0.9
	eoClusterP99   = time.Second
	eoClusterRate  = 500
)

// printExactlyOnceTargets checks the exactly-once relay (outboxkit-eo) against its targets: the
// cluster's when the run's Kafka has several brokers, the single broker's otherwise. A target
// whose figures this run did not measure is not printed.
func printExactlyOnceTargets(w io.Writer, r *results, steady []steadyResult, o options) {
	if !contains(o.relays, relayExactlyOnce) {
		return
	}
	cluster := len(o.brokers) > 1
	p99, rate, heading := eoSteadyP99, eoSteadyRate, "targets of exactly-once on one broker (issue 22: p99 < 100 ms at 1,000/s):"
	if cluster {
		p99, rate = eoClusterP99, eoClusterRate
		heading = fmt.Sprintf("targets of exactly-once on a cluster of %d brokers (issue 25: drain ≥ %.1f× at-least-once, goal %.1f×; p99 < 1 s at 500/s; ratios within this run):",
			len(o.brokers), eoClusterDrain, eoClusterGoal)
	}
	var lines []string
	if cluster {
		top := maxInt(o.keys)
		for _, db := range o.dbs {
			for _, size := range o.payloads {
				eo := r.rate(drainKey{db: db.name, size: size, keys: top, relay: relayExactlyOnce})
				alo := r.rate(drainKey{db: db.name, size: size, keys: top, relay: relayOutboxkit})
				if eo == 0 || alo == 0 {
					continue
				}
				lines = append(lines, fmt.Sprintf("- drain, %s, %s, %s: %.2f× at-least-once (≥ %.1f: %s; goal %.1f: %s)",
					db.label, sizeLabel(size), keysLabel(top), eo/alo, eoClusterDrain, verdict(eo >= eoClusterDrain*alo), eoClusterGoal, verdict(eo >= eoClusterGoal*alo)))
			}
		}
	}
	for _, s := range steady {
		if s.relay != relayExactlyOnce || s.relays != 1 {
			continue
		}
		line := fmt.Sprintf("- steady, %s, %d events/s: p99 %v (< %v: %s)", s.db, o.rate, s.p99.Round(100*time.Microsecond), p99, steadyVerdict(s, o.rate, s.p99 < p99))
		if o.rate != rate {
			line += fmt.Sprintf(" — the target is set at %d events/s", rate)
		}
		lines = append(lines, line)
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\n"+heading)
	fmt.Fprintln(w, strings.Join(lines, "\n"))
}
