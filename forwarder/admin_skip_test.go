package forwarder_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// A relay retrying a key's head without end (a retriable error): the key is listed as blocked,
// skipping its head lets the later events of the key through (to real Kafka), and replaying
// the skipped event publishes it once the broker takes it.
func TestSkipHeadReleasesAKeyOnARunningRelay(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, outbox.Postgres, testsupport.KafkaBrokers(t))
	pub := &faultyPublisher{Publisher: h.publisher(), topic: h.topic, poisoned: map[string]error{}}
	stuck := []outbox.Event{h.event("stuck", 0), h.event("stuck", 1), h.event("stuck", 2)}
	pub.poison(stuck[0].ID.String(), errors.New("injected: broker unavailable for this message"))
	cfg := h.config(pub)
	cfg.UnlimitedRetries = true
	h.write(append(stuck, h.event("free", 0))...)
	h.start(cfg)
	adm, err := admin.New(h.db, h.dialect, h.writer.Table().Events())
	if err != nil {
		t.Fatal(err)
	}
	var keys []admin.BlockedKey
	for deadline := time.Now().Add(2 * time.Minute); len(keys) == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if keys, err = adm.BlockedKeys(ctx, admin.KeyFilter{}); err != nil {
			t.Fatal(err)
		}
	}
	if len(keys) != 1 || keys[0].Key.AggregateID != "stuck" || keys[0].State != admin.StateRetrying || keys[0].Waiting != 2 {
		t.Fatalf("blocked keys while the head fails: %+v", keys)
	}
	consume(t, h.brokers, h.topic, 1, 2*time.Minute) // the free key flows
	res, err := adm.SkipKeys(ctx, admin.KeyFilter{Key: &keys[0].Key}, false)
	if err != nil || res.Applied != 1 {
		t.Fatalf("skip: %+v, %v", res, err)
	}
	got := consumeDistinct(t, h.brokers, h.topic, 3, 60*time.Second)
	if ids := receivedIDs(got); !ids[stuck[1].ID.String()] || !ids[stuck[2].ID.String()] || ids[stuck[0].ID.String()] {
		t.Fatalf("after the skip: got %d events, want the free one and stuck 1 and 2, not the skipped head", len(got))
	}
	pub.poison(stuck[0].ID.String(), nil)
	if res, err = adm.ReplayDeadLetters(ctx, admin.EventFilter{EventIDs: []uuid.UUID{stuck[0].ID}}, false); err != nil || res.Applied != 1 {
		t.Fatalf("replay of the skipped head: %+v, %v", res, err)
	}
	got = consumeDistinct(t, h.brokers, h.topic, 4, 60*time.Second)
	if !receivedIDs(got)[stuck[0].ID.String()] {
		t.Fatalf("the replayed head was not published: %d events", len(got))
	}
}

func receivedIDs(got []received) map[string]bool {
	ids := map[string]bool{}
	for _, r := range got {
		ids[r.eventID] = true
	}
	return ids
}
