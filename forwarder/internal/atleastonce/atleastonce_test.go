package atleastonce

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

var errTooLarge = errors.New("too large")

// fakePublisher fails, permanently, every message whose UUID is in refuse outside the dead-letter
// topic "dead" (gaplessly: the later
// messages of its key in the call fail too), and records what it took per topic.
type fakePublisher struct {
	mu     sync.Mutex
	refuse map[string]bool
	took   map[string][]*message.Message
}

func (p *fakePublisher) PublishEach(_ context.Context, topic string, msgs []*message.Message) []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := make([]error, len(msgs))
	broken := map[string]bool{}
	for i, m := range msgs {
		key := m.Metadata.Get(outbox.MetadataAggregateID)
		if (p.refuse[m.UUID] && topic != "dead") || broken[key] {
			errs[i], broken[key] = errTooLarge, true
			continue
		}
		p.took[topic] = append(p.took[topic], m)
	}
	return errs
}

// fakeAcknowledger records what it is handed and acknowledges it all.
type fakeAcknowledger struct {
	acked   []relay.Record
	settled []relay.Settlement
}

func (a *fakeAcknowledger) Acknowledge(_ context.Context, _ int, _ []relay.Lease, acked []relay.Record, settled []relay.Settlement) (relay.Outcome, map[int]int, error) {
	a.acked, a.settled = acked, settled
	return relay.Outcome{Acked: acked, Settled: settled}, map[int]int{}, nil
}

func record(seq int64, key string) relay.Record {
	return relay.Record{Seq: seq, KeyHash: outbox.KeyHash("", "order", key), Partition: 1,
		Event: outbox.Event{ID: uuid.New(), Topic: "orders", AggregateType: "order", AggregateID: key, EventType: "placed"}}
}

// TestDeliverParksAFailedKeyAndDeadLettersAPermanentFailure: with a fake publisher and a fake
// acknowledger (no database, no broker), a permanent failure is dead-lettered at once, its key's
// later event stays pending (in neither list), and the other key's events are acknowledged.
func TestDeliverParksAFailedKeyAndDeadLettersAPermanentFailure(t *testing.T) {
	m, err := relay.NewMetrics(nil, "events")
	if err != nil {
		t.Fatal(err)
	}
	core := relay.Core{Workers: 1, BatchSize: 10, MaxBatchBytes: 1 << 20, LeaseTTL: 1 << 40, DeadLetterTopic: "dead",
		Metrics: m, Log: slog.New(slog.DiscardHandler),
		Retry: relay.RetryPolicy{MaxAttempts: 3, Retriable: func(err error) bool { return !errors.Is(err, errTooLarge) },
			Initial: 1, MaxInterval: 1, Multiplier: 1}}
	records := []relay.Record{record(1, "a"), record(2, "b"), record(3, "a"), record(4, "b")}
	pub := &fakePublisher{refuse: map[string]bool{records[0].Event.ID.String(): true}, took: map[string][]*message.Message{}}
	acker := &fakeAcknowledger{}
	o, err := New(core, pub, acker).Deliver(context.Background(), 0, []relay.Lease{{Partition: 1, Epoch: 1}}, records)
	if err != nil {
		t.Fatal(err)
	}
	if len(acker.acked) != 2 || acker.acked[0].Seq != 2 || acker.acked[1].Seq != 4 || len(o.Acked) != 2 {
		t.Fatalf("acknowledged %+v, want the two events of key b", acker.acked)
	}
	if len(acker.settled) != 1 || !acker.settled[0].Dead || acker.settled[0].Record.Seq != 1 || acker.settled[0].Attempts != 1 {
		t.Fatalf("settled %+v, want seq 1 dead after 1 attempt", acker.settled)
	}
	dead := pub.took["dead"]
	if len(dead) != 1 || dead[0].Metadata.Get(middleware.PoisonedTopicKey) != "orders" ||
		dead[0].Metadata.Get(middleware.ReasonForPoisonedKey) != errTooLarge.Error() {
		t.Fatalf("dead letters %v", dead)
	}
}

// TestDeliverSendsASpentRecordsDeadLetterAlone: a record whose attempts are spent (its dead
// letter failed after the last one) is not published again: its dead letter goes alone, with
// the event's publishes (max_attempts) as its attempts, and its key's later event stays pending
// (in neither list), while the other key flows.
func TestDeliverSendsASpentRecordsDeadLetterAlone(t *testing.T) {
	m, err := relay.NewMetrics(nil, "events")
	if err != nil {
		t.Fatal(err)
	}
	core := relay.Core{Workers: 1, BatchSize: 10, MaxBatchBytes: 1 << 20, LeaseTTL: 1 << 40, DeadLetterTopic: "dead",
		Metrics: m, Log: slog.New(slog.DiscardHandler),
		Retry: relay.RetryPolicy{MaxAttempts: 3, Retriable: func(error) bool { return true }, Initial: 1, MaxInterval: 1, Multiplier: 1}}
	spent := record(1, "a")
	spent.Attempts = 4 // max_attempts 3, and one failed round of its dead letter alone
	records := []relay.Record{spent, record(2, "b"), record(3, "a")}
	pub := &fakePublisher{refuse: map[string]bool{}, took: map[string][]*message.Message{}}
	acker := &fakeAcknowledger{}
	if _, err := New(core, pub, acker).Deliver(context.Background(), 0, []relay.Lease{{Partition: 1, Epoch: 1}}, records); err != nil {
		t.Fatal(err)
	}
	if took := pub.took["orders"]; len(took) != 1 || took[0].UUID != records[1].Event.ID.String() {
		t.Fatalf("published %d events to the topic, want only key b's", len(took))
	}
	if len(acker.acked) != 1 || acker.acked[0].Seq != 2 {
		t.Fatalf("acknowledged %+v, want key b's event", acker.acked)
	}
	if len(acker.settled) != 1 || !acker.settled[0].Dead || acker.settled[0].Record.Seq != 1 || acker.settled[0].Attempts != 3 {
		t.Fatalf("settled %+v, want seq 1 dead with 3 attempts", acker.settled)
	}
	dead := pub.took["dead"]
	if len(dead) != 1 || dead[0].Metadata.Get("outbox_attempts") != "3" || dead[0].UUID != spent.Event.ID.String() {
		t.Fatalf("dead letters %v, want seq 1's with outbox_attempts 3", dead)
	}
}

// TestPublishHoldsAKeyAcrossTopicsBehindItsFailure: a key's events cut into segments at each
// change of topic; when its first segment fails, its event on the other topic is not published
// (it stays pending, in neither list), while the other key's segments on both topics go out.
func TestPublishHoldsAKeyAcrossTopicsBehindItsFailure(t *testing.T) {
	m, err := relay.NewMetrics(nil, "events")
	if err != nil {
		t.Fatal(err)
	}
	onTopic := func(r relay.Record, topic string) relay.Record { r.Event.Topic = topic; return r }
	records := []relay.Record{record(1, "a"), record(2, "a"), onTopic(record(3, "a"), "invoices"),
		onTopic(record(4, "b"), "invoices"), record(5, "b")}
	pub := &fakePublisher{refuse: map[string]bool{records[0].Event.ID.String(): true}, took: map[string][]*message.Message{}}
	acked, failed := Publish(context.Background(), pub, m, slog.New(slog.DiscardHandler), records)
	if len(failed) != 1 || failed[0].Record.Seq != 1 {
		t.Fatalf("failed %+v, want seq 1 only", failed)
	}
	if len(acked) != 2 || acked[0].Seq != 4 || acked[1].Seq != 5 {
		t.Fatalf("acknowledged %+v, want seq 4 then 5 (key b)", acked)
	}
	if got := pub.took["invoices"]; len(got) != 1 || got[0].UUID != records[3].Event.ID.String() {
		t.Fatalf("invoices took %d messages, want key b's only: key a's is held behind its failure on orders", len(got))
	}
}

// okPublisher acknowledges every message.
type okPublisher struct{}

func (okPublisher) PublishEach(_ context.Context, _ string, msgs []*message.Message) []error {
	return make([]error, len(msgs))
}

// BenchmarkPublishOneTopic: the forwarder's side of publishing a batch of 8,000 events of 1,000
// keys to one topic (the broker's side left out): the messages, the plan, the outcome.
func BenchmarkPublishOneTopic(b *testing.B) {
	m, err := relay.NewMetrics(nil, "events")
	if err != nil {
		b.Fatal(err)
	}
	records := make([]relay.Record, 8000)
	for i := range records {
		records[i] = record(int64(i), fmt.Sprint(i%1000))
	}
	log := slog.New(slog.DiscardHandler)
	b.ReportAllocs()
	for b.Loop() {
		if acked, _ := Publish(context.Background(), okPublisher{}, m, log, records); len(acked) != len(records) {
			b.Fatalf("%d acknowledged, want %d", len(acked), len(records))
		}
	}
}
