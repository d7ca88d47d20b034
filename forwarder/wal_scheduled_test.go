package forwarder_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/forwarder/internal/wal"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestWALScheduledRowDoesNotParkItsKey: on the wal source a scheduled event is a row of the
// table (status scheduled) that does not park its key (docs/scheduled.md, the ordering rule): a
// relay that starts with a key's scheduled rows in the table streams that key's events
// directly, writing none of them into the table; an event cancelled with Writer.Cancel in ModeWAL,
// in the transaction that emits the key's ordinary events, never arrives; one rescheduled to a
// second from now is published by the drain, not before its time by the database's clock, and so
// is one a plain-SQL INSERT scheduled with deliver_at.
func TestWALScheduledRowDoesNotParkItsKey(t *testing.T) {
	h := newWALHarness(t, testsupport.KafkaBrokers(t))
	testsupport.CreateKafkaTopic(t, h.brokers, h.topic)
	ctx := context.Background()
	w := h.scheduler()

	// Written before the relay starts: its session reads the parked keys from the table at its
	// start, where these two rows are. A write of scheduled events only needs no slot.
	far := dbClock(t, h.db, h.dialect).Add(time.Hour)
	later, doomed := h.event("k", 1), h.event("k", 2)
	later.DeliverAt, doomed.DeliverAt = far, far
	h.write(later, doomed)

	var parkings atomic.Int64
	kafkaPub := h.publisher()
	pub := &clockedPublisher{OutcomePublisher: kafkaPub.(forwarder.OutcomePublisher), Publisher: kafkaPub, t: t, db: h.db, dialect: h.dialect, at: map[string]time.Time{}}
	h.start(forwarder.WithWALHooks(h.walConfig(pub), &wal.Hooks{Parked: func() { parkings.Add(1) }}))
	h.waitForWALStream(forwarder.WALSlotName(h.writer.Table().Events(), "default"))

	// The key's ordinary events and the cancel of one of its scheduled events, in one transaction.
	first, second := h.event("k", 0), h.event("k", 3)
	tx, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := w.WriteTx(ctx, tx, first); err != nil {
		t.Fatal(err)
	}
	if res, err := w.Cancel(ctx, wsql.TxFromStdSQL(tx), doomed.ID); err != nil || !slices.Equal(res.Changed, []uuid.UUID{doomed.ID}) {
		t.Fatalf("cancel %s in ModeWAL: %+v, %v", doomed.ID, res, err)
	}
	if err := w.WriteTx(ctx, tx, second); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	got := consumeDistinct(t, h.brokers, h.topic, 2, 30*time.Second)
	if ids := eventIDs(got); !slices.Equal(ids[:2], []string{first.ID.String(), second.ID.String()}) {
		t.Fatalf("key k: %v, want its ordinary events %s then %s while %s waits", ids, first.ID, second.ID, later.ID)
	}

	// Moved to a second from now: the drain releases and publishes it.
	tx, err = h.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	later.DeliverAt = dbClock(t, h.db, h.dialect).Add(time.Second).Truncate(time.Microsecond)
	if res, err := w.Reschedule(ctx, wsql.TxFromStdSQL(tx), later.DeliverAt, later.ID); err != nil || len(res.Changed) != 1 {
		t.Fatalf("reschedule %s in ModeWAL: %+v, %v", later.ID, res, err)
	}
	// A plain-SQL writer schedules with the INSERT of docs/writers.md in ModeWAL too: the
	// table's trigger makes the row scheduled.
	bySQL := h.event("sql", 0)
	if err := tx.QueryRowContext(ctx, "INSERT INTO "+h.writer.Table().Events()+
		" (event_id, topic, aggregate_type, aggregate_id, event_type, payload, deliver_at)"+
		" VALUES ($1, $2, $3, $4, $5, $6, clock_timestamp() + interval '1 second') RETURNING deliver_at",
		bySQL.ID, bySQL.Topic, bySQL.AggregateType, bySQL.AggregateID, bySQL.EventType, bySQL.Payload).Scan(&bySQL.DeliverAt); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	got = consumeDistinct(t, h.brokers, h.topic, 4, 30*time.Second)
	for _, r := range got {
		if r.eventID == doomed.ID.String() {
			t.Errorf("the cancelled event %s was published", doomed.ID)
		}
	}
	for _, e := range []outbox.Event{later, bySQL} {
		if !slices.Contains(eventIDs(got), e.ID.String()) {
			t.Errorf("the scheduled event %s (key %s) was not published", e.ID, e.AggregateID)
		} else if at := pub.publishedAt(e.ID); at.Before(e.DeliverAt) {
			t.Errorf("event %s was published at %s by the database's clock, before its time %s", e.ID, at, e.DeliverAt)
		}
	}
	if n := parkings.Load(); n != 0 {
		t.Errorf("the stream parked events %d times; want 0: a scheduled row must not park its key", n)
	}
	if n := h.rowsWithStatus(4); n != 0 {
		t.Errorf("%d rows still scheduled, want 0", n)
	}
}

// TestWALReleasedEventThatFailsParksItsKey: once released, a scheduled event is an ordinary
// pending row; when the broker refuses it, it stays in the table with its attempt counted, and
// the drain's next look at the table parks its key: the key's later streamed events are written
// behind it, and go out after it, in order, once the broker takes it (docs/wal.md, Parking).
func TestWALReleasedEventThatFailsParksItsKey(t *testing.T) {
	h := newWALHarness(t, testsupport.KafkaBrokers(t))
	testsupport.CreateKafkaTopic(t, h.brokers, h.topic)
	pub := &faultyPublisher{Publisher: h.publisher(), topic: h.topic, poisoned: map[string]error{}}
	var passes atomic.Int64
	h.start(forwarder.WithWALHooks(h.walConfig(pub), &wal.Hooks{Drained: func(int) { passes.Add(1) }}))
	h.waitForWALStream(forwarder.WALSlotName(h.writer.Table().Events(), "default"))

	released := h.event("r", 0)
	released.DeliverAt = dbClock(t, h.db, h.dialect).Add(300 * time.Millisecond)
	pub.poison(released.ID.String(), errors.New("broker refuses this one"))
	h.write(released)
	waitFor(t, time.Minute, "the released event's failed attempt", func() bool {
		var attempts int
		err := h.db.QueryRow("SELECT COALESCE(MAX(attempts), 0) FROM " + h.writer.Table().Events() + " WHERE status = 0").Scan(&attempts)
		return err == nil && attempts > 0
	})
	// Two more passes: the second one's refresh began after the attempt was recorded.
	after := passes.Load()
	waitFor(t, time.Minute, "two drain passes", func() bool { return passes.Load() >= after+2 })

	h.write(h.event("r", 1), h.event("r", 2))
	waitFor(t, time.Minute, "r's later events parked behind it", func() bool { return h.parkedRowsByKey()["r"] == 3 })
	pub.poison(released.ID.String(), nil)
	got := consumeDistinct(t, h.brokers, h.topic, 3, 60*time.Second)
	checkDelivery(t, got, []string{"r"}, 3)
	waitFor(t, time.Minute, "the table emptied", func() bool { return len(h.parkedRowsByKey()) == 0 })
}

// TestWALEmitSchedules: a plain-SQL writer on the wal source schedules through <table>_emit's
// deliver_at (schema v14, docs/writers.md): the event becomes a row of the table, scheduled, in
// the caller's transaction, and emits no message; an ordinary emit of the same transaction is
// streamed at once; the relay's drain publishes the scheduled one, not before its time by the
// database's clock. A deliver_at out of range is refused with SQLSTATE 22023, naming the
// argument, before anything is written.
func TestWALEmitSchedules(t *testing.T) {
	h := newWALHarness(t, testsupport.KafkaBrokers(t))
	testsupport.CreateKafkaTopic(t, h.brokers, h.topic)
	ctx := context.Background()
	kafkaPub := h.publisher()
	pub := &clockedPublisher{OutcomePublisher: kafkaPub.(forwarder.OutcomePublisher), Publisher: kafkaPub, t: t, db: h.db, dialect: h.dialect, at: map[string]time.Time{}}
	h.start(h.walConfig(pub))
	h.waitForWALStream(forwarder.WALSlotName(h.writer.Table().Events(), "default"))
	events := h.writer.Table().Events()

	tx, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	var scheduled, streamed uuid.UUID
	var deliverAt time.Time
	if err := tx.QueryRowContext(ctx, "SELECT "+events+"_emit($1, 'order', 'k', 'Reminder', convert_to('{}', 'UTF8'),"+
		" deliver_at => clock_timestamp() + interval '1 second')", h.topic).Scan(&scheduled); err != nil {
		t.Fatalf("emit with deliver_at: %v", err)
	}
	if err := tx.QueryRowContext(ctx, "SELECT "+events+"_emit($1, 'order', 'k', 'Placed')", h.topic).Scan(&streamed); err != nil {
		t.Fatalf("emit without deliver_at: %v", err)
	}
	var status int
	if err := tx.QueryRowContext(ctx, "SELECT status, deliver_at FROM "+events+" WHERE event_id = $1", scheduled).Scan(&status, &deliverAt); err != nil || status != 4 {
		t.Fatalf("the scheduled emit's row: status %d (%v), want a row with status 4", status, err)
	}
	var rows int
	if err := tx.QueryRowContext(ctx, "SELECT count(*) FROM "+events+" WHERE event_id = $1", streamed).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("the ordinary emit wrote %d rows (%v), want none: it is a message", rows, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	got := consumeDistinct(t, h.brokers, h.topic, 2, 30*time.Second)
	if ids := eventIDs(got); !slices.Equal(ids, []string{streamed.String(), scheduled.String()}) {
		t.Fatalf("published %v, want the ordinary event %s, then the scheduled %s", ids, streamed, scheduled)
	}
	if at := pub.publishedAt(scheduled); at.Before(deliverAt) {
		t.Fatalf("the scheduled event was published at %s by the database's clock, before its time %s", at, deliverAt)
	}

	_, err = h.db.ExecContext(ctx, "SELECT "+events+"_emit($1, 'order', 'k', 'Reminder', deliver_at => '10000-01-01T00:00:00Z')", h.topic)
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != "22023" || !strings.Contains(pgErr.Message, "deliver_at") {
		t.Fatalf("emit with deliver_at in the year 10000: %v; want SQLSTATE 22023 naming deliver_at", err)
	}
	if n := h.rowsWithStatus(4); n != 0 {
		t.Fatalf("%d rows scheduled after the refused emit, want 0", n)
	}
}
