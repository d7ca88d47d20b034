package main

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestBaselineRelaysRunBesideEachForwarderRelayInAlternateOrder(t *testing.T) {
	relays := withBaseline([]string{relayOutboxkit, relayStock, relayCDC})
	if want := []string{relayOutboxkit, "outboxkit@base", relayStock, relayCDC, "outboxkit-cdc@base"}; !reflect.DeepEqual(relays, want) {
		t.Fatalf("withBaseline: %v, want %v", relays, want)
	}
	o := options{relays: relays, keys: []int{1000}}
	names := func(cases []drainCase) []string {
		var out []string
		for _, c := range cases {
			out = append(out, c.relay)
		}
		return out
	}
	if got := names(ordered(drainCases(o), 1)); !reflect.DeepEqual(got, relays) {
		t.Errorf("repetition 1: %v, want %v", got, relays)
	}
	want := []string{"outboxkit@base", relayOutboxkit, relayStock, "outboxkit-cdc@base", relayCDC}
	if got := names(ordered(drainCases(o), 2)); !reflect.DeepEqual(got, want) {
		t.Errorf("repetition 2: %v, want %v", got, want)
	}
	if role, base := baseOf("outboxkit-cdc@base"); role != relayCDC || !base || !isCDC("outboxkit-cdc@base") {
		t.Errorf("baseOf(outboxkit-cdc@base) = %q, %v; isCDC %v", role, base, isCDC("outboxkit-cdc@base"))
	}
}

func TestPrintCPUPerEventComparesTheMedians(t *testing.T) {
	o := options{relays: withBaseline([]string{relayOutboxkit}), keys: []int{1000}, payloads: []int{256}, events: 1000,
		dbs: []database{{name: "postgres", label: "PostgreSQL"}}, baseline: "/tmp/before"}
	r := newResults(o)
	add := func(relay string, cpuMs ...int) {
		for _, ms := range cpuMs {
			r.add(drainKey{db: "postgres", size: 256, keys: 1000, relay: relay}, sample{events: 1000, cpu: time.Duration(ms) * time.Millisecond})
		}
	}
	add(relayOutboxkit, 22, 20, 24)
	add("outboxkit@base", 20, 21, 19)
	var b strings.Builder
	printCPUPerEvent(&b, r, o)
	for _, want := range []string{
		"| PostgreSQL | 256 B | 1000 | outboxkit | 22.0, 20.0, 24.0 | 22.0 | ±9 % | 1.10× |",
		"| PostgreSQL | 256 B | 1000 | outboxkit@base | 20.0, 21.0, 19.0 | 20.0 | ±5 % |  |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("missing %q in\n%s", want, b.String())
		}
	}
}
