package main

import (
	"strings"
	"testing"
	"time"
)

func TestPrintExactlyOnceTargetsSaysMetAndMissed(t *testing.T) {
	steady := []steadyResult{
		{db: "PostgreSQL", relay: relayOutboxkit, relays: 1, p99: 40 * time.Millisecond},
		{db: "PostgreSQL", relay: relayExactlyOnce, relays: 1, p99: 1200 * time.Millisecond},
	}
	pg := database{name: "postgres", label: "PostgreSQL"}
	for _, c := range []struct {
		name    string
		brokers []string
		rate    int
		want    []string
		notWant string
	}{
		{"cluster", []string{"a:1", "b:1", "c:1"}, 500, []string{
			"cluster of 3 brokers",
			"0.84× at-least-once (≥ 0.5: met; goal 0.9: missed)",
			"p99 1.2s (< 1s: missed)",
		}, "target is set"},
		{"one broker", []string{"a:1"}, 1000, []string{
			"one broker",
			"p99 1.2s (< 100ms: missed)",
		}, "drain"},
		{"one broker at another rate", []string{"a:1"}, 500, []string{"the target is set at 1000 events/s"}, "cluster"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := options{brokers: c.brokers, keys: []int{1000}, dbs: []database{pg}, payloads: []int{256},
				relays: []string{relayOutboxkit, relayExactlyOnce}, rate: c.rate}
			r := newResults(o)
			r.add(drainKey{db: "postgres", size: 256, keys: 1000, relay: relayOutboxkit}, sample{events: 10000, seconds: 1})
			r.add(drainKey{db: "postgres", size: 256, keys: 1000, relay: relayExactlyOnce}, sample{events: 8400, seconds: 1})
			var b strings.Builder
			printExactlyOnceTargets(&b, r, steady, o)
			for _, want := range c.want {
				if !strings.Contains(b.String(), want) {
					t.Errorf("targets lack %q:\n%s", want, b.String())
				}
			}
			if strings.Contains(b.String(), c.notWant) {
				t.Errorf("targets say %q:\n%s", c.notWant, b.String())
			}
		})
	}
}
