package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/brokers/schema"
)

// The schema relays are the outboxkit forwarder on Kafka with brokers/schema's publisher: every
// event's JSON payload encoded with the schema registered for its topic (Avro or Protobuf) and
// framed in the Confluent wire format, beside the raw relay draining the same JSON payloads.
// A run with a schema relay gives every drain JSON payloads, so that the raw row is the same
// backlog.

// registryRequestsLine starts the line a schema relay child prints when it stops: how many
// HTTP requests its registry client sent.
const registryRequestsLine = "schema-registry-requests"

// Schemas of the benchmark's JSON payload (jsonPayload), one per format.
const (
	benchAvro = `{"type":"record","name":"OrderChanged","namespace":"relaybench","fields":[` +
		`{"name":"order","type":"string"},{"name":"seq","type":"long"},{"name":"note","type":"string"}]}`
	benchProto = `syntax = "proto3";
package relaybench;
message OrderChanged {
  string order = 1;
  int64 seq = 2;
  string note = 3;
}
`
)

// isSchemaRelay reports whether relay encodes with a schema registry.
func isSchemaRelay(relay string) bool { return relay == relayAvro || relay == relayProtobuf }

// rotateSchemaRelays returns cases with the raw and schema relays of each number of keys rotated
// by rep: repetition 1 drains raw, Avro, Protobuf; repetition 2 Avro, Protobuf, raw; and so on,
// so that no relay always drains first or last in its repetition (the ratios are taken per
// repetition, schemaRows). The other cases keep their places; a run without a schema relay is
// returned as it is.
func rotateSchemaRelays(cases []drainCase, rep int) []drainCase {
	out := slices.Clone(cases)
	byKeys := map[int][]int{} // keys -> the indexes of its raw and schema relays
	var order []int
	for i, c := range out {
		if c.relay != relayOutboxkit && !isSchemaRelay(c.relay) {
			continue
		}
		if _, ok := byKeys[c.keys]; !ok {
			order = append(order, c.keys)
		}
		byKeys[c.keys] = append(byKeys[c.keys], i)
	}
	for _, keys := range order {
		at := byKeys[keys]
		if len(at) < 2 || !slices.ContainsFunc(at, func(i int) bool { return isSchemaRelay(cases[i].relay) }) {
			continue
		}
		shift := (rep - 1) % len(at)
		for j, i := range at {
			out[i] = cases[at[(j+shift)%len(at)]]
		}
	}
	return out
}

// hasSchemaRelay reports whether the run measures a schema relay: then every drain's payloads are
// JSON (jsonPayload).
func (o options) hasSchemaRelay() bool {
	return contains(o.relays, relayAvro) || contains(o.relays, relayProtobuf)
}

// schemaOf returns the registry schema a schema relay's topic is registered with.
func schemaOf(relay string) sr.Schema {
	if relay == relayProtobuf {
		return sr.Schema{Schema: benchProto, Type: sr.TypeProtobuf}
	}
	return sr.Schema{Schema: benchAvro, Type: sr.TypeAvro}
}

// jsonPayload returns a JSON object of size bytes (more when size is below its fixed part) that
// fits the benchmark's schemas: the key, a sequence number and a note of hex text filling it up.
func jsonPayload(key string, seq, size int, hexText []byte) []byte {
	head := `{"order":` + strconv.Quote(key) + `,"seq":` + strconv.Itoa(seq) + `,"note":"`
	fill := max(0, size-len(head)-2)
	if fill > len(hexText) {
		fill = len(hexText)
	}
	return []byte(head + string(hexText[:fill]) + `"}`)
}

// registerSchema registers relay's schema under the subject of topic (the topic strategy) in
// the registry and returns its id; a relay without schema returns 0.
func registerSchema(ctx context.Context, o options, relay, topic string) (int, error) {
	if !isSchemaRelay(relay) {
		return 0, nil
	}
	client, err := sr.NewClient(sr.URLs(o.registry))
	if err != nil {
		return 0, fmt.Errorf("-registry %q: %w", o.registry, err)
	}
	ss, err := client.CreateSchema(ctx, schema.Subject(topic), schemaOf(relay))
	if err != nil {
		return 0, fmt.Errorf("register the %s schema of %s at %s (-registry): %w", relay, topic, o.registry, err)
	}
	return ss.ID, nil
}

// countingTransport counts the HTTP requests it sends.
type countingTransport struct {
	next http.RoundTripper
	n    atomic.Int64
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.next.RoundTrip(req)
}

// schemaPublisher returns a schema relay child's publisher: the Kafka publisher wrapped in
// brokers/schema's, whose registry client counts its requests in the returned transport.
func schemaPublisher(o options) (message.Publisher, func(error) bool, *countingTransport, error) {
	counter := &countingTransport{next: http.DefaultTransport}
	client, err := sr.NewClient(sr.URLs(o.registry), sr.HTTPClient(&http.Client{Transport: counter, Timeout: 10 * time.Second}))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("registry client: %w", err)
	}
	enc, err := schema.NewEncoder(client, schema.Config{})
	if err != nil {
		return nil, nil, nil, err
	}
	kpub, _, err := kafkaPublisher(o)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("kafka publisher: %w", err)
	}
	pub, err := schema.NewPublisher(kpub, enc)
	if err != nil {
		_ = kpub.Close()
		return nil, nil, nil, err
	}
	classifier, ok := pub.(interface{ Retriable(error) bool })
	if !ok {
		_ = pub.Close()
		return nil, nil, nil, fmt.Errorf("schema publisher %T classifies no errors", pub)
	}
	return pub, classifier.Retriable, counter, nil
}

// reportRegistryRequests prints the line parseRegistryRequests reads.
func reportRegistryRequests(counter *countingTransport) {
	fmt.Printf("%s %d\n", registryRequestsLine, counter.n.Load())
}

// parseRegistryRequests reads the line of reportRegistryRequests from a child's output.
func parseRegistryRequests(lines []string) (int, bool) {
	for _, l := range lines {
		if rest, ok := strings.CutPrefix(l, registryRequestsLine+" "); ok {
			n, err := strconv.Atoi(rest)
			return n, err == nil
		}
	}
	return 0, false
}

// framedSource checks what a schema relay published: every record framed in the Confluent wire
// format with the registered schema id, and the first one decoding back to the JSON written.
type framedSource struct {
	source
	id      int
	decoder *schema.Decoder
	written map[string][]byte // event id -> payload, for the first record's check
	err     error
	checked bool
}

func newFramedSource(src source, o options, id int, written map[string][]byte) (*framedSource, error) {
	client, err := sr.NewClient(sr.URLs(o.registry))
	if err != nil {
		return nil, fmt.Errorf("-registry %q: %w", o.registry, err)
	}
	dec, err := schema.NewDecoder(client)
	if err != nil {
		return nil, err
	}
	return &framedSource{source: src, id: id, decoder: dec, written: written}, nil
}

func (f *framedSource) poll(ctx context.Context) []record {
	out := f.source.poll(ctx)
	for _, r := range out {
		if f.err != nil {
			break
		}
		var header sr.ConfluentHeader
		id, _, err := header.DecodeID(r.value)
		if err != nil || id != f.id {
			f.err = fmt.Errorf("event %s: not framed with schema id %d (header id %d, %v)", r.id, f.id, id, err)
			break
		}
		if !f.checked {
			f.checked = true
			f.err = f.decodesBack(ctx, r)
		}
	}
	return out
}

// decodesBack checks that r decodes to the JSON object that was written for it.
func (f *framedSource) decodesBack(ctx context.Context, r record) error {
	got, err := f.decoder.Decode(ctx, r.value)
	if err != nil {
		return fmt.Errorf("event %s: %w", r.id, err)
	}
	a, err := jsonObject(got)
	if err != nil {
		return fmt.Errorf("event %s decodes to %s: %w", r.id, got, err)
	}
	b, err := jsonObject(f.written[r.id])
	if err != nil {
		return fmt.Errorf("event %s was written as %q: %w", r.id, f.written[r.id], err)
	}
	// protojson writes an int64 as a string and leaves out a proto3 field holding its zero value
	// (seq 0 of a key's first event): compare the values as printed, a missing one as its zero.
	if printed(a) != printed(b) {
		return fmt.Errorf("event %s decodes to %s, was written as %s", r.id, got, f.written[r.id])
	}
	return nil
}

// jsonObject reads a JSON object, its numbers as written.
func jsonObject(data []byte) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	return m, dec.Decode(&m)
}

// printed prints the benchmark payload's fields, a missing one as its zero value.
func printed(m map[string]any) string {
	get := func(k, zero string) string {
		if v, ok := m[k]; ok {
			return fmt.Sprint(v)
		}
		return zero
	}
	return get("order", "") + " " + get("seq", "0") + " " + get("note", "")
}
