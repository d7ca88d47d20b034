package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// Reidentified is what [Reidentify] did.
type Reidentified struct {
	// Previous is the identity the copy held (the original's); Installation its new one.
	Previous, Installation string
	// BoundTo is the database the new identity is bound to.
	BoundTo string
	// Units is how many rows of the units table (the original's exactly-once cleanup marks and
	// unit counts) were deleted.
	Units int64
	// Slots is how many rows of the cdc slot table (the original's replication slots, PostgreSQL)
	// were deleted. The slots themselves are not dropped: they are per cluster and, on the
	// original's cluster, the original's.
	Slots int64
	// Publication is the cdc publication of the previous identity that was dropped from this
	// database (PostgreSQL; publications are per database), "" when there was none.
	Publication string
	// Rows is how many rows the events table holds, copied from the original: its pending ones
	// are published by the copy's relays, under the new identity.
	Rows int64
}

// Reidentify gives the outbox of table, in a database that is a copy of another installation's
// (see [RestoredCopyError]), an identity of its own bound to this database, in one transaction:
// a new installation id, and nothing kept of the original's on shared infrastructure, so that
// none of it is applied to the copy. The units table's rows are deleted (the original's
// checkpoint marks and unit counts: the copy's units get new names under the new identity and
// start without a checkpoint); on PostgreSQL the cdc slot table's rows are deleted (the copy's
// relays create a slot of their own and drain the table) and the publication named after the
// previous identity is dropped. Never run it on the original: its relays would start new units
// without their last checkpoints, and publish the rows of those once more.
func Reidentify(ctx context.Context, db *sql.DB, table Table) (Reidentified, error) {
	var out Reidentified
	err := inTx(ctx, db, func(tx *sql.Tx) error {
		prev, err := lockInstallation(ctx, tx, table)
		if err != nil {
			return err
		}
		out.Previous, out.Installation = prev, uuid.NewString()
		if out.BoundTo, err = DatabaseBinding(ctx, tx, table.dialect); err != nil {
			return err
		}
		d := table.dialect
		if _, err := tx.ExecContext(ctx, d.Rebind("UPDATE "+table.Installation()+
			" SET installation_id = ?, bound_to = ?"), out.Installation, out.BoundTo); err != nil {
			return fmt.Errorf("set the new installation: %w", err)
		}
		if out.Units, err = deleteAll(ctx, tx, table.Units()); err != nil {
			return err
		}
		if d == Postgres {
			if out.Slots, err = deleteAll(ctx, tx, table.CDCSlots()); err != nil {
				return err
			}
			if out.Publication, err = dropPublication(ctx, tx, table, prev); err != nil {
				return err
			}
		}
		if err := tx.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+table.Events()).Scan(&out.Rows); err != nil {
			return fmt.Errorf("count the rows of %s: %w", table.Events(), err)
		}
		return nil
	})
	if err != nil {
		return Reidentified{}, fmt.Errorf("outbox: re-identify the installation of %s: %w", table, err)
	}
	return out, nil
}

// Rebound is what [Rebind] did.
type Rebound struct {
	// Installation is the identity, kept.
	Installation string
	// Previous is the database it was bound to ("" when unbound); BoundTo the one it is now.
	Previous, BoundTo string
}

// Rebind binds the installation of table to the database db is connected to, keeping its
// identity: for the same installation moved (pg_upgrade, a restore from a dump after the original
// database was lost, a move to another server), where no other database holding this identity
// runs relays any more. Its relays go on with the original's units and checkpoints.
func Rebind(ctx context.Context, db *sql.DB, table Table) (Rebound, error) {
	var out Rebound
	err := inTx(ctx, db, func(tx *sql.Tx) error {
		id, err := lockInstallation(ctx, tx, table)
		if err != nil {
			return err
		}
		var prev sql.NullString
		if err := tx.QueryRowContext(ctx, "SELECT bound_to FROM "+table.Installation()).Scan(&prev); err != nil {
			return fmt.Errorf("read the binding: %w", err)
		}
		out.Installation, out.Previous = id, prev.String
		if out.BoundTo, err = DatabaseBinding(ctx, tx, table.dialect); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, table.dialect.Rebind("UPDATE "+table.Installation()+" SET bound_to = ?"), out.BoundTo)
		if err != nil {
			return fmt.Errorf("set the binding: %w", err)
		}
		return nil
	})
	if err != nil {
		return Rebound{}, fmt.Errorf("outbox: rebind the installation of %s: %w", table, err)
	}
	return out, nil
}

// lockInstallation reads the installation id, locking its row until the transaction ends.
func lockInstallation(ctx context.Context, tx *sql.Tx, table Table) (string, error) {
	query := "SELECT installation_id FROM " + table.Installation()
	if table.dialect != SQLite {
		query += " FOR UPDATE"
	}
	var id string
	err := tx.QueryRowContext(ctx, query).Scan(&id)
	switch {
	case errors.Is(err, sql.ErrNoRows) || err != nil && missingTable(err):
		return "", fmt.Errorf("%w: run outboxkit migrate first", ErrNoInstallation)
	case err != nil:
		return "", fmt.Errorf("read the installation: %w", err)
	}
	return id, nil
}

// deleteAll deletes every row of table and returns how many there were.
func deleteAll(ctx context.Context, tx *sql.Tx, table string) (int64, error) {
	res, err := tx.ExecContext(ctx, "DELETE FROM "+table)
	if err != nil {
		return 0, fmt.Errorf("delete the rows of %s: %w", table, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("delete the rows of %s: %w", table, err)
	}
	return n, nil
}

// dropPublication drops the cdc publication of installation from the current database, if it
// is there, and returns its name ("" when there was none).
func dropPublication(ctx context.Context, tx *sql.Tx, table Table, installation string) (string, error) {
	name, err := table.Publication(installation)
	if err != nil {
		return "", err
	}
	var exists bool
	if err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_publication WHERE pubname = $1)", name).Scan(&exists); err != nil {
		return "", fmt.Errorf("look for publication %s: %w", name, err)
	}
	if !exists {
		return "", nil
	}
	if _, err := tx.ExecContext(ctx, "DROP PUBLICATION "+name); err != nil { // a validated identifier
		return "", fmt.Errorf("drop publication %s: %w", name, err)
	}
	return name, nil
}

// inTx runs f in a transaction of db and commits it.
func inTx(ctx context.Context, db *sql.DB, f func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := f(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}
