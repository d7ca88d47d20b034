package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/delay"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/outbox"
)

// The write side of scheduled events (docs/scheduled.md) on the three databases: the row a
// scheduled event becomes, the delay of Watermill's components/delay, a plain-SQL writer's
// deliver_at, and Cancel and Reschedule in the business transaction.

// scheduledRow is what the table holds of one event: its status and delivery time.
type scheduledRow struct {
	found     bool
	status    int
	deliverAt time.Time
}

func readScheduled(t *testing.T, tg target, id uuid.UUID) scheduledRow {
	t.Helper()
	idCol := "event_id"
	if tg.dialect == outbox.Postgres {
		idCol = "event_id::text"
	}
	at, get := outbox.TimeScanner()
	var r scheduledRow
	err := tg.db.QueryRow("SELECT status, deliver_at FROM "+tg.writer.Table().Events()+" WHERE "+idCol+" = "+tg.ph(1), id.String()).Scan(&r.status, at)
	if errors.Is(err, sql.ErrNoRows) {
		return r
	}
	if err != nil {
		t.Fatal(err)
	}
	r.found = true
	if r.deliverAt, err = get(); err != nil {
		t.Fatal(err)
	}
	return r
}

func writeEvents(t *testing.T, tg target, events ...outbox.Event) []outbox.Event {
	t.Helper()
	tx, err := tg.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := tg.writer.WriteTx(context.Background(), tx, events...); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return events
}

func scheduledEvent(key string, at time.Time) outbox.Event {
	return outbox.Event{Topic: "orders", AggregateType: "order", AggregateID: key, EventType: "Reminder", Payload: []byte("{}"), DeliverAt: at}
}

func TestScheduledEventRow(t *testing.T) {
	for _, d := range allDialects {
		t.Run(string(d), func(t *testing.T) {
			tg := newTarget(t, d)
			at := time.Now().Add(time.Hour).Truncate(time.Microsecond).UTC()
			events := writeEvents(t, tg, scheduledEvent("o-1", at), scheduledEvent("o-2", time.Time{}))
			if got := readScheduled(t, tg, events[0].ID); got.status != 4 || !got.deliverAt.Equal(at) {
				t.Errorf("scheduled event's row: status %d deliver_at %s, want 4 and %s", got.status, got.deliverAt, at)
			}
			if got := readScheduled(t, tg, events[1].ID); got.status != 0 || !got.deliverAt.IsZero() {
				t.Errorf("ordinary event's row: status %d deliver_at %s, want 0 and NULL", got.status, got.deliverAt)
			}
		})
	}
}

// A message delayed with Watermill's components/delay, published through the Writer's
// publisher, becomes a scheduled event; the delay metadata is not stored as headers.
func TestScheduledWatermillDelay(t *testing.T) {
	for _, d := range allDialects {
		t.Run(string(d), func(t *testing.T) {
			tg := newTarget(t, d)
			tx, err := tg.db.Begin()
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			pub, err := tg.writer.Publisher(wsql.TxFromStdSQL(tx))
			if err != nil {
				t.Fatal(err)
			}
			msg := message.NewMessage(uuid.NewString(), []byte("{}"))
			msg.Metadata.Set(outbox.MetadataAggregateID, "o-1")
			msg.Metadata.Set(outbox.MetadataEventType, "Reminder")
			before := time.Now().Truncate(time.Second)
			delay.Message(msg, delay.For(2*time.Hour))
			if err := pub.Publish("orders", msg); err != nil {
				t.Fatal(err)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			got := readScheduled(t, tg, uuid.MustParse(msg.UUID))
			if got.status != 4 || got.deliverAt.Before(before.Add(2*time.Hour)) || got.deliverAt.After(time.Now().Add(2*time.Hour)) {
				t.Errorf("delayed message's row: status %d deliver_at %s, want 4 and two hours after %s", got.status, got.deliverAt, before)
			}
			var headers string
			if err := tg.db.QueryRow("SELECT headers FROM " + tg.writer.Table().Events()).Scan(&headers); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(headers, "delayed") {
				t.Errorf("headers %s carry the delay metadata", headers)
			}
		})
	}
}

// A plain-SQL writer schedules an event by setting deliver_at alone.
func TestScheduledPlainSQL(t *testing.T) {
	for _, d := range allDialects {
		t.Run(string(d), func(t *testing.T) {
			tg := newTarget(t, d)
			id := uuid.New()
			at := time.Now().Add(time.Hour).Truncate(time.Microsecond).UTC()
			q := "INSERT INTO " + tg.writer.Table().Events() + " (event_id, topic, aggregate_type, aggregate_id, event_type, payload, headers, key_hash, partition_no, created_at, deliver_at) VALUES (" +
				tg.ph(1) + ", 'orders', 'order', 'o-1', 'Reminder', " + tg.ph(2) + ", '{}', " + tg.ph(3) + ", " + tg.ph(4) + ", " + tg.ph(5) + ", " + tg.ph(6) + ")"
			var args []any
			if d == outbox.SQLite {
				// SQLite has no any-writer trigger: its plain-SQL writers compute the key hash.
				h := outbox.KeyHash("", "order", "o-1")
				args = []any{id.String(), []byte("{}"), h, outbox.PartitionOf(h), d.TimeArg(time.Now()), d.TimeArg(at)}
			} else {
				q = strings.Replace(strings.Replace(q, "key_hash, partition_no, created_at, ", "", 1), tg.ph(3)+", "+tg.ph(4)+", "+tg.ph(5)+", ", "", 1)
				q = strings.Replace(q, tg.ph(6), tg.ph(3), 1)
				args = []any{id.String(), []byte("{}"), d.TimeArg(at)}
			}
			if _, err := tg.db.Exec(q, args...); err != nil {
				t.Fatal(err)
			}
			if got := readScheduled(t, tg, id); got.status != 4 || !got.deliverAt.Equal(at) {
				t.Errorf("plain-SQL scheduled row: status %d deliver_at %s, want 4 and %s", got.status, got.deliverAt, at)
			}
		})
	}
}

func TestScheduledValidation(t *testing.T) {
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.SQLite})
	if err != nil {
		t.Fatal(err)
	}
	bad := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	err = w.Write(context.Background(), nil, scheduledEvent("o-1", bad))
	if !errors.Is(err, outbox.ErrInvalidEvent) || !strings.Contains(err.Error(), "deliver at 10000-01-01") {
		t.Errorf("DeliverAt in year 10000: %v, want an invalid event naming the time", err)
	}
	if _, err := w.Reschedule(context.Background(), nil, bad, uuid.New()); err == nil || !strings.Contains(err.Error(), "10000-01-01") {
		t.Errorf("Reschedule to year 10000: %v, want an error naming the time", err)
	}
	walWriter, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Mode: outbox.ModeWAL, WALSlot: "orders_wal"})
	if err != nil {
		t.Fatal(err)
	}
	if err := walWriter.Write(context.Background(), nil, scheduledEvent("o-1", bad)); !errors.Is(err, outbox.ErrInvalidEvent) || !strings.Contains(err.Error(), "deliver at 10000-01-01") {
		t.Errorf("DeliverAt in year 10000 in ModeWAL: %v, want an invalid event naming the time", err)
	}
}

// Cancel in a committed transaction removes the scheduled event and reports the others; in a
// rolled-back one it leaves the event scheduled. Reschedule moves only scheduled events.
func TestScheduledCancelAndReschedule(t *testing.T) {
	for _, d := range allDialects {
		t.Run(string(d), func(t *testing.T) {
			tg := newTarget(t, d)
			ctx := context.Background()
			at := time.Now().Add(time.Hour).Truncate(time.Microsecond).UTC()
			events := writeEvents(t, tg, scheduledEvent("o-1", at), scheduledEvent("o-2", at), scheduledEvent("o-3", time.Time{}))
			kept, cancelled, ordinary, unknown := events[0].ID, events[1].ID, events[2].ID, uuid.New()

			res := inTx(t, tg, false, func(tx wsql.ContextExecutor) (outbox.ScheduleResult, error) {
				return tg.writer.Cancel(ctx, tx, kept)
			})
			if !slices.Equal(res.Changed, []uuid.UUID{kept}) {
				t.Errorf("cancel in a rolled-back transaction reported %+v, want %s cancelled", res, kept)
			}
			if got := readScheduled(t, tg, kept); got.status != 4 {
				t.Errorf("after a rolled-back cancel the row is %+v, want still scheduled", got)
			}

			res = inTx(t, tg, true, func(tx wsql.ContextExecutor) (outbox.ScheduleResult, error) {
				return tg.writer.Cancel(ctx, tx, cancelled, ordinary, unknown, cancelled)
			})
			want := outbox.ScheduleResult{Changed: []uuid.UUID{cancelled}, Released: []uuid.UUID{ordinary}, NotFound: []uuid.UUID{unknown}}
			if !equalResults(res, want) {
				t.Errorf("cancel: %+v, want %+v", res, want)
			}
			if got := readScheduled(t, tg, cancelled); got.found {
				t.Errorf("a committed cancel left the row %+v", got)
			}

			later := at.Add(24 * time.Hour)
			res = inTx(t, tg, true, func(tx wsql.ContextExecutor) (outbox.ScheduleResult, error) {
				return tg.writer.Reschedule(ctx, tx, later, kept, cancelled)
			})
			want = outbox.ScheduleResult{Changed: []uuid.UUID{kept}, NotFound: []uuid.UUID{cancelled}}
			if !equalResults(res, want) {
				t.Errorf("reschedule: %+v, want %+v", res, want)
			}
			if got := readScheduled(t, tg, kept); got.status != 4 || !got.deliverAt.Equal(later) {
				t.Errorf("rescheduled row: %+v, want status 4 at %s", got, later)
			}
		})
	}
}

func inTx(t *testing.T, tg target, commit bool, fn func(tx wsql.ContextExecutor) (outbox.ScheduleResult, error)) outbox.ScheduleResult {
	t.Helper()
	tx, err := tg.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	res, err := fn(wsql.TxFromStdSQL(tx))
	if err != nil {
		t.Fatal(err)
	}
	if commit {
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	return res
}

func equalResults(a, b outbox.ScheduleResult) bool {
	return slices.Equal(a.Changed, b.Changed) && slices.Equal(a.Released, b.Released) && slices.Equal(a.NotFound, b.NotFound)
}

// A cancel in a business transaction that read the table before the relay's release committed
// reports the released event Released, not NotFound: on MySQL/MariaDB (REPEATABLE READ) a plain
// SELECT in that transaction reads its snapshot, taken before the release, where the row is still
// scheduled and so matches neither the cancel nor the released lookup. PostgreSQL (READ
// COMMITTED by default) and SQLite (one writer at a time) are run too, as the same contract.
func TestCancelAfterAnEarlierReadSeesTheRelease(t *testing.T) {
	for _, d := range allDialects {
		t.Run(string(d), func(t *testing.T) {
			tg := newTarget(t, d)
			ctx := context.Background()
			id := writeEvents(t, tg, scheduledEvent("o-1", time.Now().Add(time.Hour)))[0].ID
			tx, err := tg.db.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			// The business transaction reads first: on MySQL this takes its snapshot.
			var n int
			if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+tg.writer.Table().Events()).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if d == outbox.SQLite {
				// SQLite has one writer at a time: the release cannot commit while tx is open.
				if err := tx.Rollback(); err != nil {
					t.Fatal(err)
				}
			}
			// The relay's release, committed by another connection.
			if _, err := tg.db.ExecContext(ctx, "UPDATE "+tg.writer.Table().Events()+" SET status = 0 WHERE status = 4"); err != nil {
				t.Fatal(err)
			}
			if d == outbox.SQLite {
				if tx, err = tg.db.BeginTx(ctx, nil); err != nil {
					t.Fatal(err)
				}
			}
			res, err := tg.writer.Cancel(ctx, wsql.TxFromStdSQL(tx), id)
			if err != nil {
				t.Fatal(err)
			}
			if want := (outbox.ScheduleResult{Released: []uuid.UUID{id}}); !equalResults(res, want) {
				t.Fatalf("cancel of an event released after the transaction's first read: %+v, want %+v", res, want)
			}
			if err := tx.Commit(); err != nil {
				t.Fatal(err)
			}
			if got := readScheduled(t, tg, id); !got.found || got.status != 0 {
				t.Fatalf("after the cancel the row is %+v, want it pending", got)
			}
		})
	}
}
