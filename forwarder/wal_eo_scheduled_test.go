package forwarder_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
)

// clockedTxPublisher notes the database's time at which each event was handed to the broker in
// an exactly-once transaction (before the commit, after the release), and runs afterCommit, when
// set, once a committed transaction held one of its ids.
type clockedTxPublisher struct {
	forwarder.TransactionalPublisher
	t  testing.TB
	h  *harness
	mu sync.Mutex
	at map[string]time.Time
	// afterCommit runs after a Kafka transaction that held an id of afterCommitIDs committed.
	afterCommit    func()
	afterCommitIDs map[string]bool
}

func (p *clockedTxPublisher) CommitUnit(ctx context.Context, unit string, topics []string, msgs []*message.Message, checkpoint []byte) ([]error, error) {
	now := dbClock(p.t, p.h.db, p.h.dialect)
	p.mu.Lock()
	hook := false
	for _, m := range msgs {
		if _, ok := p.at[m.UUID]; !ok {
			p.at[m.UUID] = now
		}
		hook = hook || p.afterCommitIDs[m.UUID]
	}
	after := p.afterCommit
	p.mu.Unlock()
	errs, err := p.TransactionalPublisher.CommitUnit(ctx, unit, topics, msgs, checkpoint)
	if err == nil && hook && after != nil {
		after()
	}
	return errs, err
}

// armAfterCommit sets afterCommit for transactions holding one of ids (nil: none).
func (p *clockedTxPublisher) armAfterCommit(ids map[string]bool, after func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.afterCommitIDs, p.afterCommit = ids, after
}

func (p *clockedTxPublisher) firstAt(id string) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.at[id]
}

// TestWALExactlyOnceScheduled: scheduled events on the wal source in exactly-once delivery,
// with relays stopped around their due moments. Relay 0 is stopped right after a first batch of
// events of several keys is scheduled two seconds ahead; a second batch is scheduled a second
// ahead once it has stopped, so relay 1 (started then) publishes scheduled events whenever relay
// 0 stopped; relay 1 is killed right after the first Kafka transaction holding a scheduled event
// commits, before the rows are acknowledged in the database, while ordinary events stream beside
// them; relay 2 takes over and drains the rest. A read_committed consumer must see every event exactly once: no
// scheduled event lost or duplicated, none handed to the broker before its deliver_at by the
// database's clock, and the streamed events of their keys in order. The verdict reads the
// content only: wherever the stops land in time, the same must hold.
func TestWALExactlyOnceScheduled(t *testing.T) {
	h, checkpoints := newWALEOHarness(t)
	slot := forwarder.WALSlotName(h.writer.Table().Events(), "default")
	w := newEOWriter(h, keysNamed("k", 4))
	pub := &clockedTxPublisher{TransactionalPublisher: h.txPublisher(), t: t, h: h, at: map[string]time.Time{}}
	deliverAt := map[string]time.Time{}
	next := map[string]int{}
	schedule := func(ahead time.Duration) {
		due := dbClock(t, h.db, h.dialect).Add(ahead)
		var events []outbox.Event
		for _, k := range keysNamed("s", 4) {
			for range 3 {
				e := h.event(k, next[k])
				next[k]++
				e.DeliverAt = due
				events = append(events, e)
			}
		}
		h.write(events...)
		for _, e := range events {
			deliverAt[e.ID.String()] = e.DeliverAt
		}
	}

	r0 := startWALRelay(t, h.walEOConfig(pub, checkpoints, nil))
	h.waitForWALStream(slot)
	w.write(8)
	schedule(2 * time.Second)
	r0.stop(t)
	schedule(time.Second)

	c := newCrashPoint(1)
	scheduled := map[string]bool{}
	for id := range deliverAt {
		scheduled[id] = true
	}
	pub.armAfterCommit(scheduled, c.hook)
	r1 := startWALRelay(t, h.walEOConfig(pub, checkpoints, nil))
	w.writeUntil(t, c.hit)
	w.write(8)
	c.kill(t, r1)
	pub.armAfterCommit(nil, nil)

	r2 := startWALRelay(t, h.walEOConfig(pub, checkpoints, nil))
	w.write(8)
	waitCommitted(t, h.brokers, h.topic, len(w.ids)+len(deliverAt))
	r2.stop(t)

	var streamed []received
	seen := map[string]int{}
	for _, r := range readCommittedToEnd(t, h.brokers, h.topic) {
		if _, ok := deliverAt[r.eventID]; !ok {
			streamed = append(streamed, r)
			continue
		}
		seen[r.eventID]++
	}
	for id, at := range deliverAt {
		switch n := seen[id]; {
		case n == 0:
			t.Errorf("scheduled event %s never reached a read_committed consumer", id)
		case n > 1:
			t.Errorf("scheduled event %s reached a read_committed consumer %d times", id, n)
		}
		if first := pub.firstAt(id); first.Before(at) {
			t.Errorf("scheduled event %s was handed to the broker at %s by the database's clock, before its deliver_at %s", id, first, at)
		}
	}
	w.check(t, streamed)
	if n := h.rowsWithStatus(4); n != 0 {
		t.Errorf("%d rows still scheduled, want 0", n)
	}
	if !t.Failed() {
		t.Logf("%d scheduled events of 4 keys, each once and not before its time", len(deliverAt))
	}
}
