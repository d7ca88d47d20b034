package testsupport

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/outbox"
)

// NewOutbox creates a writer for cfg (cfg.Table is the outbox's name, usually a UniqueName),
// migrates its tables on db and drops every one of them (outbox.Table.Tables) and their
// functions (outbox.Table.Functions) when the test ends. The migration fails the test.
func NewOutbox(t testing.TB, db *sql.DB, cfg outbox.Config) *outbox.Writer {
	t.Helper()
	w, err := outbox.NewWriter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(context.Background(), db, w.Table()); err != nil {
		t.Fatalf("migrate %s: %v", cfg.Table, err)
	}
	t.Cleanup(func() {
		for _, n := range w.Table().Tables() {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + n)
		}
		if fns := w.Table().Functions(); len(fns) > 0 {
			_, _ = db.Exec("DROP FUNCTION IF EXISTS " + strings.Join(fns, ", "))
		}
	})
	return w
}

// TxWriter writes events in the caller's transaction: *outbox.Writer, or a test's plain-SQL
// writer.
type TxWriter interface {
	WriteTx(ctx context.Context, tx *sql.Tx, events ...outbox.Event) error
}

// WriteEvents commits events through w in one transaction of db, rolled back when w fails.
func WriteEvents(ctx context.Context, db *sql.DB, w TxWriter, events ...outbox.Event) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	if err := w.WriteTx(ctx, tx, events...); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
