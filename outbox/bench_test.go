package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

var benchOrder atomic.Int64

// BenchmarkOutboxOverhead measures what one outbox event adds to a typical single-row business
// transaction on PostgreSQL. Each iteration runs the same transaction twice, without and with
// the event, alternating so both see the same machine noise, and reports both times and the
// overhead in percent:
//   - database/sql: BEGIN; INSERT order; [outbox INSERT]; COMMIT;
//   - pgx-batch: BEGIN; one pgx batch with the INSERT order [and the queued outbox INSERT]; COMMIT.
func BenchmarkOutboxOverhead(b *testing.B) {
	tg := newTarget(b, outbox.Postgres)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testsupport.PostgresDSN(b))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	insert := "INSERT INTO " + tg.business + " (id, total) VALUES ($1, $2)"

	stdTx := func(withEvent bool) error {
		id := fmt.Sprintf("b-%d", benchOrder.Add(1))
		var events []outbox.Event
		if withEvent {
			events = append(events, orderEvent(id, 1))
		}
		return tg.placeOrder(ctx, id, true, events...)
	}
	pgxTx := func(withEvent bool) error {
		id := fmt.Sprintf("p-%d", benchOrder.Add(1))
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback(ctx) }()
		batch := &pgx.Batch{}
		batch.Queue(insert, id, 42)
		if withEvent {
			if err := tg.writer.QueuePgx(batch, orderEvent(id, 1)); err != nil {
				return err
			}
		}
		if err := tx.SendBatch(ctx, batch).Close(); err != nil {
			return err
		}
		return tx.Commit(ctx)
	}
	for _, bc := range []struct {
		name string
		run  func(bool) error
	}{{"database-sql", stdTx}, {"pgx-batch", pgxTx}, {"pgx-batch-no-key-locks", pgxTx}} {
		b.Run(bc.name, func(b *testing.B) {
			writer := tg.writer
			if strings.HasSuffix(bc.name, "no-key-locks") {
				w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: writer.Table().Events(), DisableKeyLocks: true})
				if err != nil {
					b.Fatal(err)
				}
				tg.writer = w
				defer func() { tg.writer = writer }()
			}
			var plain, withEvent time.Duration
			for b.Loop() {
				for _, event := range []bool{false, true} {
					start := time.Now()
					if err := bc.run(event); err != nil {
						b.Fatal(err)
					}
					if event {
						withEvent += time.Since(start)
					} else {
						plain += time.Since(start)
					}
				}
			}
			n := float64(b.N)
			b.ReportMetric(float64(plain.Microseconds())/n, "µs/tx-plain")
			b.ReportMetric(float64(withEvent.Microseconds())/n, "µs/tx-with-event")
			b.ReportMetric(100*(float64(withEvent)/float64(plain)-1), "%overhead")
		})
	}
}

// BenchmarkWriteEvents measures events per second for 1, 10 and 100 events per transaction on
// every dialect (256-byte payloads, no business row).
func BenchmarkWriteEvents(b *testing.B) {
	for _, d := range allDialects {
		b.Run(string(d), func(b *testing.B) {
			tg := newTarget(b, d)
			ctx := context.Background()
			payload := make([]byte, 256)
			for _, perTx := range []int{1, 10, 100} {
				b.Run(fmt.Sprintf("events=%d", perTx), func(b *testing.B) {
					events := make([]outbox.Event, perTx)
					for b.Loop() {
						for i := range events {
							events[i] = outbox.Event{Topic: "orders.events", AggregateType: "order",
								AggregateID: fmt.Sprintf("o-%d", i%50), EventType: "OrderPlaced", Payload: payload}
						}
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
					}
					b.ReportMetric(float64(b.N*perTx)/b.Elapsed().Seconds(), "events/s")
				})
			}
		})
	}
}

// BenchmarkQueuePgx measures the client side of one queued event (validation, the INSERT's text
// and arguments), without a database.
func BenchmarkQueuePgx(b *testing.B) {
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, DisableKeyLocks: true})
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 256)
	b.ReportAllocs()
	for b.Loop() {
		batch := &pgx.Batch{}
		ev := outbox.Event{ID: uuid.Must(uuid.NewV7()), Topic: "orders.events", AggregateType: "order",
			AggregateID: "order-42", EventType: "OrderPlaced", Payload: payload}
		if err := w.QueuePgx(batch, ev); err != nil {
			b.Fatal(err)
		}
	}
}

// nopExecutor accepts every statement without a database.
type nopExecutor struct{}

func (nopExecutor) ExecContext(context.Context, string, ...any) (wsql.Result, error) {
	return nopResult{}, nil
}
func (nopExecutor) QueryContext(context.Context, string, ...any) (wsql.Rows, error) {
	return nil, errors.New("nopExecutor: no rows")
}

type nopResult struct{}

func (nopResult) RowsAffected() (int64, error) { return 1, nil }

// BenchmarkWriteClient measures the client side of [outbox.Writer.Write] for one event (the
// watermill-sql publisher, the messages, the INSERT), without a database.
func BenchmarkWriteClient(b *testing.B) {
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, DisableKeyLocks: true})
	if err != nil {
		b.Fatal(err)
	}
	payload := make([]byte, 256)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		ev := outbox.Event{ID: uuid.Must(uuid.NewV7()), Topic: "orders.events", AggregateType: "order",
			AggregateID: "order-42", EventType: "OrderPlaced", Payload: payload}
		if err := w.Write(ctx, nopExecutor{}, ev); err != nil {
			b.Fatal(err)
		}
	}
}
