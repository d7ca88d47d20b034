package admin_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/outbox"
)

// An Admin scoped to one tenant lists and acts on that tenant's dead letters only; confirming a
// dry run with its event ids touches the listed events only, not one that died since.
func ExampleAdmin_ForTenants() {
	dir, _ := os.MkdirTemp("", "admin-tenants-example")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)")
	defer db.Close()
	ctx := context.Background()
	writer, _ := outbox.NewWriter(outbox.Config{Dialect: outbox.SQLite})
	_ = outbox.Migrate(ctx, db, writer.Table())
	write := func(tenant, id string) {
		e, _ := outbox.NewJSONEvent("orders", "order", id, "OrderPlaced", map[string]int{"total": 42})
		e.TenantID = tenant
		tx, _ := db.BeginTx(ctx, nil)
		if err := writer.WriteTx(ctx, tx, e); err != nil {
			fmt.Println(err)
		}
		_ = tx.Commit()
		// What a relay records after the broker refused the event for good.
		if _, err := db.Exec("UPDATE outbox_events SET status = 2, attempts = 1, last_error = 'too large' WHERE aggregate_id = ?", id); err != nil {
			fmt.Println(err)
		}
	}
	write("acme", "o-1")
	write("globex", "o-2")

	all, _ := admin.New(db, outbox.SQLite, "")
	acme := all.ForTenants("acme")
	letters, _ := acme.FindDeadLetters(ctx, admin.EventFilter{})
	fmt.Printf("acme sees %d dead letter (%s)\n", len(letters), letters[0].TenantID)
	plan, _ := acme.DiscardDeadLetters(ctx, admin.EventFilter{}, true)
	write("acme", "o-3") // dies after the dry run
	var ids []uuid.UUID
	for _, e := range plan.Events {
		ids = append(ids, e.EventID)
	}
	done, _ := acme.DiscardDeadLetters(ctx, admin.EventFilter{EventIDs: ids}, false)
	fmt.Printf("discarded %d of the %d listed\n", done.Applied, len(ids))
	left, _ := all.FindDeadLetters(ctx, admin.EventFilter{})
	for _, l := range left {
		fmt.Printf("left: %s %s\n", l.TenantID, l.AggregateID)
	}
	// Output:
	// acme sees 1 dead letter (acme)
	// discarded 1 of the 1 listed
	// left: globex o-2
	// left: acme o-3
}
