package forwarder_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestWALRelaysCommittedEventsInOrder: events emitted as logical decoding messages (several per
// transaction, several transactions per key, a header of their own, a tenant) arrive on Kafka in
// commit order per key with every field and header; a rolled-back transaction emits nothing;
// and the relay inserts no row into the outbox table.
func TestWALRelaysCommittedEventsInOrder(t *testing.T) {
	h := newWALHarness(t, testsupport.KafkaBrokers(t))
	testsupport.CreateKafkaTopic(t, h.brokers, h.topic)
	h.start(h.walConfig(h.publisher()))
	h.waitForWALStream(forwarder.WALSlotName(h.writer.Table().Events(), "default"))

	keys := keysNamed("w", 20)
	const rounds = 5 // two events per key and round, in one transaction
	sent := map[string]outbox.Event{}
	for round := range rounds {
		var events []outbox.Event
		for _, k := range keys {
			for i := range 2 {
				e := h.event(k, 2*round+i)
				e.TenantID = "tenant-a"
				e.CreatedAt = time.Now().Add(-time.Duration(i) * time.Hour)
				e.Headers = map[string]string{"x-round": fmt.Sprint(round), "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}
				events = append(events, e)
				sent[e.ID.String()] = e
			}
		}
		h.write(events...)
		h.writeRolledBack(h.event(keys[round], -1))
	}
	got := consumeDistinct(t, h.brokers, h.topic, len(sent), 60*time.Second)
	dups := checkDelivery(t, got, keys, 2*rounds)
	for _, r := range got {
		e, ok := sent[r.eventID]
		if !ok || r.n < 0 {
			t.Fatalf("event %s (n=%d) was not committed but was published", r.eventID, r.n)
		}
		checkWALFields(t, e, r)
	}
	if n := h.rowsInserted(); n != 0 {
		t.Fatalf("the relay inserted %d rows into the outbox table on the happy path; want 0", n)
	}
	t.Logf("%d events in commit order over %d keys, %d duplicates, 0 rows inserted", len(got)-dups, len(keys), dups)
}

// checkWALFields compares a consumed record with the event written.
func checkWALFields(t testing.TB, e outbox.Event, r received) {
	t.Helper()
	want := map[string]string{outbox.MetadataEventID: e.ID.String(), outbox.MetadataEventType: e.EventType,
		outbox.MetadataAggregateType: e.AggregateType, outbox.MetadataAggregateID: e.AggregateID,
		outbox.MetadataTenantID: e.TenantID, outbox.MetadataCreatedAt: e.CreatedAt.UTC().Truncate(time.Microsecond).Format(time.RFC3339Nano)}
	for k, v := range e.Headers {
		want[k] = v
	}
	for k, v := range want {
		if r.headers[k] != v {
			t.Fatalf("event %s: header %s = %q, want %q (all: %v)", e.ID, k, r.headers[k], v, r.headers)
		}
	}
	if string(r.payload) != string(e.Payload) || r.key != e.AggregateID {
		t.Fatalf("event %s: key %q payload %q, want %q %q", e.ID, r.key, r.payload, e.AggregateID, e.Payload)
	}
}

// writeRolledBack emits events in a transaction that rolls back.
func (h *harness) writeRolledBack(events ...outbox.Event) {
	h.t.Helper()
	tx, err := h.db.BeginTx(context.Background(), nil)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.txWriter.WriteTx(context.Background(), tx, events...); err != nil {
		h.t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		h.t.Fatal(err)
	}
}

// TestWALRestartResumesFromTheConfirmedPosition: events committed while no relay runs stay in
// the slot; a relay started again publishes them, and those before them, with nothing lost.
func TestWALRestartResumesFromTheConfirmedPosition(t *testing.T) {
	h := newWALHarness(t, testsupport.KafkaBrokers(t))
	testsupport.CreateKafkaTopic(t, h.brokers, h.topic)
	slot := forwarder.WALSlotName(h.writer.Table().Events(), "default")
	stop := h.start(h.walConfig(h.publisher()))
	h.waitForWALStream(slot)
	keys := keysNamed("r", 10)
	for n := range 3 {
		for _, k := range keys {
			h.write(h.event(k, n))
		}
	}
	consumeDistinct(t, h.brokers, h.topic, 3*len(keys), 60*time.Second)
	stop()
	for n := 3; n < 6; n++ { // no relay runs: only the slot holds these
		for _, k := range keys {
			h.write(h.event(k, n))
		}
	}
	h.start(h.walConfig(h.publisher()))
	got := consumeDistinct(t, h.brokers, h.topic, 6*len(keys), 60*time.Second)
	dups := checkDelivery(t, got, keys, 6)
	t.Logf("%d events over a restart, %d duplicates", len(got)-dups, dups)
}

// TestWALTablesStayApart: two outboxes in one database, one schema-qualified with a mixed-case
// name, each with its relay: each relay publishes its own table's events only.
func TestWALTablesStayApart(t *testing.T) {
	brokers := testsupport.KafkaBrokers(t)
	a := newWALHarness(t, brokers)
	schema := testsupport.UniqueName("walschema")
	if _, err := a.db.Exec("CREATE SCHEMA " + schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = a.db.Exec("DROP SCHEMA " + schema + " CASCADE") })
	b := newMixedCaseWALHarness(t, a.db, brokers, strings.ToUpper(schema[:1])+schema[1:]+".Orders_Outbox")
	for _, h := range []*harness{a, b} {
		testsupport.CreateKafkaTopic(t, h.brokers, h.topic)
		h.start(h.walConfig(h.publisher()))
		h.waitForWALStream(forwarder.WALSlotName(h.writer.Table().Events(), "default"))
	}
	keys := keysNamed("s", 5)
	for n := range 4 {
		for _, k := range keys {
			a.write(a.event(k, n))
			e := b.event(k, n)
			e.Topic = a.topic // the same topic: only the prefix keeps the tables apart
			b.write(e)
		}
	}
	got := consumeDistinct(t, a.brokers, a.topic, 2*4*len(keys), 60*time.Second)
	perTable := map[string]int{}
	for _, r := range got {
		perTable[r.headers["x-table"]]++
	}
	if perTable[""] != 4*len(keys) || perTable["b"] != 4*len(keys) {
		t.Fatalf("got %d events, %v by table (b: the mixed-case table); want %d from each, each once", len(got), perTable, 4*len(keys))
	}
}

// newMixedCaseWALHarness is a wal harness over table (schema-qualified, mixed case) on db whose
// events carry the header x-table: b.
func newMixedCaseWALHarness(t testing.TB, db *sql.DB, brokers []string, table string) *harness {
	t.Helper()
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: table, Mode: outbox.ModeWAL,
		WALSlot: forwarder.WALSlotName(table, "default")})
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(context.Background(), db, w.Table()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	h := &harness{t: t, dialect: outbox.Postgres, db: db, writer: w, brokers: brokers, topic: testsupport.UniqueName("events"),
		source: forwarder.SourceWAL, txWriter: tagged{w, "b"}}
	slot := forwarder.WALSlotName(table, "default")
	t.Cleanup(func() { dropWALSlot(t, h, slot) })
	return h
}

// tagged writes events with the header x-table set.
type tagged struct {
	w   *outbox.Writer
	tag string
}

func (t tagged) WriteTx(ctx context.Context, tx *sql.Tx, events ...outbox.Event) error {
	for i := range events {
		events[i].Headers = map[string]string{"x-table": t.tag}
	}
	return t.w.WriteTx(ctx, tx, events...)
}
