package forwarder

import (
	"fmt"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// BenchmarkClaimBesideScheduled times one polling step (the release of due scheduled events,
// then the claim of 1,000 pending rows) on a table that also holds 0 or 1,000,000 events
// scheduled for tomorrow, on PostgreSQL and MariaDB: the scheduled rows must cost the step
// nothing (docs/scheduled.md). The claimed rows are not acknowledged, so every iteration claims
// the same 1,000.
//
//	CI=true go test ./forwarder -run '^$' -bench ClaimBesideScheduled -benchtime 200x
func BenchmarkClaimBesideScheduled(b *testing.B) {
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL} {
		for _, future := range []int{0, 1_000_000} {
			b.Run(fmt.Sprintf("%s/future=%d", d, future), func(b *testing.B) {
				fx := newStoreFixture(b, d)
				fillScheduled(b, fx, future)
				for i := range 10 {
					fx.write(fmt.Sprintf("k%d", i), make([]int, 100)...)
				}
				if _, err := fx.db.Exec("ANALYZE TABLE " + fx.store.Table.Events()); d == outbox.MySQL && err != nil {
					b.Fatal(err)
				}
				if _, err := fx.db.Exec("ANALYZE " + fx.store.Table.Events()); d == outbox.Postgres && err != nil {
					b.Fatal(err)
				}
				b.ResetTimer()
				for range b.N {
					if err := fx.store.ReleaseDue(fx.ctx, fx.db, allPartitions(), 1000); err != nil {
						b.Fatal(err)
					}
					if got := fx.claim(1000, 1<<30); len(got) != 1000 {
						b.Fatalf("claimed %d rows, want 1000", len(got))
					}
				}
			})
		}
	}
}

// fillScheduled inserts n events scheduled for tomorrow, in the database (a series), with their
// key hash given so the any-writer trigger does not run.
func fillScheduled(b *testing.B, fx *storeFixture, n int) {
	b.Helper()
	if n == 0 {
		return
	}
	t := fx.store.Table.Events()
	q := "INSERT INTO " + t + " (event_id, topic, aggregate_id, event_type, payload, headers, key_hash, partition_no, created_at, status, deliver_at)" +
		" SELECT gen_random_uuid(), 't', 'f' || g, 'E', '\\x00'::bytea, '{}', g, g % 64, now(), 4, now() + interval '1 day' FROM generate_series(1, $1) g"
	if fx.store.Dialect == outbox.MySQL {
		q = "INSERT INTO " + t + " (event_id, topic, aggregate_id, event_type, payload, headers, key_hash, partition_no, created_at, status, deliver_at)" +
			" SELECT UUID(), 't', CONCAT('f', seq), 'E', 'x', '{}', seq, seq % 64, UTC_TIMESTAMP(6), 4, UTC_TIMESTAMP(6) + INTERVAL 1 DAY FROM seq_1_to_" + fmt.Sprint(n)
	}
	start := time.Now()
	var args []any
	if fx.store.Dialect == outbox.Postgres {
		args = append(args, n)
	}
	if _, err := fx.db.Exec(q, args...); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d scheduled rows inserted in %s", n, time.Since(start).Round(time.Millisecond))
}
