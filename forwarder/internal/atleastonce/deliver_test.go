package atleastonce

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// The at-least-once deliverer with a scripted publisher and a recording acknowledger: no
// database, no broker.

var errBusy = errors.New("broker busy") // retriable in newCore's policy

// call is one PublishEach call: its number among all calls, its topic and its messages' event
// sequence numbers.
type call struct {
	n     int
	topic string
	seqs  []int64
}

// scriptedPublisher answers each message by outcome (nil: taken), gaplessly (the later messages
// of a failed key in the call fail too) unless gaps, and records its calls.
type scriptedPublisher struct {
	mu      sync.Mutex
	outcome func(topic string, seq int64) error
	gaps    bool
	// count, when set, replaces the number of outcomes returned per call of a topic other than
	// the dead letters'.
	count func(n int) int
	calls []call
}

func (p *scriptedPublisher) PublishEach(_ context.Context, topic string, msgs []*message.Message) []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := call{n: len(p.calls), topic: topic}
	errs := make([]error, len(msgs))
	failed := map[string]error{}
	for i, m := range msgs {
		seq, key := seqOf(m), m.Metadata.Get(outbox.MetadataAggregateID)
		c.seqs = append(c.seqs, seq)
		if err := failed[key]; err != nil && !p.gaps {
			errs[i] = err
			continue
		}
		if p.outcome != nil {
			errs[i] = p.outcome(topic, seq)
		}
		if errs[i] != nil {
			failed[key] = errs[i]
		}
	}
	p.calls = append(p.calls, c)
	if p.count != nil && topic != "dead" {
		return errs[:p.count(len(errs))]
	}
	return errs
}

// callOf returns the call that published seq to topic, or -1.
func (p *scriptedPublisher) callOf(topic string, seq int64) int {
	for _, c := range p.calls {
		if c.topic == topic && slices.Contains(c.seqs, seq) {
			return c.n
		}
	}
	return -1
}

// idOf is the event id the tests give the record of seq: seq in the id's last bytes.
func idOf(seq int64) uuid.UUID {
	var id uuid.UUID
	for i := range 8 {
		id[15-i] = byte(seq >> (8 * i))
	}
	return id
}

func seqOf(m *message.Message) int64 {
	id := uuid.MustParse(m.UUID)
	var seq int64
	for i := range 8 {
		seq |= int64(id[15-i]) << (8 * i)
	}
	return seq
}

func rec(seq int64, key, topic string) relay.Record {
	return relay.Record{Seq: seq, KeyHash: outbox.KeyHash("", "order", key), Partition: int(seq % 4),
		Event: outbox.Event{ID: idOf(seq), Topic: topic, AggregateType: "order", AggregateID: key, EventType: "placed"}}
}

func seqsOf(rs []relay.Record) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.Seq
	}
	return out
}

// recordingAcknowledger records its call and acknowledges everything, or fails with err.
type recordingAcknowledger struct {
	worker  int
	leases  []relay.Lease
	acked   []relay.Record
	settled []relay.Settlement
	calls   int
	err     error
}

func (a *recordingAcknowledger) Acknowledge(_ context.Context, worker int, leases []relay.Lease, acked []relay.Record, settled []relay.Settlement) (relay.Outcome, map[int]int, error) {
	a.calls++
	a.worker, a.leases, a.acked, a.settled = worker, leases, acked, settled
	if a.err != nil {
		return relay.Outcome{}, nil, a.err
	}
	return relay.Outcome{Acked: acked, Settled: settled}, map[int]int{}, nil
}

func newCore(t *testing.T) relay.Core {
	t.Helper()
	return newCoreIn(t, nil)
}

// newCoreIn is newCore with its metrics registered in reg (nil: none).
func newCoreIn(t *testing.T, reg prometheus.Registerer) relay.Core {
	t.Helper()
	m, err := relay.NewMetrics(reg, "events")
	if err != nil {
		t.Fatal(err)
	}
	return relay.Core{Workers: 2, BatchSize: 10, MaxBatchBytes: 1 << 20, LeaseTTL: time.Hour, DeadLetterTopic: "dead",
		Metrics: m, Log: slog.New(slog.DiscardHandler),
		Retry: relay.RetryPolicy{MaxAttempts: 3, Retriable: func(err error) bool { return errors.Is(err, errBusy) },
			Initial: time.Minute, MaxInterval: time.Hour, Multiplier: 2}}
}

var allLeases = []relay.Lease{{Partition: 0, Epoch: 3}, {Partition: 1, Epoch: 4}, {Partition: 2, Epoch: 5}, {Partition: 3, Epoch: 6}}

// TestDeliverRetriesARetriableFailureLater: a retriable failure before the last attempt is
// settled for a retry after the backoff (no dead letter), its key's later event stays pending,
// and the acknowledger gets the worker, the leases, the other key's events and the settlement.
func TestDeliverRetriesARetriableFailureLater(t *testing.T) {
	pub := &scriptedPublisher{outcome: func(_ string, seq int64) error {
		if seq == 1 {
			return errBusy
		}
		return nil
	}}
	acker := &recordingAcknowledger{}
	records := []relay.Record{rec(1, "a", "orders"), rec(2, "b", "orders"), rec(3, "a", "orders"), rec(4, "b", "orders")}
	before := time.Now()
	o, err := New(newCore(t), pub, acker).Deliver(t.Context(), 1, allLeases, records)
	if err != nil {
		t.Fatal(err)
	}
	if acker.calls != 1 || acker.worker != 1 || !slices.Equal(acker.leases, allLeases) {
		t.Fatalf("acknowledger called %d times, worker %d, leases %v; want once, worker 1, all the leases", acker.calls, acker.worker, acker.leases)
	}
	if got := seqsOf(acker.acked); !slices.Equal(got, []int64{2, 4}) || len(o.Acked) != 2 {
		t.Fatalf("acknowledged %v, want key b's [2 4]", got)
	}
	if len(acker.settled) != 1 {
		t.Fatalf("settled %+v, want seq 1 only (seq 3 waits behind it)", acker.settled)
	}
	st := acker.settled[0]
	if st.Record.Seq != 1 || st.Dead || st.Attempts != 1 || st.Next.Before(before.Add(time.Minute)) || st.Reason != errBusy.Error() {
		t.Fatalf("settlement %+v, want seq 1 retried after a minute's backoff, attempt 1, reason %q", st, errBusy)
	}
	if pub.callOf("dead", 1) != -1 {
		t.Fatal("a retriable failure before the last attempt was dead-lettered")
	}
}

// TestDeliverPublishesEachTopicInOneCall: the events of a topic go in one PublishEach call, in
// their order.
func TestDeliverPublishesEachTopicInOneCall(t *testing.T) {
	pub := &scriptedPublisher{}
	acker := &recordingAcknowledger{}
	records := []relay.Record{rec(1, "a", "orders"), rec(2, "b", "payments"), rec(3, "c", "orders"), rec(4, "a", "orders"), rec(5, "d", "payments")}
	if _, err := New(newCore(t), pub, acker).Deliver(t.Context(), 0, allLeases, records); err != nil {
		t.Fatal(err)
	}
	byTopic := map[string][]int64{}
	for _, c := range pub.calls {
		if _, twice := byTopic[c.topic]; twice {
			t.Fatalf("two calls for topic %s: %+v", c.topic, pub.calls)
		}
		byTopic[c.topic] = c.seqs
	}
	if !slices.Equal(byTopic["orders"], []int64{1, 3, 4}) || !slices.Equal(byTopic["payments"], []int64{2, 5}) {
		t.Fatalf("calls %+v, want orders [1 3 4] and payments [2 5]", pub.calls)
	}
	if len(acker.acked) != 5 || len(acker.settled) != 0 {
		t.Fatalf("acknowledged %v, settled %v; want all 5 acknowledged", seqsOf(acker.acked), acker.settled)
	}
}

// TestDeliverKeepsAKeysOrderAcrossTopics: a key whose events change topic is published segment
// after segment (gaplessness holds within a call only), and a failure parks the key's later
// segments.
func TestDeliverKeepsAKeysOrderAcrossTopics(t *testing.T) {
	records := []relay.Record{rec(1, "a", "orders"), rec(2, "a", "payments"), rec(3, "a", "orders"), rec(4, "b", "payments")}
	t.Run("in order", func(t *testing.T) {
		pub := &scriptedPublisher{}
		if _, err := New(newCore(t), pub, &recordingAcknowledger{}).Deliver(t.Context(), 0, allLeases, records); err != nil {
			t.Fatal(err)
		}
		first, second, third := pub.callOf("orders", 1), pub.callOf("payments", 2), pub.callOf("orders", 3)
		if first < 0 || !(first < second && second < third) {
			t.Fatalf("key a's events went out in calls %d, %d, %d, want three calls one after the other: %+v", first, second, third, pub.calls)
		}
	})
	t.Run("parked behind a failure", func(t *testing.T) {
		pub := &scriptedPublisher{outcome: func(topic string, seq int64) error {
			if seq == 2 {
				return errBusy
			}
			return nil
		}}
		acker := &recordingAcknowledger{}
		if _, err := New(newCore(t), pub, acker).Deliver(t.Context(), 0, allLeases, records); err != nil {
			t.Fatal(err)
		}
		if pub.callOf("orders", 3) != -1 {
			t.Fatalf("seq 3 was published after its key's seq 2 failed: %+v", pub.calls)
		}
		if got := slices.Sorted(slices.Values(seqsOf(acker.acked))); !slices.Equal(got, []int64{1, 4}) || len(acker.settled) != 1 || acker.settled[0].Record.Seq != 2 {
			t.Fatalf("acknowledged %v, settled %+v; want [1 4] and seq 2 retried", got, acker.settled)
		}
	})
}

// TestDeliverFailsTheBatchOfAPublisherWithTheWrongOutcomeCount: a publisher that does not
// return one outcome per message has every message of the call failed, none acked (the error
// is not retriable in newCore's policy: both are dead-lettered).
func TestDeliverFailsTheBatchOfAPublisherWithTheWrongOutcomeCount(t *testing.T) {
	pub := &scriptedPublisher{count: func(n int) int { return n - 1 }}
	acker := &recordingAcknowledger{}
	records := []relay.Record{rec(1, "a", "orders"), rec(2, "b", "orders")}
	if _, err := New(newCore(t), pub, acker).Deliver(t.Context(), 0, allLeases, records); err != nil {
		t.Fatal(err)
	}
	if len(acker.acked) != 0 || len(acker.settled) != 2 {
		t.Fatalf("acknowledged %v, settled %+v; want none acknowledged, both settled", seqsOf(acker.acked), acker.settled)
	}
	for _, st := range acker.settled {
		if !st.Dead || !strings.Contains(st.Reason, "returned 1 outcomes for 2 messages") {
			t.Fatalf("settlement %+v, want dead for the publisher's 1 outcome for 2 messages", st)
		}
	}
}

// TestDeliverCountsAGapViolation: a publisher acknowledging an event after an earlier event of
// its key failed in the same call breaks the contract: the event is acknowledged (the broker
// has it) and the violation counted.
func TestDeliverCountsAGapViolation(t *testing.T) {
	pub := &scriptedPublisher{gaps: true, outcome: func(_ string, seq int64) error {
		if seq == 1 {
			return errBusy
		}
		return nil
	}}
	acker := &recordingAcknowledger{}
	reg := prometheus.NewRegistry()
	core := newCoreIn(t, reg)
	records := []relay.Record{rec(1, "a", "orders"), rec(2, "a", "orders")}
	if _, err := New(core, pub, acker).Deliver(t.Context(), 0, allLeases, records); err != nil {
		t.Fatal(err)
	}
	if got := testsupport.CounterValue(t, reg, "outboxkit_forwarder_gap_violations_total"); got != 1 {
		t.Fatalf("gap violations %v, want 1", got)
	}
	if !slices.Equal(seqsOf(acker.acked), []int64{2}) || len(acker.settled) != 1 {
		t.Fatalf("acknowledged %v, settled %+v; want [2] and seq 1 settled", seqsOf(acker.acked), acker.settled)
	}
}

// TestDeliverReturnsTheAcknowledgersError: a failed acknowledgement is the delivery's error.
func TestDeliverReturnsTheAcknowledgersError(t *testing.T) {
	broken := errors.New("database gone")
	acker := &recordingAcknowledger{err: broken}
	_, err := New(newCore(t), &scriptedPublisher{}, acker).Deliver(t.Context(), 0, allLeases, []relay.Record{rec(1, "a", "orders")})
	if !errors.Is(err, broken) {
		t.Fatalf("Deliver = %v, want %v", err, broken)
	}
}

// TestDelivererTakesEveryLeaseAndScopesToTheRecords: at-least-once readies every lease and
// scopes a delivery to its records' partitions.
func TestDelivererTakesEveryLeaseAndScopesToTheRecords(t *testing.T) {
	d := New(newCore(t), &scriptedPublisher{}, &recordingAcknowledger{})
	ready, err := d.Ready(t.Context(), 0, allLeases)
	if err != nil || !slices.Equal(ready, allLeases) {
		t.Fatalf("Ready = %v, %v; want every lease", ready, err)
	}
	records := []relay.Record{rec(1, "a", "orders"), rec(2, "b", "orders"), rec(5, "c", "orders")}
	if got := d.Scope(allLeases, records); !slices.Equal(got, allLeases[1:3]) {
		t.Fatalf("Scope = %v, want the leases of partitions 1 and 2", got)
	}
}
