package admin_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/outbox"
)

// An operator lists the blocked keys, looks at what a skip would touch (a dry run), and skips
// the head of one key so that its later events flow; the skipped event stays in the table,
// listed with the dead letters, until it is replayed or discarded.
func ExampleAdmin_SkipKeys() {
	dir, _ := os.MkdirTemp("", "admin-example")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)")
	defer db.Close()
	ctx := context.Background()
	writer, _ := outbox.NewWriter(outbox.Config{Dialect: outbox.SQLite})
	_ = outbox.Migrate(ctx, db, writer.Table())
	first, _ := outbox.NewJSONEvent("orders", "order", "o-1", "OrderPlaced", map[string]int{"total": 42})
	second, _ := outbox.NewJSONEvent("orders", "order", "o-1", "OrderPaid", map[string]int{"total": 42})
	tx, _ := db.BeginTx(ctx, nil)
	_ = writer.WriteTx(ctx, tx, first, second)
	_ = tx.Commit()
	// What a relay records after the broker refused the first event for good.
	_, _ = db.Exec("UPDATE outbox_events SET status = 2, attempts = 1, last_error = 'kafka: message 17 is too large (2000123 bytes)'" +
		" WHERE event_type = 'OrderPlaced'")

	adm, _ := admin.New(db, outbox.SQLite, "")
	keys, _ := adm.BlockedKeys(ctx, admin.KeyFilter{})
	for _, k := range keys {
		fmt.Printf("%s: %s head %s, %d waiting, group %s\n", k.Key, k.State, k.Head.EventType, k.Waiting,
			admin.NormaliseError(k.Head.LastError))
	}
	plan, _ := adm.SkipKeys(ctx, admin.KeyFilter{Key: &keys[0].Key}, true)
	fmt.Printf("dry run: would skip %d event (%s), changed %d\n", len(plan.Events), plan.Events[0].State, plan.Applied)
	done, _ := adm.SkipKeys(ctx, admin.KeyFilter{Key: &keys[0].Key}, false)
	fmt.Printf("skipped %d\n", done.Applied)
	keys, _ = adm.BlockedKeys(ctx, admin.KeyFilter{})
	letters, _ := adm.FindDeadLetters(ctx, admin.EventFilter{})
	fmt.Printf("blocked keys now: %d; dead letters: %d (%s)\n", len(keys), len(letters), letters[0].State)
	// Output:
	// order/o-1: dead head OrderPlaced, 1 waiting, group kafka: message <n> is too large (<n> bytes)
	// dry run: would skip 1 event (dead), changed 0
	// skipped 1
	// blocked keys now: 0; dead letters: 1 (skipped)
}
