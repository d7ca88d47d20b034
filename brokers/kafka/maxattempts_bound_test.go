package kafka

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/outbox"
)

// deadLetterOutageUnits wraps the real transactional publisher: a transaction holding the
// failing event on the events' topic fails (the event's error, retriable, and the later
// messages of its key held back), and so does the first one holding a message to the
// dead-letter topic (an outage of that topic, retriable); such a transaction is not sent, and
// the unit's session is closed, as after any failed CommitUnit. Every other transaction goes to
// Kafka. It counts the transactions that tried the event, the dead letters committed, and the
// events held behind the failing one that were committed.
type deadLetterOutageUnits struct {
	*Publisher
	topic, deadLetterTopic string
	failing                string
	held                   []string

	mu                  sync.Mutex
	eventTries          int
	deadLetterFailures  int
	deadLettersAccepted int
	heldPublished       int
}

func (p *deadLetterOutageUnits) CommitUnit(ctx context.Context, unit string, topics []string, msgs []*message.Message, checkpoint []byte) ([]error, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	errs := make([]error, len(msgs))
	var failed error
	failedKeys := map[string]bool{}
	deadLetters, held := 0, 0
	for i, m := range msgs {
		id, key := m.Metadata.Get(outbox.MetadataEventID), m.Metadata.Get(outbox.MetadataAggregateID)
		switch {
		case failedKeys[key]:
			errs[i] = errors.New("injected: held back behind an earlier message of its key")
		case topics[i] == p.topic && id == p.failing:
			p.eventTries++
			errs[i] = errors.New("injected: the broker refused the event (retriable)")
		case topics[i] == p.deadLetterTopic && p.deadLetterFailures == 0:
			p.deadLetterFailures++
			errs[i] = errors.New("injected: the dead-letter topic is unavailable (retriable)")
		case topics[i] == p.deadLetterTopic:
			deadLetters++
		case topics[i] == p.topic && slices.Contains(p.held, id):
			held++
		}
		if errs[i] != nil {
			failedKeys[key] = true
			failed = errs[i]
		}
	}
	if failed != nil {
		p.Publisher.CloseUnit(unit)
		return errs, failed
	}
	errs, err := p.Publisher.CommitUnit(ctx, unit, topics, msgs, checkpoint)
	if err == nil {
		p.deadLettersAccepted += deadLetters
		p.heldPublished += held
	}
	return errs, err
}

func (p *deadLetterOutageUnits) counts() (tries, dlqFailures, dlqAccepted, held int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.eventTries, p.deadLetterFailures, p.deadLettersAccepted, p.heldPublished
}

// max_attempts bounds the transactions that carry an event on the exactly-once path too, when
// its dead letter fails after the last attempt: the next batch sends the dead letter alone in
// the unit's transaction, never the event again; the dead letter and the dead row say
// attempts=max_attempts. Before, the event went into a 4th transaction with max_attempts 3.
// On the polling and the cdc source (PostgreSQL, real Kafka).
func TestExactlyOnceMaxAttemptsBoundsTheEventWhenItsDeadLetterFails(t *testing.T) {
	for _, source := range []forwarder.Source{forwarder.SourcePolling, forwarder.SourceCDC} {
		t.Run(string(source), func(t *testing.T) { exactlyOnceMaxAttemptsBound(t, newEOHarnessOn(t, source)) })
	}
}

func exactlyOnceMaxAttemptsBound(t *testing.T, h *eoHarness) {
	const maxAttempts = 3
	ctx := context.Background()
	dlqTopic := h.topic + "-dlq"
	var events []outbox.Event
	for i, key := range []string{"bound", "bound", "bound", "free"} {
		e, err := outbox.NewJSONEvent(h.topic, "order", key, "OrderChanged", eoBody{Key: key, N: i})
		if err != nil {
			t.Fatal(err)
		}
		e.ID = uuid.Must(uuid.NewV7())
		events = append(events, e)
	}
	bound := []uuid.UUID{events[0].ID, events[1].ID, events[2].ID}
	pub, err := NewPublisher(Config{Brokers: h.brokers}, nil)
	if err != nil {
		t.Fatal(err)
	}
	units := &deadLetterOutageUnits{Publisher: pub, topic: h.topic, deadLetterTopic: dlqTopic,
		failing: bound[0].String(), held: []string{bound[1].String(), bound[2].String()}}
	f, err := forwarder.New(forwarder.Config{
		DB: h.db, Dialect: outbox.Postgres, Table: h.writer.Table().Events(), Publisher: units, RelayID: "bound-eo",
		Delivery: forwarder.ExactlyOnce, CheckpointTopic: h.checkpoint, TransactionalUnits: harnessUnits,
		DeadLetterTopic: dlqTopic, IsRetriable: Retriable, MaxAttempts: maxAttempts,
		LeaseTTL: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond,
		InitialInterval: 20 * time.Millisecond, MaxInterval: 200 * time.Millisecond, Source: h.source, CDC: h.cdcConfig(h.dsn),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.Run(runCtx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("relay: %v", err)
		}
		_ = pub.Close()
	})

	h.ready()
	tx, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.writer.WriteTx(ctx, tx, events...); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	adm, err := admin.New(h.db, outbox.Postgres, h.writer.Table().Events())
	if err != nil {
		t.Fatal(err)
	}
	var dead []admin.DeadLetter
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if dead, err = adm.DeadLetters(ctx, 10); err != nil {
			t.Fatal(err)
		}
		if len(dead) > 0 && h.pendingRows() == 2 { // dead, and the free key's event acknowledged
			break
		}
	}
	// A dead row is never claimed again: the counts are final.
	tries, dlqFailures, dlqAccepted, held := units.counts()
	if len(dead) != 1 || dead[0].EventID != bound[0] {
		t.Fatalf("dead rows %+v, want the failing event (tried in %d transactions, dead letter failed %d, committed %d; %d rows pending)",
			dead, tries, dlqFailures, dlqAccepted, h.pendingRows())
	}
	if tries != maxAttempts || dlqFailures != 1 || dlqAccepted != 1 {
		t.Errorf("the event was tried in %d transactions with max_attempts %d (its dead letter failed %d times, was committed %d times), "+
			"want exactly %d and one dead letter", tries, maxAttempts, dlqFailures, dlqAccepted, maxAttempts)
	}
	if dead[0].Attempts != maxAttempts {
		t.Errorf("the dead row has attempts=%d, want %d (last error %q)", dead[0].Attempts, maxAttempts, dead[0].LastError)
	}
	headers := h.deadLetterHeaders(true, bound[0])
	if headers == nil {
		t.Fatalf("no committed dead letter of %s in %s", bound[0], dlqTopic)
	}
	if got := headers[forwarder.MetadataAttempts]; got != strconv.Itoa(maxAttempts) {
		t.Errorf("the dead letter has %s=%s, want %d (headers %v)", forwarder.MetadataAttempts, got, maxAttempts, headers)
	}
	if held != 0 {
		t.Errorf("%d events held behind the dead one were committed", held)
	}
}
