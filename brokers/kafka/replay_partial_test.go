package kafka

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestExactlyOnceReplayIsNotUndoneAfterAPartitionLoss: the relay that commits a unit's
// transaction, with a dead letter and an event of another partition of the unit, loses that other
// partition before its acknowledgement. The acknowledgement still marks the first event dead (its
// partition is still the relay's), but the relay no longer owns the unit whole. An operator
// replays the dead letter; the relay that opens the unit next must not apply the old checkpoint
// to it again (the replayed event is published), and must apply it to the lost partition's row
// (that event is not published twice). On the cdc source the events come from the drain of the
// new slot.
func TestExactlyOnceReplayIsNotUndoneAfterAPartitionLoss(t *testing.T) {
	bothSources(t, replayAfterPartitionLoss)
}

func replayAfterPartitionLoss(t *testing.T, source forwarder.Source) {
	h := newEOHarnessOn(t, source)
	h.maxBytes = 64 << 10
	big := outbox.Event{ID: uuid.Must(uuid.NewV7()), Topic: h.topic, AggregateType: "order", AggregateID: "key-big",
		EventType: "OrderChanged", Payload: bytes.Repeat([]byte("x"), 100<<10)}
	// An event of another partition of the same unit (partition % harnessUnits).
	other := (outbox.PartitionOf(outbox.KeyHash("", big.AggregateType, big.AggregateID)) + harnessUnits) % outbox.Partitions
	var small outbox.Event
	for i := 0; small.AggregateID == ""; i++ {
		if id := fmt.Sprintf("key-%d", i); outbox.PartitionOf(outbox.KeyHash("", "order", id)) == other {
			small = outbox.Event{ID: uuid.Must(uuid.NewV7()), Topic: h.topic, AggregateType: "order", AggregateID: id,
				EventType: "OrderChanged", Payload: []byte(`{}`)}
		}
	}
	tx, err := h.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.writer.WriteTx(context.Background(), tx, big, small); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	events, leases := h.writer.Table().Events(), h.writer.Table().Leases()
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
	status := func(id uuid.UUID) int {
		var s int
		if err := h.db.QueryRow("SELECT COALESCE(MAX(status), -1) FROM "+events+" WHERE event_id = $1", id).Scan(&s); err != nil {
			t.Fatal(err)
		}
		return s
	}
	select {
	case <-stolen:
	case <-time.After(60 * time.Second):
		t.Fatal("the relay never committed the dead letter's transaction")
	}
	deadline := time.Now().Add(2 * time.Minute) // a bound against a hang
	for status(big.ID) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the oversized event is not dead after 2 minutes (status %d)", status(big.ID))
		}
		time.Sleep(100 * time.Millisecond)
	}
	a.stop()

	adm, err := admin.New(h.db, outbox.Postgres, events)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := adm.Replay(context.Background(), big.ID); err != nil || n != 1 {
		t.Fatalf("replay: %d rows, %v", n, err)
	}
	h.maxBytes = 0 // the operator raised the limit: the event fits now
	b := h.startRelay("eo-partial-b", nil)
	deadline = time.Now().Add(2 * time.Minute)
	for s := status(big.ID); s != -1 || status(small.ID) != -1; s = status(big.ID) {
		if time.Now().After(deadline) || s == 2 {
			t.Fatalf("the replayed event was not published (status %d, the other event's %d): the unit's next opening applied the old checkpoint to it again",
				s, status(small.ID))
		}
		time.Sleep(100 * time.Millisecond)
	}
	b.stop()
	count := map[string]int{}
	for _, c := range h.readAll(h.topic, true, 2, 2*time.Minute) {
		count[c.id]++
	}
	if count[big.ID.String()] != 1 || count[small.ID.String()] != 1 || len(count) != 2 {
		t.Fatalf("topic holds %v, want the replayed event %s and the lost partition's event %s once each", count, big.ID, small.ID)
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
