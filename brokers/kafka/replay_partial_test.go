package kafka

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestExactlyOnceReplayIsNotUndoneAfterAPartitionLoss: the relay that commits a unit's
// transaction with a dead letter loses another partition of the unit before its
// acknowledgement. The acknowledgement still marks the event dead (its partition is still the
// relay's), but the relay no longer owns the unit whole. An operator replays the dead letter;
// the relay that opens the unit next must not apply the old checkpoint to it again: the replayed
// event is published. On the cdc source the dead letter's event comes from the drain of the
// new slot.
func TestExactlyOnceReplayIsNotUndoneAfterAPartitionLoss(t *testing.T) {
	bothSources(t, replayAfterPartitionLoss)
}

func replayAfterPartitionLoss(t *testing.T, source forwarder.Source) {
	h := newEOHarnessOn(t, source)
	h.maxBytes = 64 << 10
	big := outbox.Event{ID: uuid.Must(uuid.NewV7()), Topic: h.topic, AggregateType: "order", AggregateID: "key-big",
		EventType: "OrderChanged", Payload: bytes.Repeat([]byte("x"), 100<<10)}
	tx, err := h.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.writer.WriteTx(context.Background(), tx, big); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	events, leases := h.writer.Table().Events(), h.writer.Table().Leases()
	var partition int
	if err := h.db.QueryRow("SELECT partition_no FROM "+events+" WHERE event_id = $1", big.ID).Scan(&partition); err != nil {
		t.Fatal(err)
	}
	// Another partition of the same unit (the harness runs 8 units: partition % 8).
	other := (partition + 8) % outbox.Partitions
	var stole sync.Once
	stolen := make(chan struct{})
	a := h.startRelay("eo-partial-a", func(p *Publisher) forwarder.TransactionalPublisher {
		return &deadLetterCommitHook{Publisher: p, dlq: h.topic + "-dlq", after: func() {
			stole.Do(func() {
				// Another relay takes the partition over between the commit and the acknowledgement.
				if _, err := h.db.Exec("UPDATE "+leases+" SET owner = 'eo-partial-thief', epoch = epoch + 1, expires_at = now() - interval '1 second'"+
					" WHERE partition_no = $1", other); err != nil {
					t.Error(err)
				}
				close(stolen)
			})
		}}
	})
	status := func() int {
		var s int
		if err := h.db.QueryRow("SELECT COALESCE(MAX(status), -1) FROM "+events+" WHERE event_id = $1", big.ID).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	select {
	case <-stolen:
	case <-time.After(60 * time.Second):
		t.Fatal("the relay never committed the dead letter's transaction")
	}
	deadline := time.Now().Add(30 * time.Second)
	for status() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the oversized event is not dead after 30 s (status %d)", status())
		}
		time.Sleep(100 * time.Millisecond)
	}
	a.stop()

	admin, err := forwarder.NewAdmin(h.db, outbox.Postgres, events)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := admin.Replay(context.Background(), big.ID); err != nil || n != 1 {
		t.Fatalf("replay: %d rows, %v", n, err)
	}
	h.maxBytes = 0 // the operator raised the limit: the event fits now
	b := h.startRelay("eo-partial-b", nil)
	deadline = time.Now().Add(30 * time.Second)
	for s := status(); s != -1; s = status() {
		if time.Now().After(deadline) || s == 2 {
			t.Fatalf("the replayed event was not published (status %d): the unit's next opening applied the old checkpoint to it again", s)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.stop()
	if got := h.readAll(h.topic, true, 1, 30*time.Second); len(got) != 1 || got[0].id != big.ID.String() {
		t.Fatalf("topic holds %v, want the replayed event once", got)
	}
}

// deadLetterCommitHook calls after once a transaction holding a message to the dead-letter topic
// dlq has committed, before the relay acknowledges it.
type deadLetterCommitHook struct {
	*Publisher
	dlq   string
	after func()
}

func (h *deadLetterCommitHook) CommitUnit(ctx context.Context, unit string, topics []string, msgs []*message.Message, cp []byte) ([]error, error) {
	errs, err := h.Publisher.CommitUnit(ctx, unit, topics, msgs, cp)
	if err == nil && slices.Contains(topics, h.dlq) && !slices.ContainsFunc(errs, func(e error) bool { return e != nil }) {
		h.after()
	}
	return errs, err
}
