package main

import (
	"strings"
	"testing"
)

// TestPrintDrainTableRows prints the drain table of a set of measured and unavailable drains:
// each measured drain is a row with its ratios, an unavailable one a row with its numbered
// footnote, a reason used twice gets one number, and an unmeasured relay no row.
func TestPrintDrainTableRows(t *testing.T) {
	pg := database{name: "postgres", label: "PostgreSQL"}
	o := options{dbs: []database{pg}, keys: []int{1, 1000}, payloads: []int{256}, repeat: 1, events: 20000,
		brokers: []string{"127.0.0.1:19092"}, command: "relaybench",
		relays: []string{relayOutboxkit, relayStock, relayCeiling, relayCDC}}
	r := newResults(o)
	key := func(relay string, keys int) drainKey {
		return drainKey{db: "postgres", size: 256, keys: keys, relay: relay}
	}
	r.add(key(relayCeiling, 1000), sample{events: 50000, seconds: 1})
	r.add(key(relayOutboxkit, 1000), sample{events: 40000, seconds: 1})
	r.add(key(relayOutboxkit, 1), sample{events: 30000, seconds: 1})
	r.add(key(relayCDC, 1000), sample{events: 20000, seconds: 1})
	r.add(key(relayStock, 1000), sample{events: 2000, seconds: 1})
	r.markUnavailable(key(relayStock, 1), "stock relay failed")
	r.markUnavailable(key(relayCDC, 1), "stock relay failed")
	var b strings.Builder
	printDrainTable(&b, r, o)
	out := b.String()
	for _, want := range []string{
		"| PostgreSQL | 256 B | 1000 | ceiling | 50000 | – |",
		"| PostgreSQL | 256 B | 1 | outboxkit | 30000 | – | 0.00 s | 0 MiB | n/a [1] | 0.60× | 0.75× |",
		"| PostgreSQL | 256 B | 1 | outboxkit-cdc | n/a [1] | | | | | | |",
		"| PostgreSQL | 256 B | 1 | stock | n/a [1] | | | | | | |",
		"| PostgreSQL | 256 B | 1000 | outboxkit | 40000 | – | 0.00 s | 0 MiB | 20.0× | 0.80× | 1.00× |",
		"| PostgreSQL | 256 B | 1000 | outboxkit-cdc | 20000 | – | 0.00 s | 0 MiB | 10.0× | 0.40× | 0.50× of polling |",
		"[1] stock relay failed\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "[2]") || strings.Contains(out, "outboxkit-eo") {
		t.Errorf("a second footnote or an unmeasured relay's row:\n%s", out)
	}
}
