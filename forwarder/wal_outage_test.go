package forwarder_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// errRegistryDown is the outage the test's publisher reports (as brokers/schema's publisher does
// when its schema registry does not answer).
var errRegistryDown = errors.New("schema registry unavailable")

// outagePublisher is an OutcomePublisher and OutageClassifier: while down, every message of the
// key downKey fails with errRegistryDown (the subject its events need cannot be read); the other
// messages are published.
type outagePublisher struct {
	message.Publisher
	downKey string
	mu      sync.Mutex
	down    bool
	outages atomic.Int64 // messages refused as an outage
}

func (p *outagePublisher) setDown(down bool) {
	p.mu.Lock()
	p.down = down
	p.mu.Unlock()
}

func (p *outagePublisher) PublishEach(_ context.Context, topic string, msgs []*message.Message) []error {
	p.mu.Lock()
	down := p.down
	p.mu.Unlock()
	errs := make([]error, len(msgs))
	var rest []*message.Message
	var at []int
	for i, m := range msgs {
		if down && m.Metadata.Get(outbox.MetadataAggregateID) == p.downKey {
			errs[i] = errRegistryDown
			p.outages.Add(1)
			continue
		}
		rest, at = append(rest, m), append(at, i)
	}
	if len(rest) > 0 {
		if err := p.Publisher.Publish(topic, rest...); err != nil {
			for _, i := range at {
				errs[i] = err
			}
		}
	}
	return errs
}

func (p *outagePublisher) Unavailable(err error) bool { return errors.Is(err, errRegistryDown) }

var (
	_ forwarder.OutcomePublisher = (*outagePublisher)(nil)
	_ forwarder.OutageClassifier = (*outagePublisher)(nil)
)

// TestWALOutageRetriesTheSameEventsWithoutRestreaming: an outage the publisher reports
// (OutageClassifier: the schema registry cannot serve key p's events) neither parks p nor ends
// the session: the wal source backs off and tries the same events again, spending no attempt,
// while the walsender stays the same. The other keys' events of the same transactions, published
// before the outage ended, are not published again (a session restart would stream them again
// from the confirmed position), and nothing is written to the table.
func TestWALOutageRetriesTheSameEventsWithoutRestreaming(t *testing.T) {
	h := newWALHarness(t, testsupport.KafkaBrokers(t))
	testsupport.CreateKafkaTopic(t, h.brokers, h.topic)
	pub := &outagePublisher{Publisher: h.publisher(), downKey: "p"}
	h.start(h.walConfig(pub))
	slot := forwarder.WALSlotName(h.writer.Table().Events(), "default")
	h.waitForWALStream(slot)
	walsender := func() int {
		var pid int
		if err := h.db.QueryRow("SELECT COALESCE(active_pid, 0) FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&pid); err != nil {
			t.Fatal(err)
		}
		return pid
	}
	pid := walsender()

	keys := append([]string{"p"}, keysNamed("o", 4)...)
	round := func(n int) {
		var events []outbox.Event
		for _, k := range keys {
			events = append(events, h.event(k, n))
		}
		h.write(events...)
	}
	round(0)
	consumeDistinct(t, h.brokers, h.topic, len(keys), 60*time.Second)
	pub.setDown(true)
	round(1)
	round(2)
	waitFor(t, time.Minute, "p's events refused as an outage three times", func() bool { return pub.outages.Load() >= 3 })
	pub.setDown(false)
	round(3)
	got := consumeDistinct(t, h.brokers, h.topic, 4*len(keys), 60*time.Second)
	dups := checkDelivery(t, got, keys, 4)
	if dups != 0 {
		t.Errorf("%d events published again: the outage restarted the stream from the confirmed position", dups)
	}
	if now := walsender(); now != pid {
		t.Errorf("the slot's walsender changed from PID %d to %d: the outage ended the session", pid, now)
	}
	if n := h.rowsInserted(); n > 0 {
		t.Errorf("%d rows inserted into the events table: an outage must not park a key", n)
	}
	t.Logf("%d events in order, %d messages refused as an outage, %d duplicates", len(got)-dups, pub.outages.Load(), dups)
}
