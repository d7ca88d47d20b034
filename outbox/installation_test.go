package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// restoredCopy is an outbox migrated in the test database and a copy of it restored from a dump
// into a second database (PostgreSQL: pg_dump | psql) or schema (MariaDB: mysqldump | mysql).
type restoredCopy struct {
	table          outbox.Table
	original, copy *sql.DB
}

// newRestoredCopy migrates an outbox on dialect and restores a dump of it as a second database.
func newRestoredCopy(t *testing.T, dialect outbox.Dialect) restoredCopy {
	t.Helper()
	return newRestoredCopyWith(t, dialect, func(*sql.DB, outbox.Table) {})
}

// newRestoredCopyWith is newRestoredCopy calling prepare on the original before the dump.
func newRestoredCopyWith(t *testing.T, dialect outbox.Dialect, prepare func(*sql.DB, outbox.Table)) restoredCopy {
	t.Helper()
	ctx := context.Background()
	switch dialect {
	case outbox.Postgres:
		admin := testsupport.OpenPostgres(t)
		schema := testsupport.UniqueName("inst")
		if _, err := admin.Exec("CREATE SCHEMA " + schema); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = admin.Exec("DROP SCHEMA " + schema + " CASCADE") })
		table, err := outbox.NewTable(outbox.Postgres, schema+".outbox_events")
		if err != nil {
			t.Fatal(err)
		}
		if err := outbox.Migrate(ctx, admin, table); err != nil {
			t.Fatal(err)
		}
		prepare(admin, table)
		return restoredCopy{table: table, original: admin,
			copy: testsupport.OpenDSN(t, "pgx", testsupport.RestorePostgresCopy(t, schema))}
	default:
		admin := testsupport.OpenMySQL(t)
		table, err := outbox.NewTable(outbox.MySQL, testsupport.UniqueName("inst"))
		if err != nil {
			t.Fatal(err)
		}
		dropWithTest(t, admin, table.Tables()...)
		if err := outbox.Migrate(ctx, admin, table); err != nil {
			t.Fatal(err)
		}
		prepare(admin, table)
		var tables []string
		for _, n := range table.Tables() {
			var found string
			if admin.QueryRow("SHOW TABLES LIKE '"+n+"'").Scan(&found) == nil {
				tables = append(tables, n)
			}
		}
		return restoredCopy{table: table, original: admin,
			copy: testsupport.OpenDSN(t, "mysql", testsupport.RestoreMySQLCopy(t, tables...))}
	}
}

// TestRestoredCopyIsRefused: a database restored from a dump of another installation's holds the
// same installation row. Reading its identity must refuse it with an error that names both
// bindings and the two ways out, while the original's identity reads as before.
func TestRestoredCopyIsRefused(t *testing.T) {
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			ctx := context.Background()
			rc := newRestoredCopy(t, d)
			id, err := outbox.ReadInstallation(ctx, rc.original, rc.table)
			if err != nil {
				t.Fatalf("the original's installation: %v", err)
			}
			copyID, err := outbox.ReadInstallation(ctx, rc.copy, rc.table)
			if err == nil {
				t.Fatalf("the restored copy's installation read as %s (the original's is %s) without an error: "+
					"its relays would share the original's exactly-once units and cdc slot", copyID, id)
			}
			for _, want := range []string{id, "--reidentify", "--rebind", "bound to"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the error does not name %q: %v", want, err)
				}
			}
			t.Logf("the copy is refused: %v", err)
			var restored *outbox.RestoredCopyError
			if !errors.As(err, &restored) || !errors.Is(err, outbox.ErrInstallationBinding) || restored.BoundTo == restored.Database {
				t.Errorf("the error is not a *RestoredCopyError wrapping ErrInstallationBinding with two bindings: %#v", err)
			}
		})
	}
}

// TestReidentifyARestoredCopy: re-identifying the copy gives it a new identity bound to it and
// drops what the original's identity named in it (the units table's marks; on PostgreSQL the
// cdc slot table's rows and the publication of the old identity), while the original keeps its
// identity and its marks.
func TestReidentifyARestoredCopy(t *testing.T) {
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			ctx := context.Background()
			rc := newRestoredCopyWith(t, d, func(db *sql.DB, table outbox.Table) {
				// What the original's relays leave in its tables, copied by the dump.
				mustExec(t, db, "INSERT INTO "+table.Units()+" (unit, cleaned, cleaned_at) VALUES ('outboxkit/x/u00', 'abc', CURRENT_TIMESTAMP)")
				if d == outbox.Postgres {
					mustExec(t, db, "INSERT INTO "+table.CDCSlots()+" (slot_name) VALUES ('obk_original')")
				}
			})
			id, err := outbox.ReadInstallation(ctx, rc.original, rc.table)
			if err != nil {
				t.Fatal(err)
			}
			var pub string
			if d == outbox.Postgres {
				if pub, err = rc.table.Publication(id); err != nil {
					t.Fatal(err)
				}
				mustExec(t, rc.copy, "CREATE PUBLICATION "+pub+" FOR TABLE "+rc.table.Events())
			}
			got, err := outbox.Reidentify(ctx, rc.copy, rc.table)
			if err != nil {
				t.Fatal(err)
			}
			if got.Previous != id || got.Installation == id || got.Units != 1 || got.BoundTo == "" {
				t.Errorf("Reidentify = %+v, want the previous identity %s, a new one, 1 unit row deleted, a binding", got, id)
			}
			if d == outbox.Postgres && (got.Slots != 1 || got.Publication != pub) {
				t.Errorf("Reidentify = %+v, want 1 cdc slot row deleted and publication %s dropped", got, pub)
			}
			now, err := outbox.ReadInstallation(ctx, rc.copy, rc.table)
			if err != nil || now != got.Installation {
				t.Fatalf("the copy's installation after Reidentify: %q, %v; want %s", now, err, got.Installation)
			}
			if n := count(t, rc.copy, "SELECT COUNT(*) FROM "+rc.table.Units()); n != 0 {
				t.Errorf("%d unit rows of the original left in the copy", n)
			}
			if again, err := outbox.ReadInstallation(ctx, rc.original, rc.table); err != nil || again != id {
				t.Errorf("the original's installation after the copy's Reidentify: %q, %v; want %s", again, err, id)
			}
			if n := count(t, rc.original, "SELECT COUNT(*) FROM "+rc.table.Units()); n != 1 {
				t.Errorf("the original has %d unit rows, want its 1", n)
			}
		})
	}
}

// TestRebindARestoredCopy: rebinding the copy (the same installation moved) keeps its identity
// and its unit marks, and binds it to the copy's database.
func TestRebindARestoredCopy(t *testing.T) {
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			ctx := context.Background()
			rc := newRestoredCopyWith(t, d, func(db *sql.DB, table outbox.Table) {
				mustExec(t, db, "INSERT INTO "+table.Units()+" (unit, cleaned, cleaned_at) VALUES ('outboxkit/x/u00', 'abc', CURRENT_TIMESTAMP)")
			})
			id, err := outbox.ReadInstallation(ctx, rc.original, rc.table)
			if err != nil {
				t.Fatal(err)
			}
			got, err := outbox.Rebind(ctx, rc.copy, rc.table)
			if err != nil {
				t.Fatal(err)
			}
			if got.Installation != id || got.Previous == got.BoundTo || got.BoundTo == "" {
				t.Errorf("Rebind = %+v, want installation %s bound from the original's database to the copy's", got, id)
			}
			if now, err := outbox.ReadInstallation(ctx, rc.copy, rc.table); err != nil || now != id {
				t.Errorf("the copy's installation after Rebind: %q, %v; want %s", now, err, id)
			}
			if n := count(t, rc.copy, "SELECT COUNT(*) FROM "+rc.table.Units()); n != 1 {
				t.Errorf("the rebound copy has %d unit rows, want the 1 it had", n)
			}
		})
	}
}

// TestMigrateBindsAnEarlierInstallation: the migration binds the installation as DatabaseBinding
// reads it; an installation left unbound (bound_to NULL) is refused, asking for outboxkit
// migrate, until Migrate binds it to its database.
func TestMigrateBindsAnEarlierInstallation(t *testing.T) {
	for _, d := range allDialects {
		t.Run(string(d), func(t *testing.T) {
			ctx := context.Background()
			tg := newTarget(t, d)
			// The migration's SQL binds as DatabaseBinding reads the binding.
			var bound string
			if err := tg.db.QueryRow("SELECT bound_to FROM " + tg.writer.Table().Installation()).Scan(&bound); err != nil {
				t.Fatal(err)
			}
			if want, err := outbox.DatabaseBinding(ctx, tg.db, d); err != nil || bound != want {
				t.Fatalf("the migration bound the installation to %q, DatabaseBinding reads %q (%v)", bound, want, err)
			}
			t.Logf("bound to %q", bound)
			mustExec(t, tg.db, "UPDATE "+tg.writer.Table().Installation()+" SET bound_to = NULL")
			if _, err := outbox.ReadInstallation(ctx, tg.db, tg.writer.Table()); !errors.Is(err, outbox.ErrInstallationBinding) ||
				!strings.Contains(err.Error(), "outboxkit migrate") {
				t.Fatalf("an unbound installation read with %v, want ErrInstallationBinding asking for outboxkit migrate", err)
			}
			if err := outbox.Migrate(ctx, tg.db, tg.writer.Table()); err != nil {
				t.Fatal(err)
			}
			if _, err := outbox.ReadInstallation(ctx, tg.db, tg.writer.Table()); err != nil {
				t.Fatalf("after Migrate: %v", err)
			}
		})
	}
}

func mustExec(t *testing.T, db *sql.DB, query string) {
	t.Helper()
	if _, err := db.Exec(query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func count(t *testing.T, db *sql.DB, query string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(query).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}
