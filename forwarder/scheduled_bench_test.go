package forwarder

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// claimBacklog is the pending backlog BenchmarkClaimBesideScheduled claims from: large enough
// that MariaDB, beside a million scheduled rows, considered reading the primary key in seq order
// for the claim (docs/scheduled.md, Storage).
const claimBacklog = 20_000

// BenchmarkClaimBesideScheduled times one polling step (the release of due scheduled events,
// then the claim of 1,000 of a backlog of 20,000 pending rows) on a table that also holds 0 or
// 1,000,000 events scheduled for tomorrow, on PostgreSQL and MariaDB: the scheduled rows must
// cost the step nothing (docs/scheduled.md). The claimed rows are not acknowledged, so every
// iteration claims the same 1,000. On MariaDB it also reports the index entries and rows the
// step read (Handler_read_* of the session, "reads/op") and fails when the step read more than
// the rows it claimed and the few it looks up around them: a plan that reads the scheduled
// rows shows there, whatever the machine's load.
//
//	CI=true go test ./forwarder -run '^$' -bench ClaimBesideScheduled -benchtime 10x
func BenchmarkClaimBesideScheduled(b *testing.B) {
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL} {
		for _, future := range []int{0, 1_000_000} {
			b.Run(fmt.Sprintf("%s/future=%d", d, future), func(b *testing.B) {
				fx := newStoreFixture(b, d)
				fillScheduled(b, fx, future)
				fillPending(b, fx, claimBacklog)
				if _, err := fx.db.Exec("ANALYZE TABLE " + fx.store.Table.Events()); d == outbox.MySQL && err != nil {
					b.Fatal(err)
				}
				if _, err := fx.db.Exec("ANALYZE " + fx.store.Table.Events()); d == outbox.Postgres && err != nil {
					b.Fatal(err)
				}
				conn, err := fx.db.Conn(fx.ctx)
				if err != nil {
					b.Fatal(err)
				}
				defer func() { _ = conn.Close() }()
				var reads int64
				b.ResetTimer()
				for range b.N {
					if err := fx.store.ReleaseDue(fx.ctx, fx.db, allPartitions(), 1000); err != nil {
						b.Fatal(err)
					}
					before := handlerReads(b, fx.ctx, conn, d)
					recs, err := fx.store.Claim(fx.ctx, conn, allPartitions(), 1000, 1<<30)
					if err != nil {
						b.Fatal(err)
					}
					if len(recs) != 1000 {
						b.Fatalf("claimed %d rows, want 1000", len(recs))
					}
					reads += handlerReads(b, fx.ctx, conn, d) - before
				}
				b.StopTimer()
				if d == outbox.MySQL {
					perClaim := reads / int64(b.N)
					b.ReportMetric(float64(perClaim), "reads/op")
					// 1,000 pending index entries and their rows, the parked keys' look-up,
					// and the claim's derived tables scanned three times: about 5,000. A
					// plan that reads the scheduled rows reads a million more.
					if perClaim > 20_000 {
						b.Fatalf("the claim of 1,000 rows read %d index entries and rows (Handler_read_*): it reads beside the pending rows", perClaim)
					}
				}
			})
		}
	}
}

// handlerReads sums the session's Handler_read_* counters on MariaDB/MySQL (0 elsewhere): the
// index entries and rows its statements read, scans of temporary tables included. It leaves
// out Handler_read_rnd, the re-reads of rows a sort or a temporary table already holds.
func handlerReads(b *testing.B, ctx context.Context, conn *sql.Conn, d outbox.Dialect) int64 {
	b.Helper()
	if d != outbox.MySQL {
		return 0
	}
	rows, err := conn.QueryContext(ctx, "SHOW SESSION STATUS LIKE 'Handler_read%'")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = rows.Close() }()
	var sum int64
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			b.Fatal(err)
		}
		if name == "Handler_read_rnd" {
			continue
		}
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			b.Fatalf("%s = %q: %v", name, value, err)
		}
		sum += n
	}
	if err := rows.Err(); err != nil {
		b.Fatal(err)
	}
	return sum
}

// fillScheduled inserts n events scheduled for tomorrow, in the database (a series), with their
// key hash given so the any-writer trigger does not run.
func fillScheduled(b *testing.B, fx *storeFixture, n int) {
	b.Helper()
	fillSeries(b, fx, n, "4", "now() + interval '1 day'", "UTC_TIMESTAMP(6) + INTERVAL 1 DAY", "f", 0, 1)
}

// fillPending inserts n pending events of 1,000 keys (100-byte payloads), written after the
// scheduled ones, as fillScheduled does.
func fillPending(b *testing.B, fx *storeFixture, n int) {
	b.Helper()
	fillSeries(b, fx, n, "0", "NULL", "NULL", "k", 1000, 100)
}

// fillSeries inserts n rows of status status and deliver_at pgDue (PostgreSQL) or myDue
// (MySQL) in one statement, aggregate ids prefix plus the row's number (modulo keys, when not 0)
// and payloads of payload bytes.
func fillSeries(b *testing.B, fx *storeFixture, n int, status, pgDue, myDue, prefix string, keys, payload int) {
	b.Helper()
	if n == 0 {
		return
	}
	t := fx.store.Table.Events()
	pgKey, myKey := "g", "seq"
	if keys > 0 {
		pgKey, myKey = fmt.Sprintf("(1000000000 + g %% %d)", keys), fmt.Sprintf("(1000000000 + seq %% %d)", keys)
	}
	q := "INSERT INTO " + t + " (event_id, topic, aggregate_id, event_type, payload, headers, key_hash, partition_no, created_at, status, deliver_at)" +
		" SELECT gen_random_uuid(), 't', '" + prefix + "' || " + pgKey + ", 'E', convert_to(repeat('x', " + strconv.Itoa(payload) + "), 'UTF8'), '{}', " + pgKey + ", " + pgKey + " % 64, now(), " +
		status + ", " + pgDue + " FROM generate_series(1, $1) g"
	if fx.store.Dialect == outbox.MySQL {
		q = "INSERT INTO " + t + " (event_id, topic, aggregate_id, event_type, payload, headers, key_hash, partition_no, created_at, status, deliver_at)" +
			" SELECT UUID(), 't', CONCAT('" + prefix + "', " + myKey + "), 'E', REPEAT('x', " + strconv.Itoa(payload) + "), '{}', " + myKey + ", " + myKey + " % 64, UTC_TIMESTAMP(6), " +
			status + ", " + myDue + " FROM seq_1_to_" + fmt.Sprint(n)
	}
	start := time.Now()
	var args []any
	if fx.store.Dialect == outbox.Postgres {
		args = append(args, n)
	}
	if _, err := fx.db.Exec(q, args...); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d rows of status %s inserted in %s", n, status, time.Since(start).Round(time.Millisecond))
}
