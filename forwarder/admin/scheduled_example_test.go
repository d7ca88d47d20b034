package admin_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/outbox"
)

// An operator sees how many events are scheduled and when the next is due, lists them, and
// cancels one; an id that is not a scheduled event is reported NotFound.
func ExampleAdmin_CancelScheduled() {
	dir, _ := os.MkdirTemp("", "admin-example")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)")
	defer db.Close()
	ctx := context.Background()
	writer, _ := outbox.NewWriter(outbox.Config{Dialect: outbox.SQLite})
	_ = outbox.Migrate(ctx, db, writer.Table())
	reminder, _ := outbox.NewJSONEvent("orders", "order", "o-1", "PaymentReminder", map[string]string{"order": "o-1"})
	reminder.DeliverAt = time.Date(2030, 1, 2, 9, 0, 0, 0, time.UTC)
	deadline, _ := outbox.NewJSONEvent("orders", "order", "o-1", "PaymentDeadline", map[string]string{"order": "o-1"})
	deadline.DeliverAt = time.Date(2030, 1, 3, 9, 0, 0, 0, time.UTC)
	events := []outbox.Event{reminder, deadline}
	tx, _ := db.BeginTx(ctx, nil)
	_ = writer.WriteTx(ctx, tx, events...)
	_ = tx.Commit()

	adm, _ := admin.New(db, outbox.SQLite, "")
	sum, _ := adm.ScheduledSummary(ctx)
	fmt.Printf("%d scheduled, next due %s\n", sum.Count, sum.NextDue.UTC().Format(time.RFC3339))
	list, _ := adm.ScheduledEvents(ctx, 10)
	for _, e := range list {
		fmt.Printf("%s %s at %s\n", e.AggregateID, e.EventType, e.DeliverAt.UTC().Format(time.RFC3339))
	}
	unknown := uuid.MustParse("0190a5c4-7c1e-7d3a-9a53-3c8e2d3f1b2a")
	res, _ := adm.CancelScheduled(ctx, events[0].ID, unknown)
	fmt.Printf("cancelled %d, released %d, not found %d\n", len(res.Changed), len(res.Released), len(res.NotFound))
	sum, _ = adm.ScheduledSummary(ctx)
	fmt.Printf("%d scheduled, next due %s\n", sum.Count, sum.NextDue.UTC().Format(time.RFC3339))
	// Output:
	// 2 scheduled, next due 2030-01-02T09:00:00Z
	// o-1 PaymentReminder at 2030-01-02T09:00:00Z
	// o-1 PaymentDeadline at 2030-01-03T09:00:00Z
	// cancelled 1, released 0, not found 1
	// 1 scheduled, next due 2030-01-03T09:00:00Z
}
