package forwarder_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"

	"github.com/outboxkit/outboxkit/brokers/pulsar"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestCDCThroughPulsar: the cdc source into the real Pulsar through brokers/pulsar: every event
// arrives once per key in commit order, with the aggregate id as the message key.
func TestCDCThroughPulsar(t *testing.T) {
	url := testsupport.PulsarURL(t)
	h := newCDCHarness(t, nil)
	pub, err := pulsar.NewPublisher(pulsar.PublisherConfig{Config: pulsar.Config{URL: url}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	h.start(h.config(pub))
	h.waitForStream()
	keys := keysNamed("p", 10)
	const perKey = 20
	for n := range perKey {
		var events []outbox.Event
		for _, k := range keys {
			events = append(events, h.event(k, n))
		}
		h.write(events...)
	}

	client, err := apulsar.NewClient(apulsar.ClientOptions{URL: url})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	reader, err := client.CreateReader(apulsar.ReaderOptions{Topic: "persistent://public/default/" + h.topic,
		StartMessageID: apulsar.EarliestMessageID()})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var got []received
	ids := map[string]bool{}
	for len(ids) < perKey*len(keys) {
		m, err := reader.Next(ctx)
		if err != nil {
			t.Fatalf("pulsar reader after %d of %d events: %v", len(ids), perKey*len(keys), err)
		}
		r := received{key: m.Key(), eventID: m.Properties()[outbox.MetadataEventID], payload: m.Payload()}
		var b body
		if err := json.Unmarshal(m.Payload(), &b); err != nil {
			t.Fatalf("payload %q: %v", m.Payload(), err)
		}
		if b.Key != r.key {
			t.Fatalf("message key %q, want the aggregate id %q", r.key, b.Key)
		}
		r.n = b.N
		ids[r.eventID] = true
		got = append(got, r)
	}
	dups := checkDelivery(t, got, keys, perKey)
	t.Logf("%d events through Pulsar, %d duplicates", len(got)-dups, dups)
}
