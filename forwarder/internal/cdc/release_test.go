package cdc

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestRetryPassWithoutDeliverAtColumnKeepsRelaying: on a table not yet migrated to v11 (no
// deliver_at column, as after an upgrade of the relay before the migration), the release of due
// scheduled events fails; the retry pass warns about it once, not at every pass, and still
// publishes the rows the stream left to the retry path, as the polling source does, instead of
// ending the cdc session at every RetryInterval.
func TestRetryPassWithoutDeliverAtColumnKeepsRelaying(t *testing.T) {
	db := testsupport.OpenPostgres(t)
	w := testsupport.NewOutbox(t, db, outbox.Config{Dialect: outbox.Postgres, Table: testsupport.UniqueName("cdcnodue")})
	ctx := context.Background()
	fx := &takeoverFixture{t: t, ctx: ctx, db: db, writer: w,
		store: &relay.Store{Table: w.Table(), Dialect: outbox.Postgres, Group: "default", IdleTimeout: 30 * time.Second}}
	if err := fx.store.EnsureLeaseRows(ctx, db); err != nil {
		t.Fatal(err)
	}
	if n := fx.heartbeat("A", time.Minute); n != outbox.Partitions {
		t.Fatalf("A owns %d partitions", n)
	}
	events := w.Table().Events()
	writeMarked := func(key string) {
		t.Helper()
		fx.write(key, 10, 10)
		// The stream left them to the retry path (marked, due now).
		if _, err := db.Exec("UPDATE " + events + " SET next_attempt_at = now() - interval '1 second' WHERE status = 0"); err != nil {
			t.Fatal(err)
		}
	}
	writeMarked("k1")
	// The table as before v11: the column goes, and with it the index and trigger on it.
	if _, err := db.Exec("ALTER TABLE " + events + " DROP COLUMN deliver_at CASCADE"); err != nil {
		t.Fatal(err)
	}
	s := fx.source()
	var logs strings.Builder
	s.core.Log = slog.New(slog.NewTextHandler(&logs, nil))
	for i := range 2 {
		if i == 1 {
			if _, err := db.Exec("INSERT INTO " + events + " (event_id, topic, aggregate_type, aggregate_id, event_type, payload, key_hash, partition_no, next_attempt_at)" +
				" SELECT gen_random_uuid(), topic, aggregate_type, aggregate_id, event_type, payload, key_hash, partition_no, now() - interval '1 second' FROM " +
				events + " ORDER BY seq LIMIT 1"); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.retryPass(ctx); err != nil {
			t.Fatalf("retry pass %d on a table without deliver_at: %v; want the release's failure warned about and the rows published", i+1, err)
		}
		var pending int
		if err := db.QueryRow("SELECT COUNT(*) FROM " + events + " WHERE status = 0").Scan(&pending); err != nil {
			t.Fatal(err)
		}
		if pending != 0 {
			t.Fatalf("retry pass %d left %d rows pending, want every marked row published", i+1, pending)
		}
	}
	if n := strings.Count(logs.String(), "releasing due scheduled events failed"); n != 1 {
		t.Fatalf("%d warnings about the failed release in two retry passes, want 1:\n%s", n, logs.String())
	}
}
