package forwarder_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// deadLetterOutagePublisher wraps a real publisher as a forwarder.OutcomePublisher, so that one
// round of the relay publishes an event once (a plain publisher's failed call is published
// again one by one to isolate the failure). Every publish of the failing event on the events'
// topic fails, and with it the later events of its key in the call, unsent (the outcome
// contract); the first publish to the dead-letter topic fails too (an outage of that topic), the
// later ones go through. Both errors are retriable (the wrapper has no classifier). It counts
// the failing event's publishes, its dead letters that went through, and the publishes of the
// events held behind it.
type deadLetterOutagePublisher struct {
	message.Publisher
	topic, deadLetterTopic string
	failing                string   // event id of the event that always fails
	held                   []string // event ids of the later events of its key

	mu                  sync.Mutex
	eventPublishes      int
	deadLetterFailures  int
	deadLettersAccepted int
	heldPublished       int
}

func (p *deadLetterOutagePublisher) PublishEach(_ context.Context, topic string, msgs []*message.Message) []error {
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := make([]error, len(msgs))
	failedKeys := map[string]bool{}
	for i, m := range msgs {
		id, key := m.Metadata.Get(outbox.MetadataEventID), m.Metadata.Get(outbox.MetadataAggregateID)
		switch {
		case failedKeys[key]:
			errs[i] = errors.New("injected: held back behind an earlier event of its key")
			continue
		case topic == p.topic && id == p.failing:
			p.eventPublishes++
			errs[i] = errors.New("injected: the broker refused the event (retriable)")
			failedKeys[key] = true
			continue
		case topic == p.deadLetterTopic && p.deadLetterFailures == 0:
			p.deadLetterFailures++
			errs[i] = errors.New("injected: the dead-letter topic is unavailable (retriable)")
			failedKeys[key] = true
			continue
		case topic == p.topic && slices.Contains(p.held, id):
			p.heldPublished++
		}
		if errs[i] = p.Publisher.Publish(topic, m); errs[i] != nil {
			failedKeys[key] = true
		} else if topic == p.deadLetterTopic {
			p.deadLettersAccepted++
		}
	}
	return errs
}

func (p *deadLetterOutagePublisher) counts() (events, dlqFailures, dlqAccepted, held int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.eventPublishes, p.deadLetterFailures, p.deadLettersAccepted, p.heldPublished
}

// max_attempts is a hard bound on the publishes of an event even when its dead letter fails
// after the last attempt: the next round sends the dead letter alone, never the event again.
// Before, the record was retried like any failure, so the event was published a 4th time
// (attempts past max_attempts, up to 2 × max_attempts) and dead-lettered with attempts=4.
// At-least-once, real Kafka, every database (polling), and the cdc source on PostgreSQL.
func TestMaxAttemptsBoundsTheEventWhenItsDeadLetterFails(t *testing.T) {
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL, outbox.SQLite} {
		t.Run(string(d), func(t *testing.T) {
			testMaxAttemptsBound(t, newHarness(t, d, testsupport.KafkaBrokers(t)))
		})
	}
	t.Run("postgres-cdc", func(t *testing.T) {
		testMaxAttemptsBound(t, newCDCHarness(t, testsupport.KafkaBrokers(t)))
	})
}

func testMaxAttemptsBound(t *testing.T, h *harness) {
	const maxAttempts = 3
	ctx := context.Background()
	dlqTopic := h.topic + ".dead"
	testsupport.CreateKafkaTopic(t, h.brokers, h.topic)
	testsupport.CreateKafkaTopic(t, h.brokers, dlqTopic)
	bound := []outbox.Event{h.event("bound", 0), h.event("bound", 1), h.event("bound", 2)}
	free := h.event("free", 0)
	pub := &deadLetterOutagePublisher{Publisher: h.publisher(), topic: h.topic, deadLetterTopic: dlqTopic,
		failing: bound[0].ID.String(), held: []string{bound[1].ID.String(), bound[2].ID.String()}}
	cfg := h.config(pub)
	cfg.MaxAttempts = maxAttempts
	cfg.DeadLetterTopic = dlqTopic
	h.writeAndStart(cfg, func() { h.write(append(bound, free)...) })

	adm, err := admin.New(h.db, h.dialect, h.writer.Table().Events())
	if err != nil {
		t.Fatal(err)
	}
	var dead []admin.DeadLetter
	for deadline := time.Now().Add(2 * time.Minute); len(dead) == 0 && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if dead, err = adm.DeadLetters(ctx, 10); err != nil {
			t.Fatal(err)
		}
	}
	// A dead row is never claimed again: the counts are final.
	events, dlqFailures, dlqAccepted, held := pub.counts()
	if len(dead) != 1 || dead[0].EventID != bound[0].ID {
		t.Fatalf("dead rows %+v, want the failing event (published %d times, dead letter failed %d, accepted %d)",
			dead, events, dlqFailures, dlqAccepted)
	}
	if events != maxAttempts || dlqFailures != 1 || dlqAccepted != 1 {
		t.Errorf("the event was published %d times with max_attempts %d (its dead letter failed %d times, went through %d times), "+
			"want exactly %d publishes and one dead letter", events, maxAttempts, dlqFailures, dlqAccepted, maxAttempts)
	}
	if dead[0].Attempts != maxAttempts {
		t.Errorf("the dead row has attempts=%d, want %d (last error %q)", dead[0].Attempts, maxAttempts, dead[0].LastError)
	}
	dlq := consume(t, h.brokers, dlqTopic, 1, 60*time.Second)
	if len(dlq) != 1 {
		t.Fatalf("the dead-letter topic has %d messages, want 1", len(dlq))
	}
	if got := dlq[0].headers[forwarder.MetadataAttempts]; got != strconv.Itoa(maxAttempts) || dlq[0].eventID != bound[0].ID.String() ||
		dlq[0].headers[middleware.PoisonedTopicKey] != h.topic {
		t.Errorf("the dead letter has %s=%s, event id %s, poisoned topic %s; want %d, %s, %s (headers %v)",
			forwarder.MetadataAttempts, got, dlq[0].eventID, dlq[0].headers[middleware.PoisonedTopicKey],
			maxAttempts, bound[0].ID, h.topic, dlq[0].headers)
	}
	// The free key flowed; the events behind the dead one stay parked.
	if got := consumeDistinct(t, h.brokers, h.topic, 1, 60*time.Second); !receivedIDs(got)[free.ID.String()] {
		t.Fatalf("the free key's event did not arrive (%d events)", len(got))
	}
	if _, _, _, held = pub.counts(); held != 0 {
		t.Errorf("%d events held behind the dead one were published", held)
	}
	if n := h.rowsWithStatus(0); n != 2 {
		t.Errorf("%d pending rows, want the 2 held behind the dead event", n)
	}
}
