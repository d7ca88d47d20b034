package outbox_test

import (
	"context"
	"fmt"
	"strings"
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

// BenchmarkAnyWriterTriggerPerRow isolates the server side of that cost: one INSERT ... SELECT of
// 10,000 rows that carry key_hash, as outbox.Writer's do, into the table with the trigger and the
// one without, alternately, with no client round trip per row. It reports µs per row on each.
func BenchmarkAnyWriterTriggerPerRow(b *testing.B) {
	const rows = 10000
	for _, d := range sqlDialects {
		b.Run(string(d), func(b *testing.B) {
			with, without := newSQLTarget(b, d), newSQLTarget(b, d)
			drop, source, n := "DROP TRIGGER "+without.writer.Table().Events()+"_prepare", "seq_1_to_10000", "seq"
			if d == outbox.Postgres {
				drop += " ON " + without.writer.Table().Events()
				source, n = "generate_series(1, 10000) AS g(n)", "n"
			}
			if _, err := without.db.Exec(drop); err != nil {
				b.Fatal(err)
			}
			insert := func(tg target) time.Duration {
				q := "INSERT INTO " + tg.writer.Table().Events() + " (event_id, topic, aggregate_type, aggregate_id, event_type, " +
					"tenant_id, payload, headers, key_hash, partition_no, created_at) SELECT '01a233e9-6295-797a-977b-a7636e3a403d', " +
					"'orders.events', 'order', 'o-1', 'OrderPlaced', '', '" + strings.Repeat("x", 256) + "', '{}', " + n + ", " + n +
					" % 64, CURRENT_TIMESTAMP FROM " + source
				start := time.Now()
				if _, err := tg.db.Exec(q); err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			}
			var withTrigger, withoutTrigger time.Duration
			i := 0
			for b.Loop() {
				if i++; i%2 == 0 {
					withTrigger += insert(with)
					withoutTrigger += insert(without)
				} else {
					withoutTrigger += insert(without)
					withTrigger += insert(with)
				}
			}
			perRow := float64(b.N * rows)
			b.ReportMetric(float64(withoutTrigger.Nanoseconds())/1000/perRow, "µs/row-no-trigger")
			b.ReportMetric(float64(withTrigger.Nanoseconds())/1000/perRow, "µs/row-trigger")
		})
	}
}

// BenchmarkSQLWriterBesideGoWriter compares the write cost of a plain-SQL writer (the INSERT of
// docs/writers.md, one statement per transaction, the trigger doing the hash, the checks and the
// lock) with outbox.Writer's, on the same table, alternately, with 1 and 10 events per
// transaction (10 events of 10 keys: one multi-row INSERT on PostgreSQL, ten single-row INSERTs on
// MariaDB, as docs/writers.md advises for order). It reports µs per transaction for each writer.
func BenchmarkSQLWriterBesideGoWriter(b *testing.B) {
	for _, d := range sqlDialects {
		for _, perTx := range []int{1, 10} {
			b.Run(fmt.Sprintf("%s/events=%d", d, perTx), func(b *testing.B) {
				tg := newSQLTarget(b, d)
				ctx := context.Background()
				payload := []byte(strings.Repeat("x", 256))
				goTx := func() time.Duration {
					events := make([]outbox.Event, perTx)
					for i := range events {
						events[i] = outbox.Event{Topic: "orders.events", AggregateType: "order",
							AggregateID: fmt.Sprintf("o-%d", i), EventType: "OrderPlaced", Payload: payload}
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
				sqlTx := func() time.Duration {
					events := make([]sqlEvent, perTx)
					for i := range events {
						events[i] = newSQLEvent("", "order", fmt.Sprintf("o-%d", i), i)
						events[i].payload = payload
					}
					start := time.Now()
					tx, err := tg.db.BeginTx(ctx, nil)
					if err != nil {
						b.Fatal(err)
					}
					if d == outbox.Postgres {
						err = tg.insertSQL(ctx, tx, events...)
					} else {
						for _, e := range events {
							if err = tg.insertSQL(ctx, tx, e); err != nil {
								break
							}
						}
					}
					if err != nil {
						b.Fatal(err)
					}
					if err := tx.Commit(); err != nil {
						b.Fatal(err)
					}
					return time.Since(start)
				}
				var goTime, sqlTime time.Duration
				i := 0
				for b.Loop() {
					if i++; i%2 == 0 {
						goTime += goTx()
						sqlTime += sqlTx()
					} else {
						sqlTime += sqlTx()
						goTime += goTx()
					}
				}
				n := float64(b.N)
				b.ReportMetric(float64(goTime.Microseconds())/n, "µs/tx-go")
				b.ReportMetric(float64(sqlTime.Microseconds())/n, "µs/tx-sql")
			})
		}
	}
}
