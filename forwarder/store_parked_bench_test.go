package forwarder

import (
	"fmt"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// BenchmarkClaimBesideParkedKeys measures the polling claim (32 partitions, up to 3 or 1,000
// rows, statistics fresh) on a table of 20,000 pending events of 1,000 keys, then beside 100
// keys that hold 100,000 dead events, then beside 100 keys each held back by one dead event with
// the rest of their 100,000 events pending behind it, older than the claimable rows. It reports
// the fastest of five claims of each, in ms: the claim leaves the parked keys out by reading their
// rows, so its cost grows with the rows parked keys hold.
//
//	CI=true go test ./forwarder -run '^$' -bench ClaimBesideParkedKeys -benchtime 1x
func BenchmarkClaimBesideParkedKeys(b *testing.B) {
	for range b.N {
		fx := newPlanFixture(b, 20000, true)
		fx.reportClaims(b, "healthy")
		fx.parkKeys(b)
		fx.reportClaims(b, "100k-dead")
		fx.parkBehindOneDead(b)
		fx.reportClaims(b, "100k-behind-dead")
	}
}

// reportClaims reports the fastest of five claims of 3 and of 1,000 rows over half the partitions.
func (fx *planFixture) reportClaims(b *testing.B, shape string) {
	parts := make([]int, outbox.Partitions/2)
	for i := range parts {
		parts[i] = 2 * i
	}
	conn, err := fx.db.Conn(fx.ctx) // one connection, its plans made on the table as it is now
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	for _, limit := range []int{3, 1000} {
		fastest := time.Hour
		for range 5 {
			start := time.Now()
			rows, err := fx.store.SQL().Claim(parts, limit, 1<<30).Query(fx.ctx, conn)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := relay.ScanRecords(rows); err != nil {
				b.Fatal(err)
			}
			_ = rows.Close()
			fastest = min(fastest, time.Since(start))
		}
		b.ReportMetric(float64(fastest.Microseconds())/1000, fmt.Sprintf("ms/claim-%d-%s", limit, shape))
	}
}

// parkKeys writes 100,000 dead events of 100 keys ("poison-0" … "poison-99").
func (fx *planFixture) parkKeys(b *testing.B) {
	events := make([]outbox.Event, 100000)
	for i := range events {
		events[i] = outbox.Event{Topic: "t", AggregateType: "order", AggregateID: fmt.Sprintf("poison-%d", i%100),
			EventType: "Happened", Payload: []byte("{}")}
	}
	tx, err := fx.db.BeginTx(fx.ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	for s := 0; s < len(events); s += 1000 {
		if err := fx.writer.WriteTx(fx.ctx, tx, events[s:s+1000]...); err != nil {
			b.Fatal(err)
		}
	}
	ev := fx.store.Table.Events()
	// older than every claimable row, as a backlog behind an old failure is
	fx.exec(b, tx, "UPDATE "+ev+" SET status = 2, attempts = 5, seq = seq - 1000000000 WHERE aggregate_id LIKE 'poison-%'")
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	fx.exec(b, fx.db, "VACUUM ANALYZE "+ev)
}

// parkBehindOneDead leaves one dead event per poison key, the first, and makes the rest pending.
func (fx *planFixture) parkBehindOneDead(b *testing.B) {
	ev := fx.store.Table.Events()
	fx.exec(b, fx.db, "UPDATE "+ev+" SET status = 0, attempts = 0 WHERE aggregate_id LIKE 'poison-%' AND seq NOT IN"+
		" (SELECT min(seq) FROM "+ev+" WHERE aggregate_id LIKE 'poison-%' GROUP BY aggregate_id)")
	fx.exec(b, fx.db, "VACUUM ANALYZE "+ev)
}

func (fx *planFixture) exec(b *testing.B, q relay.Querier, statement string) {
	if _, err := q.ExecContext(fx.ctx, statement); err != nil {
		b.Fatalf("%s: %v", statement, err)
	}
}
