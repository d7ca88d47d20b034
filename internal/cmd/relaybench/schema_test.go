package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// The schema relays' payloads are JSON objects of the asked size with the schemas' three fields.
func TestJSONPayloadFitsItsSize(t *testing.T) {
	hex := []byte(strings.Repeat("ab", 4096))
	for _, size := range []int{64, 256, 4096} {
		p := jsonPayload("order-17", 12345, size, hex[:size])
		if len(p) != size {
			t.Errorf("size %d: payload of %d bytes: %s", size, len(p), p)
		}
		var v struct {
			Order string `json:"order"`
			Seq   int    `json:"seq"`
			Note  string `json:"note"`
		}
		if err := json.Unmarshal(p, &v); err != nil || v.Order != "order-17" || v.Seq != 12345 || v.Note == "" {
			t.Errorf("size %d: %s reads as %+v, %v", size, p, v, err)
		}
	}
}

func TestParseRegistryRequests(t *testing.T) {
	if n, ok := parseRegistryRequests([]string{"cdc-receive-lag-ms 1 2 3", registryRequestsLine + " 7"}); !ok || n != 7 {
		t.Errorf("got %d, %v; want 7", n, ok)
	}
	if _, ok := parseRegistryRequests([]string{registryRequestsLine + " seven"}); ok {
		t.Error("a count that is not a number was read")
	}
}

// The schema table pairs each repetition's drains, sums the registry requests over the row's
// events, says whether the per-repetition costs' median met the 15 % target beyond their spread
// or not, and lists the per-repetition ratios.
func TestPrintSchemaTable(t *testing.T) {
	pg := database{name: "postgres", label: "PostgreSQL"}
	o := options{dbs: []database{pg}, keys: []int{1000}, payloads: []int{256}, repeat: 2, events: 20000,
		registry: "http://registry", relays: []string{relayOutboxkit, relayAvro, relayProtobuf}}
	r := newResults(o)
	key := func(relay string) drainKey { return drainKey{db: "postgres", size: 256, keys: 1000, relay: relay} }
	for _, s := range []struct {
		relay    string
		secs     float64
		cpu      time.Duration
		requests int
	}{
		{relayOutboxkit, 1.00, time.Second, 0}, {relayAvro, 1.05, time.Second, 1}, {relayProtobuf, 2.0, time.Second, 2},
		{relayOutboxkit, 1.02, time.Second, 0}, {relayAvro, 1.07, time.Second, 1}, {relayProtobuf, 1.3, 1200 * time.Millisecond, 2},
	} {
		r.add(key(s.relay), sample{events: 20000, seconds: s.secs, cpu: s.cpu, registryRequests: s.requests, hasRegistry: s.relay != relayOutboxkit})
	}
	var b strings.Builder
	printSchemaTable(&b, r, o)
	out := b.String()
	for _, want := range []string{
		"| outboxkit-avro | 18870 (±1 %) | 19804 (±1 %) | 0.95× | 0.95–0.95 | 50 (50) | 0.50 (2 in 40000 events) | met (cost 5 %, per repetition 5–5 %, margin 10 points beyond the spread ±0 points) | met, every repetition: 0 % (0–0 %) |",
		"| outboxkit-protobuf | 12692 (±21 %) | 19804 (±1 %) | 0.64× | 0.50–0.78 | 55 (50–60) (50) | 1.00 (4 in 40000 events) | missed (cost 36 %, per repetition 22–50 %, margin 21 points beyond the spread ±14 points) | met by the median, not decided: 8 % (0–17 %) |",
		"outboxkit-protobuf, per repetition: events/s of raw 0.50 0.78; relay CPU per event of raw's 1.00 1.20",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
	var none strings.Builder
	o.relays = []string{relayOutboxkit}
	printSchemaTable(&none, r, o)
	if none.Len() != 0 {
		t.Errorf("a run without a schema relay printed:\n%s", none.String())
	}
}

// A cost whose margin to the target is within the per-repetition costs' spread is not decided,
// on either side; one repetition has no spread.
func TestSchemaVerdictWithinTheSpread(t *testing.T) {
	for _, tc := range []struct {
		paired []float64
		want   string
	}{
		{[]float64{0.95, 0.80, 0.88}, "met (cost 12 %, per repetition 5–20 %, margin 3 points within the spread ±7 points: not decided)"},
		{[]float64{0.70, 0.90, 0.82}, "missed (cost 18 %, per repetition 10–30 %, margin 3 points within the spread ±10 points: not decided)"},
		{[]float64{0.93, 0.91, 0.92, 0.90, 0.94}, "met (cost 8 %, per repetition 6–10 %, margin 7 points beyond the spread ±2 points)"},
		{[]float64{0.9}, "met (cost 10 %; one run: no spread)"},
	} {
		row := schemaRow{paired: tc.paired, raw: stat{n: 1, rate: 100}, enc: stat{n: 1, rate: 100 * tc.paired[0]}}
		if got := schemaVerdict(row); got != tc.want {
			t.Errorf("paired %v: %q, want %q", tc.paired, got, tc.want)
		}
	}
}

// Each repetition rotates the raw and schema relays of each number of keys by one, and leaves
// the other relays where they are; a run without a schema relay keeps its order.
func TestRotateSchemaRelays(t *testing.T) {
	cases := []drainCase{{relayCeiling, 1000}, {relayOutboxkit, 1000}, {relayAvro, 1000}, {relayProtobuf, 1000}, {relayExactlyOnce, 1000}}
	relays := func(cs []drainCase) string {
		var out []string
		for _, c := range cs {
			out = append(out, c.relay)
		}
		return strings.Join(out, ",")
	}
	for rep, want := range map[int]string{
		1: "ceiling,outboxkit,outboxkit-avro,outboxkit-protobuf,outboxkit-eo",
		2: "ceiling,outboxkit-avro,outboxkit-protobuf,outboxkit,outboxkit-eo",
		3: "ceiling,outboxkit-protobuf,outboxkit,outboxkit-avro,outboxkit-eo",
		4: "ceiling,outboxkit,outboxkit-avro,outboxkit-protobuf,outboxkit-eo",
	} {
		if got := relays(rotateSchemaRelays(cases, rep)); got != want {
			t.Errorf("repetition %d: %s, want %s", rep, got, want)
		}
	}
	plain := []drainCase{{relayOutboxkit, 1}, {relayExactlyOnce, 1}}
	if got := relays(rotateSchemaRelays(plain, 2)); got != "outboxkit,outboxkit-eo" {
		t.Errorf("a run without a schema relay became %s", got)
	}
}

// A key's first event has seq 0, which Protobuf (proto3) leaves out and protojson does not print:
// the check of what the relay published takes a missing field as its zero value.
func TestPrintedTakesAMissingFieldAsZero(t *testing.T) {
	written, err := jsonObject([]byte(`{"order":"order-0","seq":0,"note":"ab"}`))
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := jsonObject([]byte(`{"order":"order-0","note":"ab"}`))
	if err != nil {
		t.Fatal(err)
	}
	if printed(decoded) != printed(written) {
		t.Errorf("decoded %q, written %q", printed(decoded), printed(written))
	}
	other, _ := jsonObject([]byte(`{"order":"order-0","seq":"1","note":"ab"}`))
	if printed(other) == printed(written) {
		t.Errorf("seq 1 printed as seq 0: %q", printed(other))
	}
}
