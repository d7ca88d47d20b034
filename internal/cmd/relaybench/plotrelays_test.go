package main

import (
	"strings"
	"testing"
	"time"
)

func TestLatencyQuantilesRunFromTheFastestToTheSlowest(t *testing.T) {
	sorted := make([]time.Duration, 10000)
	for i := range sorted {
		sorted[i] = time.Duration(i+1) * time.Microsecond
	}
	q := latencyQuantiles(sorted)
	if want := int(latencyNines/latencyNinesStep) + 2; len(q) != want {
		t.Fatalf("%d quantiles, want %d", len(q), want)
	}
	if q[0] != sorted[0] || q[len(q)-1] != sorted[len(sorted)-1] {
		t.Errorf("first %v, last %v: want the fastest %v and the slowest %v", q[0], q[len(q)-1], sorted[0], sorted[len(sorted)-1])
	}
	// x = 1 is p90, x = 2 p99, x = 3 p99.9.
	for nines, want := range map[int]time.Duration{1: 9001 * time.Microsecond, 2: 9901 * time.Microsecond, 3: 9991 * time.Microsecond} {
		if got := q[int(float64(nines)/latencyNinesStep+0.5)]; got != want {
			t.Errorf("quantile at %d nines = %v, want %v", nines, got, want)
		}
	}
	for i := 1; i < len(q); i++ {
		if q[i] < q[i-1] {
			t.Fatalf("quantiles not ascending at %d: %v", i, q)
		}
	}
	if latencyQuantiles(nil) != nil {
		t.Error("quantiles of no latency")
	}
}

func TestRenderRelaysPlotIsWellFormedSVG(t *testing.T) {
	o := options{events: 20000, repeat: 3, rate: 1000, seconds: 10, keys: []int{1, 1000},
		relays: []string{relayOutboxkit, relayCDC, relayCDCCeiling}, command: "relaybench -relays-svg x.svg & <co>"}
	groups := []relayBars{
		{label: "PostgreSQL, 256 B, 1 key", bars: []relayBar{{relayOutboxkit, 30000, 25000, 33000}, {relayCDC, 36000, 30000, 38000}}},
		{label: "PostgreSQL, 256 B, 1,000 keys", bars: []relayBar{{relayOutboxkit, 40000, 35000, 45000}, {relayCDCCeiling, 61000, 60000, 64000}}},
	}
	quantiles := latencyQuantiles([]time.Duration{time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond, 80 * time.Millisecond})
	curves := []relayCurve{{relay: relayCDC, quantiles: quantiles, p50: 2 * time.Millisecond, p99: 80 * time.Millisecond}}
	when := time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)
	svg := renderRelaysPlot(groups, curves, o, when)
	checkSVG(t, svg, ">outboxkit-cdc<", ">cdc-ceiling<", "61k", "1,000 keys", "p99.9", "outboxkit-cdc p99 80.0 ms", "&amp; &lt;co&gt;")
	if svg != renderRelaysPlot(groups, curves, o, when) {
		t.Error("the same results render differently")
	}
	if empty := renderRelaysPlot(nil, nil, o, when); !strings.Contains(empty, "no drain in this run") || !strings.Contains(empty, "no steady run in this run") {
		t.Error("an empty panel does not say it is empty")
	}
}
