package kafka

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestExactlyOnceRestoredCopyIsReidentified: installation A relays exactly-once into the real
// Kafka; B is a copy of A's database restored from a pg_dump into a second database, with its
// relays on the same Kafka, the same topic, table name, lease group and default prefix: a
// staging copy of production, or the green side of a blue/green cutover. B's relay must refuse
// to start (with the original's identity it would open A's units, fence A's transactions and
// apply A's checkpoints to B's table). After outbox.Reidentify, both relay their own new events,
// with relays restarted: every event of both exactly once, none lost, none duplicated, and no
// checkpoint of A's applied to B (B counts no foreign checkpoint and its units table names only
// its own units). On both sources: with cdc, B's relay makes a slot of its own and drains the
// table.
func TestExactlyOnceRestoredCopyIsReidentified(t *testing.T) {
	bothSources(t, restoredCopyIsReidentified)
}

func restoredCopyIsReidentified(t *testing.T, source forwarder.Source) {
	ctx := context.Background()
	table := testsupport.UniqueName("eo_restored")
	a := newInstallationHarness(t, table, table)
	a.source = source
	if source == forwarder.SourceCDC {
		t.Cleanup(func() { testsupport.DropCDCObjects(t, a.db, a.writer.Table()) })
	}
	keysA := eoKeys(12)
	keysB := make([]string, len(keysA))
	for i, k := range keysA {
		keysB[i] = "b-" + k
	}

	a.write(keysA, 0, 10)
	ra := a.startRelay("restored-a", nil)
	a.waitDrained(30 * time.Second)
	ra.stop()
	idA, err := outbox.ReadInstallation(ctx, a.db, a.writer.Table())
	if err != nil {
		t.Fatal(err)
	}

	copyDSN := testsupport.RestorePostgresCopy(t, table)
	b := &eoHarness{t: t, dsn: copyDSN, db: testsupport.OpenDSN(t, "pgx", copyDSN), writer: a.writer,
		brokers: a.brokers, topic: a.topic, checkpoint: a.checkpoint, source: source}
	if source == forwarder.SourceCDC {
		t.Cleanup(func() { testsupport.DropCDCObjects(t, b.db, b.writer.Table()) }) // before the copy's database is dropped
	}
	if n := b.pendingRows(); n != 0 {
		t.Fatalf("the copy holds %d pending rows, want none (A was drained and stopped before the dump)", n)
	}
	var copiedUnits int
	if err := b.db.QueryRow("SELECT COUNT(*) FROM " + a.writer.Table().Units()).Scan(&copiedUnits); err != nil {
		t.Fatal(err)
	}
	if copiedUnits == 0 {
		t.Fatal("the dump carried none of A's unit marks: the test would not show that none is applied to B")
	}

	err = runUntilStopped(t, b)
	var restored *outbox.RestoredCopyError
	if !errors.As(err, &restored) || restored.Installation != idA {
		t.Fatalf("B's relay on the restored copy returned %v, want a *outbox.RestoredCopyError naming installation %s", err, idA)
	}
	t.Logf("B's relay refused: %v", err)

	got, err := outbox.Reidentify(ctx, b.db, b.writer.Table())
	if err != nil {
		t.Fatal(err)
	}
	if got.Previous != idA || got.Installation == idA || got.Units != int64(copiedUnits) {
		t.Fatalf("Reidentify = %+v, want A's identity %s replaced and its %d unit rows dropped", got, idA, copiedUnits)
	}

	ra = a.startRelay("restored-a2", nil)
	rb := b.startRelay("restored-b", nil)
	a.write(keysA, 10, 5)
	b.write(keysB, 0, 10)
	rb.stop() // B's units are opened again: their checkpoints are B's own
	rb = b.startRelay("restored-b2", nil)
	a.write(keysA, 15, 5)
	b.write(keysB, 10, 10)
	a.waitDrained(60 * time.Second)
	b.waitDrained(60 * time.Second)
	if n := rb.counter("outboxkit_forwarder_foreign_checkpoints_total"); n != 0 {
		t.Errorf("B's relay counted %v foreign checkpoints", n)
	}
	ra.stop()
	rb.stop()

	all := append(append([]string(nil), keysA...), keysB...)
	checkExactlyOnce(t, a.readAll(a.topic, true, len(all)*20, 60*time.Second), all, 20)

	rows, err := b.db.Query("SELECT unit FROM " + b.writer.Table().Units())
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	units := 0
	for rows.Next() {
		var unit string
		if err := rows.Scan(&unit); err != nil {
			t.Fatal(err)
		}
		units++
		if !strings.HasPrefix(unit, "outboxkit/"+got.Installation+"/") {
			t.Errorf("B's units table names unit %s, not one of B's (outboxkit/%s/...)", unit, got.Installation)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if units == 0 {
		t.Error("B's units table is empty: its relays recorded no checkpoint of their own")
	}
}

// runUntilStopped runs an exactly-once relay on h's database and returns Run's error; a relay
// still running after 60 s (one that did not refuse the database) is stopped and its nil error
// returned.
func runUntilStopped(t *testing.T, h *eoHarness) error {
	t.Helper()
	pub, err := NewPublisher(Config{Brokers: h.brokers}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	f, err := forwarder.New(forwarder.Config{
		DB: h.db, Dialect: outbox.Postgres, Table: h.writer.Table().Events(), Publisher: pub, RelayID: "restored-refused",
		Delivery: forwarder.ExactlyOnce, CheckpointTopic: h.checkpoint, TransactionalUnits: harnessUnits,
		DeadLetterTopic: h.topic + "-dlq", IsRetriable: Retriable, Source: h.source, CDC: h.cdcConfig(h.dsn),
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return f.Run(ctx)
}
