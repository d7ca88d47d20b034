package forwarder_test

import (
	"context"
	"errors"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/outbox"
)

// classifyingPublisher is a faultyPublisher that classifies its errors
// (forwarder.ErrorClassifier): errRefusedForGood is permanent.
type classifyingPublisher struct{ *faultyPublisher }

var errRefusedForGood = errors.New("refused for good")

func (p classifyingPublisher) Retriable(err error) bool { return !errors.Is(err, errRefusedForGood) }

// With Config.IsRetriable unset, the publisher's own classifier decides, also through the
// tracing decorator: its permanent error dead-letters the event at the first attempt, though
// MaxAttempts is 10.
func TestPublishersClassifierIsTheDefault(t *testing.T) {
	h := newHarness(t, outbox.Postgres, kfakeBrokers(t))
	faulty := &faultyPublisher{Publisher: h.publisher(), topic: h.topic, poisoned: map[string]error{}}
	poison := h.event("poison", 0)
	faulty.poison(poison.ID.String(), errRefusedForGood)
	cfg := h.config(classifyingPublisher{faulty})
	cfg.MaxAttempts = 10
	cfg.DeadLetterTopic = h.topic + ".dead"
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	cfg.TracerProvider = tp
	h.write(poison, h.event("ok", 0))
	h.start(cfg)
	adm, err := admin.New(h.db, h.dialect, h.writer.Table().Events())
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute) // a bound against a hang
	var dead []admin.DeadLetter
	for len(dead) == 0 && time.Now().Before(deadline) {
		if dead, err = adm.DeadLetters(context.Background(), 10); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(dead) != 1 || dead[0].EventID != poison.ID || dead[0].Attempts != 1 {
		t.Fatalf("dead letters %+v, want the poisoned event after 1 attempt", dead)
	}
}
