package pythonorders_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestPythonOrdersWAL: the Python service emits its events with <outbox>_emit (--shape wal, no
// row; docs/wal.md), concurrently on few orders, rolling back about a fifth of its transactions.
// The test checks the emitted messages themselves, without the wal source's relay
// (forwarder.source: wal): it reads a pgoutput slot itself (protocol 2, messages on, decoded
// with pglogrepl): every committed event arrives once under the table's prefix, with its
// order's versions in increasing order, and no rolled-back event arrives.
func TestPythonOrdersWAL(t *testing.T) {
	python := pythonEnv(t)
	dsn := testsupport.PostgresDSN(t)
	db := testsupport.OpenPostgres(t)
	ctx := context.Background()
	prefix := testsupport.UniqueName("pywal") + "_"
	dropPrefixed(t, db, prefix)
	table, err := outbox.NewTable(outbox.Postgres, prefix+"outbox")
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(ctx, db, table); err != nil {
		t.Fatal(err)
	}
	slot, pub := prefix+"slot", prefix+"pub"
	if _, err := db.ExecContext(ctx, "CREATE PUBLICATION "+pub); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec("DROP PUBLICATION IF EXISTS " + pub) })
	if _, err := db.ExecContext(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", slot); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := db.Exec("SELECT pg_drop_replication_slot($1)", slot); err != nil {
			t.Errorf("drop slot %s: %v", slot, err)
		}
	})
	// <outbox>_emit emits only while the slots registered for the outbox exist (docs/wal.md).
	if _, err := outbox.CreateWALSlot(ctx, db, table, slot); err != nil {
		t.Fatal(err)
	}

	args := []string{"--dsn", dsn, "--prefix", prefix, "--shape", "wal", "--outbox", table.String(), "--topic", "orders.events"}
	runPython(t, python, nil, append([]string{"service.py", "schema"}, args...)...)
	var w writeResult
	runPython(t, python, &w, append([]string{"service.py", "write", "--orders", "6", "--changes", "80",
		"--threads", "4", "--rollback", "0.2"}, args...)...)
	if len(w.Errors) > 0 || len(w.Committed)+len(w.RolledBack) != 80 || len(w.RolledBack) == 0 {
		t.Fatalf("service: %d committed, %d rolled back, errors %v; want 80 in all, some rolled back",
			len(w.Committed), len(w.RolledBack), w.Errors)
	}

	rows, err := db.QueryContext(ctx, "SELECT data FROM pg_logical_slot_get_binary_changes($1, NULL, NULL, "+
		"'proto_version', '2', 'publication_names', $2, 'messages', 'true')", slot, pub)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	seen := map[string]int{}
	lastVersion := map[string]int{}
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			t.Fatal(err)
		}
		msg, err := pglogrepl.ParseV2(data, false)
		if err != nil {
			t.Fatal(err)
		}
		m, ok := msg.(*pglogrepl.LogicalDecodingMessageV2)
		if !ok || m.Prefix != table.WALPrefix() {
			continue
		}
		events, err := outbox.DecodeWALEnvelope(m.Content)
		if err != nil {
			t.Fatalf("message at %s: %v", m.LSN, err)
		}
		for _, e := range events {
			var p struct{ Version int }
			if err := json.Unmarshal(e.Payload, &p); err != nil {
				t.Fatalf("event %s: payload %q: %v", e.ID, e.Payload, err)
			}
			if p.Version <= lastVersion[e.AggregateID] {
				t.Errorf("order %s: version %d after %d", e.AggregateID, p.Version, lastVersion[e.AggregateID])
			}
			lastVersion[e.AggregateID] = p.Version
			if e.Topic != "orders.events" || e.AggregateType != "Order" || e.Headers["source"] != "order-service" {
				t.Errorf("event %s: %+v", e.ID, e)
			}
			seen[e.ID.String()]++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, c := range w.Committed {
		if seen[c.EventID] != 1 {
			t.Errorf("committed event %s (order %s v%d) arrived %d times", c.EventID, c.OrderID, c.Version, seen[c.EventID])
		}
	}
	for _, r := range w.RolledBack {
		if seen[r.EventID] != 0 {
			t.Errorf("rolled-back event %s arrived", r.EventID)
		}
	}
	if len(seen) != len(w.Committed) {
		t.Errorf("%d events in the stream, %d committed", len(seen), len(w.Committed))
	}
	t.Logf("%d committed events arrived in order, %d rolled back did not", len(w.Committed), len(w.RolledBack))
}
