package forwarder_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/forwarder/internal/wal"
	"github.com/outboxkit/outboxkit/outbox"
)

// The exactly-once wal source (docs/wal.md, "Exactly-once") against real PostgreSQL and Kafka:
// relays stopped at the points where a restart could publish twice or skip, a takeover, and a
// parked key; a read_committed consumer must see every event once, each key's in order. With
// WAL_TEST_NO_CHECKPOINT_SKIP=1 the stream publishes again what its last checkpoint covers,
// and the tests that stop a relay after a commit fail with duplicates.

// TestWALExactlyOnceKilledMidStream stops three relays in turn while events stream in: after
// the commit of the first relay's first transaction, before its slot position is confirmed
// (the next relay streams that batch again and must skip it); before the second relay's second
// commit (its batch was never committed: the next relay must publish it); after the third
// relay's third commit. A fourth relay drains the rest.
func TestWALExactlyOnceKilledMidStream(t *testing.T) {
	h, checkpoints := newWALEOHarness(t)
	slot := forwarder.WALSlotName(h.writer.Table().Events(), "default")
	w := newEOWriter(h, keysNamed("k", 8))
	for i, p := range []struct {
		name      string
		committed bool
		n         int
	}{
		{"after its 1st commit, before the confirm", true, 1},
		{"before its 2nd commit", false, 2},
		{"after its 3rd commit, before the confirm", true, 3},
	} {
		c := newCrashPoint(p.n)
		hooks := &wal.Hooks{}
		if p.committed {
			hooks.Committed = c.hook
		} else {
			hooks.Committing = c.hook
		}
		r := startWALRelay(t, h.walEOConfig(h.txPublisher(), checkpoints, hooks))
		if i == 0 {
			h.waitForWALStream(slot)
		}
		w.writeUntil(t, c.hit)
		c.kill(t, r)
		t.Logf("relay %d stopped %s, %d events written", i+1, p.name, len(w.ids))
	}
	last := startWALRelay(t, h.walEOConfig(h.txPublisher(), checkpoints, nil))
	w.write(16)
	waitCommitted(t, h.brokers, h.topic, len(w.ids))
	last.stop(t)
	w.check(t, readCommittedToEnd(t, h.brokers, h.topic))
}

// TestWALExactlyOnceTakeover: relay A streams, relay B stands by; A is stopped after the commit
// of its second transaction, before its position is confirmed, while events keep coming; B
// takes the slot over, streams from the confirmed position and must skip what A committed.
func TestWALExactlyOnceTakeover(t *testing.T) {
	h, checkpoints := newWALEOHarness(t)
	slot := forwarder.WALSlotName(h.writer.Table().Events(), "default")
	w := newEOWriter(h, keysNamed("k", 8))
	c := newCrashPoint(2)
	a := startWALRelay(t, h.walEOConfig(h.txPublisher(), checkpoints, &wal.Hooks{Committed: c.hook}))
	h.waitForWALStream(slot)
	b := startWALRelay(t, h.walEOConfig(h.txPublisher(), checkpoints, nil))
	w.writeUntil(t, c.hit)
	w.write(8) // while A is stopped at its crash point
	c.kill(t, a)
	w.write(16)
	waitCommitted(t, h.brokers, h.topic, len(w.ids))
	b.stop(t)
	w.check(t, readCommittedToEnd(t, h.brokers, h.topic))
}

// TestWALExactlyOnceParksARefusedKey: the broker refuses p's n=1 in the stream's transaction;
// p's n=1 and n=2 are parked in the table (the rest of the batch is committed without them),
// a's events keep streaming, and once the broker takes n=1 the drain publishes the parked rows
// through the table's exactly-once units, before p's later events.
func TestWALExactlyOnceParksARefusedKey(t *testing.T) {
	h, checkpoints := newWALEOHarness(t)
	slot := forwarder.WALSlotName(h.writer.Table().Events(), "default")
	pub := &refusingTxPublisher{TransactionalPublisher: h.txPublisher(), refused: map[string]bool{}}
	startWALRelay(t, h.walEOConfig(pub, checkpoints, nil))
	h.waitForWALStream(slot)
	w := newEOWriter(h, []string{"p", "a"})
	w.writeOne(0) // p n=0
	first := h.event("p", 1)
	pub.refuse(first.ID.String(), true)
	w.h.write(first)
	w.next["p"]++
	w.ids[first.ID.String()] = true
	w.writeOne(0) // p n=2
	w.write(6)    // a's events, and p's n=3..5
	waitFor(t, time.Minute, "p's n=1 and later events parked", func() bool { return h.parkedRowsByKey()["p"] >= 2 })
	if pub.refusals.Load() == 0 {
		t.Fatal("no transaction refused p's n=1")
	}
	pub.refuse(first.ID.String(), false)
	w.write(6)
	waitCommitted(t, h.brokers, h.topic, len(w.ids))
	w.check(t, readCommittedToEnd(t, h.brokers, h.topic))
	waitFor(t, time.Minute, "the parked rows gone", func() bool { return len(h.parkedRowsByKey()) == 0 })
}

// refusingTxPublisher refuses, in any transaction, the events it is told to and the later
// messages of their keys in the transaction (gapless, as the Kafka publisher reports), aborting
// it.
type refusingTxPublisher struct {
	forwarder.TransactionalPublisher
	mu       sync.Mutex
	refused  map[string]bool
	refusals atomic.Int64
}

func (p *refusingTxPublisher) refuse(eventID string, on bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if on {
		p.refused[eventID] = true
	} else {
		delete(p.refused, eventID)
	}
}

func (p *refusingTxPublisher) CommitUnit(ctx context.Context, unit string, topics []string, msgs []*message.Message, checkpoint []byte) ([]error, error) {
	p.mu.Lock()
	errs := make([]error, len(msgs))
	keys := map[string]bool{}
	n := 0
	for i, m := range msgs {
		k := m.Metadata.Get(outbox.MetadataAggregateID)
		if p.refused[m.Metadata.Get(outbox.MetadataEventID)] || keys[k] {
			keys[k] = true
			errs[i] = fmt.Errorf("message %s: %w", m.UUID, errRefusedByTest)
			n++
		}
	}
	p.mu.Unlock()
	if n == 0 {
		return p.TransactionalPublisher.CommitUnit(ctx, unit, topics, msgs, checkpoint)
	}
	p.refusals.Add(1)
	p.CloseUnit(unit)
	return errs, fmt.Errorf("transaction of unit %s aborted: %d records refused", unit, n)
}

var errRefusedByTest = errors.New("refused by the test")
