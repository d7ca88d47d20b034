package outbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	"github.com/outboxkit/outboxkit/outbox"
)

// A copy of an installation's database that runs next to the original gets an identity of its
// own, and none of the original's exactly-once unit marks. (On PostgreSQL and MySQL,
// ReadInstallation refuses such a copy with a *RestoredCopyError until this is done; a SQLite
// file is bound to nothing, so a copied file is re-identified by hand, as here.)
func ExampleReidentify() {
	dir, _ := os.MkdirTemp("", "outbox-example")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "staging.db")+"?_pragma=busy_timeout(5000)")
	defer db.Close()
	ctx := context.Background()
	table, _ := outbox.NewTable(outbox.SQLite, "outbox_events")
	if err := outbox.Migrate(ctx, db, table); err != nil {
		fmt.Println(err)
		return
	}
	// What the original's exactly-once relays recorded, copied with the file.
	_, _ = db.Exec("INSERT INTO outbox_events_units (unit, cleaned, cleaned_at) VALUES ('outboxkit/original/u00', 'abc', '')")
	original, _ := outbox.ReadInstallation(ctx, db, table)

	got, err := outbox.Reidentify(ctx, db, table)
	if err != nil {
		fmt.Println(err)
		return
	}
	now, _ := outbox.ReadInstallation(ctx, db, table)
	fmt.Println("previous is the original's:", got.Previous == original)
	fmt.Println("new identity read back:", now == got.Installation && now != original)
	fmt.Println("unit rows dropped:", got.Units)
	// Output:
	// previous is the original's: true
	// new identity read back: true
	// unit rows dropped: 1
}
