package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// BenchmarkWriterBesideAnyWriterTrigger measures what the any-writer trigger (schema v7 on
// PostgreSQL, v4 on MySQL) costs outbox.Writer, which sets key_hash itself: two outbox tables,
// one without the trigger, written alternately (the order swapped every iteration) so both see
// the same machine noise, with 1 and 100 events per transaction. It reports the time per
// transaction on each and the difference in percent (noise is a few percent either way).
func BenchmarkWriterBesideAnyWriterTrigger(b *testing.B) {
	for _, d := range sqlDialects {
		for _, perTx := range []int{1, 100} {
			b.Run(fmt.Sprintf("%s/events=%d", d, perTx), func(b *testing.B) {
				with, without := newSQLTarget(b, d), newSQLTarget(b, d)
				drop := "DROP TRIGGER " + without.writer.Table().Events() + "_prepare"
				if d == outbox.Postgres {
					drop = "DROP TRIGGER " + without.writer.Table().Events() + "_prepare ON " + without.writer.Table().Events()
				}
				if _, err := without.db.Exec(drop); err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				payload := make([]byte, 256)
				write := func(tg target) time.Duration {
					events := make([]outbox.Event, perTx)
					for i := range events {
						events[i] = outbox.Event{Topic: "orders.events", AggregateType: "order",
							AggregateID: fmt.Sprintf("o-%d", i%50), EventType: "OrderPlaced", Payload: payload}
					}
					start := time.Now()
					tx, err := tg.db.BeginTx(ctx, nil)
					if err != nil {
						b.Fatal(err)
					}
					if err := tg.writer.WriteTx(ctx, tx, events...); err != nil {
						b.Fatal(err)
					}
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
					return time.Since(start)
				}
				var withTrigger, withoutTrigger time.Duration
				i := 0
				for b.Loop() {
					if i++; i%2 == 0 {
						withTrigger += write(with)
						withoutTrigger += write(without)
					} else {
						withoutTrigger += write(without)
						withTrigger += write(with)
					}
				}
				n := float64(b.N)
				b.ReportMetric(float64(withoutTrigger.Microseconds())/n, "µs/tx-no-trigger")
				b.ReportMetric(float64(withTrigger.Microseconds())/n, "µs/tx-trigger")
				b.ReportMetric(100*(float64(withTrigger)/float64(withoutTrigger)-1), "%cost")
			})
		}
	}
}
