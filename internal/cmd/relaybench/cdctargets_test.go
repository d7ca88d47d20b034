package main

import (
	"strings"
	"testing"
	"time"
)

func TestPrintCDCTargetsSaysMetAndMissed(t *testing.T) {
	o := options{keys: []int{1, 1000}, payloads: []int{256}, relays: []string{relayOutboxkit, relayCDC, relayCDCCeiling}, rate: 1000}
	r := newResults(o)
	drain := func(relay string, keys int, rate float64) {
		r.add(drainKey{db: "postgres", size: 256, keys: keys, relay: relay}, sample{events: int(rate), seconds: 1})
	}
	drain(relayOutboxkit, 1000, 30000)
	drain(relayCDC, 1000, 36000)
	drain(relayCDC, 1, 27000)
	drain(relayCDCCeiling, 1000, 50000)
	steady := []steadyResult{{db: "PostgreSQL", relay: relayCDC, relays: 1, p99: 25 * time.Millisecond}}
	var b strings.Builder
	printCDCTargets(&b, r, steady, o)
	for _, want := range []string{
		"1.20× polling (≥ 1: met)",
		"0.72× cdc-ceiling (≥ 0.8: missed)",
		"1 key 0.75× 1000 keys (≥ 0.8: missed)",
		"p99 25ms (≤ 30ms: met)",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("targets lack %q:\n%s", want, b.String())
		}
	}
}
