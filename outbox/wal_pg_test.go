package outbox_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestWALWriterEmitsCommittedEventsInOrder: in ModeWAL, every write path (database/sql WriteTx,
// pgx WritePgx, pgx QueuePgx batched with the business INSERT, the Watermill Publisher) emits
// transactional messages with the table's prefix; a committed transaction's events arrive in
// write order with every field, a rolled-back transaction's never, and no row is written.
func TestWALWriterEmitsCommittedEventsInOrder(t *testing.T) {
	db := testsupport.OpenPostgres(t)
	tg := newWALTarget(t, db, testsupport.UniqueName("walw"))
	slot := newWALSlot(t, db, tg)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testsupport.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	insert := "INSERT INTO " + tg.business + " (id, total) VALUES ($1, 1)"

	// database/sql: two Write calls and a Watermill publish in one transaction.
	stdEvents := []outbox.Event{walEvent("s-1"), walEvent("s-2"), walEvent("s-1"), walEvent("s-3")}
	writeStd := func(events []outbox.Event, commit bool) {
		t.Helper()
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := tx.ExecContext(ctx, insert, events[0].AggregateID+"-"+events[0].ID.String()); err != nil {
			t.Fatal(err)
		}
		if err := tg.writer.WriteTx(ctx, tx, events[:2]...); err != nil {
			t.Fatal(err)
		}
		if err := tg.writer.WriteTx(ctx, tx, events[2]); err != nil {
			t.Fatal(err)
		}
		pub, err := tg.writer.Publisher(wsql.TxFromStdSQL(tx))
		if err != nil {
			t.Fatal(err)
		}
		msg := events[3].ToMessage()
		if err := pub.Publish(events[3].Topic, msg); err != nil {
			t.Fatal(err)
		}
		if commit {
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
		}
	}
	// pgx: the emit queued in the business statement's batch, then a WritePgx.
	pgxEvents := []outbox.Event{walEvent("p-1"), walEvent("p-1")}
	writePgx := func(events []outbox.Event, commit bool) {
		t.Helper()
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = tx.Rollback(ctx) }()
		batch := &pgx.Batch{}
		batch.Queue(insert, events[0].ID.String())
		if err := tg.writer.QueuePgx(batch, events[0]); err != nil {
			t.Fatal(err)
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			t.Fatal(err)
		}
		if err := tg.writer.WritePgx(ctx, tx, events[1]); err != nil {
			t.Fatal(err)
		}
		if commit {
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	writeStd(stdEvents, true)
	rolledBack := []outbox.Event{walEvent("r-1"), walEvent("r-2"), walEvent("r-3"), walEvent("r-4")}
	writeStd(rolledBack, false)
	rolledBackPgx := []outbox.Event{walEvent("rp-1"), walEvent("rp-2")}
	writePgx(rolledBackPgx, false)
	writePgx(pgxEvents, true)

	msgs := slot.messages(t, tg.writer.Table().WALPrefix())
	if len(msgs) != 5 {
		t.Fatalf("%d messages with prefix %s, want 5 (3 of the database/sql transaction, 2 of the pgx one)",
			len(msgs), tg.writer.Table().WALPrefix())
	}
	for i, m := range msgs {
		if !m.transactional {
			t.Fatalf("message %d at %s is not transactional", i, m.lsn)
		}
		if i > 0 && m.lsn <= msgs[i-1].lsn {
			t.Fatalf("message %d at %s does not follow %s", i, m.lsn, msgs[i-1].lsn)
		}
	}
	if msgs[0].xid != msgs[2].xid || msgs[3].xid != msgs[4].xid || msgs[0].xid == msgs[3].xid {
		t.Fatalf("transactions of the messages: %d %d %d %d %d, want 3 in one and 2 in another",
			msgs[0].xid, msgs[1].xid, msgs[2].xid, msgs[3].xid, msgs[4].xid)
	}
	got := walEvents(t, msgs)
	want := append(append([]outbox.Event{}, stdEvents...), pgxEvents...)
	if len(got) != len(want) {
		t.Fatalf("%d events decoded, want the %d committed", len(got), len(want))
	}
	for i := range want {
		assertSameEvent(t, got[i], want[i])
	}
	var rows int
	if err := db.QueryRow("SELECT count(*) FROM " + tg.writer.Table().Events()).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("%d rows in the outbox table (%v), want none", rows, err)
	}
}

// TestWALGoAndSQLEnvelopesAreIdentical: the Go writer and <table>_emit produce the same bytes
// for the same event: every field set, and the fewest fields with the defaults.
func TestWALGoAndSQLEnvelopesAreIdentical(t *testing.T) {
	db := testsupport.OpenPostgres(t)
	tg := newWALTarget(t, db, testsupport.UniqueName("walw"))
	slot := newWALSlot(t, db, tg)
	ctx := context.Background()
	full := walEvent("ö-1")
	full.Headers["zz"], full.Headers["B"], full.Headers["b"] = strings.Repeat("v", 300), "upper", "lower"
	full.CreatedAt = time.Date(1969, 7, 20, 20, 17, 40, 123456000, time.UTC)
	minimal := outbox.Event{ID: uuid.Must(uuid.NewV7()), Topic: "t", AggregateID: "k", EventType: "E",
		CreatedAt: time.Now().Truncate(time.Microsecond)}
	for _, e := range []outbox.Event{full, minimal} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := tg.writer.WriteTx(ctx, tx, e); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		id, err := tg.sqlEmit(t, e)
		if err != nil {
			t.Fatal(err)
		}
		if id != e.ID.String() {
			t.Fatalf("the emit function returned %s, want %s", id, e.ID)
		}
	}
	msgs := slot.messages(t, tg.writer.Table().WALPrefix())
	if len(msgs) != 4 {
		t.Fatalf("%d messages, want 4", len(msgs))
	}
	for i := 0; i < 4; i += 2 {
		if !bytes.Equal(msgs[i].content, msgs[i+1].content) {
			t.Fatalf("envelopes differ\n   Go %x\n  SQL %x", msgs[i].content, msgs[i+1].content)
		}
	}
	assertSameEvent(t, walEvents(t, msgs[1:2])[0], full)
	// Left out, the id and the creation time are made by the database.
	id, err := tg.sqlEmit(t, outbox.Event{Topic: "t", AggregateID: "k", EventType: "E"})
	if err != nil {
		t.Fatal(err)
	}
	events := walEvents(t, slot.messages(t, tg.writer.Table().WALPrefix()))
	if len(events) != 1 || events[0].ID.String() != id || time.Since(events[0].CreatedAt) > time.Hour {
		t.Fatalf("defaults: %+v, want id %s created now", events, id)
	}
}

// TestWALInvalidInputIsRefused: the Go writer and the emit function refuse the same bad events,
// naming the bad value, and emit nothing; after the Go writer's refusal the transaction is usable.
func TestWALInvalidInputIsRefused(t *testing.T) {
	db := testsupport.OpenPostgres(t)
	tg := newWALTarget(t, db, testsupport.UniqueName("walw"))
	slot := newWALSlot(t, db, tg)
	ctx := context.Background()
	mutate := func(f func(e *outbox.Event)) outbox.Event {
		e := walEvent("o-1")
		f(&e)
		return e
	}
	for _, c := range []struct {
		name     string
		event    outbox.Event
		goWant   string
		sqlWant  string
		goOnlyOK bool
	}{
		{"bad topic", mutate(func(e *outbox.Event) { e.Topic = "orders events" }), `topic "orders events"`, `topic "orders events"`, false},
		{"no aggregate id", mutate(func(e *outbox.Event) { e.AggregateID = "" }), "missing aggregate id", "aggregate_id must not be empty", false},
		{"long event type", mutate(func(e *outbox.Event) { e.EventType = strings.Repeat("E", 256) }), "event type is 256 bytes", "event_type is 256 bytes", false},
		{"reserved header", mutate(func(e *outbox.Event) { e.Headers["event_id"] = "x" }), `header "event_id" is reserved`, `header "event_id" is reserved`, false},
		{"bad header name", mutate(func(e *outbox.Event) { e.Headers["a b"] = "x" }), `header name "a b"`, `header name "a b"`, false},
		{"not UTF-8", mutate(func(e *outbox.Event) { e.AggregateID = "o-\xff" }), `aggregate id "o-\xff" must be valid UTF-8`, "", true},
		{"NUL", mutate(func(e *outbox.Event) { e.Headers["h"] = "a\x00b" }), `header h value "a\x00b" must be valid UTF-8 without NUL`, "", true},
		{"headers too large", mutate(func(e *outbox.Event) { e.Headers = map[string]string{"h": strings.Repeat("v", 65536)} }),
			"headers are 65537 bytes (names and values), the limit is 65536", "headers are 65537 bytes (names and values), the limit is 65536", false},
	} {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = tg.writer.WriteTx(ctx, tx, c.event)
		if !errors.Is(err, outbox.ErrInvalidEvent) || !strings.Contains(err.Error(), c.goWant) {
			t.Errorf("%s: Go writer: %v, want %q", c.name, err, c.goWant)
		}
		if _, err := tx.ExecContext(ctx, "SELECT 1"); err != nil {
			t.Errorf("%s: the transaction is not usable after the refusal: %v", c.name, err)
		}
		_ = tx.Commit()
		if c.goOnlyOK { // PostgreSQL text cannot hold these: the driver refuses them before the function
			continue
		}
		if _, err := tg.sqlEmit(t, c.event); err == nil || !strings.Contains(err.Error(), "outboxkit: "+c.sqlWant) {
			t.Errorf("%s: emit function: %v, want %q", c.name, err, c.sqlWant)
		}
	}
	// What only SQL can pass: headers that are not an object of strings.
	for headers, want := range map[string]string{
		`{"n": 1}`: `header "n" must be a JSON string, not a JSON number`,
		`[]`:       "headers must be a JSON object of string values, not a JSON array",
		`null`:     "headers must be a JSON object of string values, not a JSON null",
	} {
		_, err := db.Exec("SELECT "+tg.writer.Table().WALEmitFunction()+"('t', 'o', 'k', 'E', NULL, $1::jsonb)", headers)
		if err == nil || !strings.Contains(err.Error(), "outboxkit: "+want) {
			t.Errorf("headers %s: emit function: %v, want %q", headers, err, want)
		}
	}
	if msgs := slot.messages(t, tg.writer.Table().WALPrefix()); len(msgs) != 0 {
		t.Fatalf("%d messages emitted for refused events", len(msgs))
	}
}

// TestWALPrefixesKeepTablesApart: two outboxes of one database, one of them schema-qualified and
// spelled in mixed case, emit under their own prefixes from Go and from SQL, and neither stream
// carries the other's events.
func TestWALPrefixesKeepTablesApart(t *testing.T) {
	db := testsupport.OpenPostgres(t)
	schema := testsupport.UniqueName("walapp")
	if _, err := db.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec("DROP SCHEMA " + schema + " CASCADE") })
	plain := newWALTarget(t, db, testsupport.UniqueName("walw"))
	qualified := newWALTargetOn(t, db, strings.ToUpper(schema)+".Orders_Outbox", plain.slot)
	if p := qualified.writer.Table().WALPrefix(); p != "outboxkit:"+schema+".orders_outbox" {
		t.Fatalf("prefix %q", p)
	}
	slot := newWALSlot(t, db, plain, qualified)
	ctx := context.Background()
	written := map[*walTarget][]outbox.Event{}
	for _, tg := range []*walTarget{&plain, &qualified} {
		goEvent := walEvent("k-1")
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := tg.writer.WriteTx(ctx, tx, goEvent); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		sqlEvent := walEvent("k-1")
		if _, err := tg.sqlEmit(t, sqlEvent); err != nil {
			t.Fatal(err)
		}
		written[tg] = []outbox.Event{goEvent, sqlEvent}
	}
	for _, tg := range []*walTarget{&plain, &qualified} {
		got := walEvents(t, slot.peek(t, tg.writer.Table().WALPrefix()))
		want := written[tg]
		if len(got) != len(want) {
			t.Fatalf("%s: %d events under its prefix, want %d", tg.writer.Table(), len(got), len(want))
		}
		for i := range want {
			assertSameEvent(t, got[i], want[i])
		}
	}
}

// TestWALWriterStoresTraceContext: in ModeWAL, Write stores the W3C trace context of the caller's
// span in the emitted event's headers, replacing a stale tracestate, as in table mode, without
// changing the caller's header map.
func TestWALWriterStoresTraceContext(t *testing.T) {
	db := testsupport.OpenPostgres(t)
	tg := newWALTarget(t, db, testsupport.UniqueName("walw"))
	slot := newWALSlot(t, db, tg)
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("test").Start(context.Background(), "place order")
	defer span.End()
	e := walEvent("o-1")
	e.Headers["tracestate"] = "stale=1"
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.writer.WriteTx(ctx, tx, e); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if _, changed := e.Headers["traceparent"]; changed || e.Headers["tracestate"] != "stale=1" {
		t.Fatalf("the caller's headers changed: %v", e.Headers)
	}
	events := walEvents(t, slot.messages(t, tg.writer.Table().WALPrefix()))
	if len(events) != 1 {
		t.Fatalf("%d events, want 1", len(events))
	}
	carrier := propagation.MapCarrier(events[0].Headers)
	got := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), carrier))
	if got.TraceID() != span.SpanContext().TraceID() || got.SpanID() != span.SpanContext().SpanID() {
		t.Fatalf("emitted headers %v do not carry the span %s", events[0].Headers, span.SpanContext().SpanID())
	}
	if _, stale := events[0].Headers["tracestate"]; stale {
		t.Fatalf("the stale tracestate travelled with the new traceparent: %v", events[0].Headers)
	}
}

// TestWALWriterSplitsLargeWrites: one Write of 2,001 events emits three messages (1,000 events
// at most in one), all in the transaction and in order.
func TestWALWriterSplitsLargeWrites(t *testing.T) {
	db := testsupport.OpenPostgres(t)
	tg := newWALTarget(t, db, testsupport.UniqueName("walw"))
	slot := newWALSlot(t, db, tg)
	ctx := context.Background()
	events := make([]outbox.Event, 2001)
	for i := range events {
		events[i] = outbox.Event{Topic: "t", AggregateID: strconv.Itoa(i % 7), EventType: "E", Payload: []byte(strconv.Itoa(i))}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tg.writer.WriteTx(ctx, tx, events...); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	msgs := slot.messages(t, tg.writer.Table().WALPrefix())
	if len(msgs) != 3 || msgs[0].xid != msgs[2].xid {
		t.Fatalf("%d messages, want 3 of one transaction", len(msgs))
	}
	got := walEvents(t, msgs)
	if len(got) != len(events) {
		t.Fatalf("%d events, want %d", len(got), len(events))
	}
	for i := range events {
		if got[i].ID != events[i].ID || string(got[i].Payload) != strconv.Itoa(i) {
			t.Fatalf("event %d: %s %q, want %s", i, got[i].ID, got[i].Payload, events[i].ID)
		}
	}
}
