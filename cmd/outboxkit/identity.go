package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"

	"github.com/outboxkit/outboxkit/outbox"
)

// The installation identity's two ways out of a restored copy (outbox.RestoredCopyError), run by
// outboxkit migrate after the migrations.

// identityAction is what migrate does to the installation after migrating: nothing, re-identify
// the database (a copy running next to the original) or rebind it (the same installation moved).
type identityAction struct {
	reidentify, rebind bool
}

// run applies the action to table in db and reports what it did on w.
func (a identityAction) run(ctx context.Context, w io.Writer, db *sql.DB, table outbox.Table) error {
	switch {
	case a.reidentify:
		got, err := outbox.Reidentify(ctx, db, table)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "installation of %s re-identified: %s (was %s), bound to %s\n",
			table, got.Installation, got.Previous, bindingName(got.BoundTo))
		fmt.Fprintf(w, "dropped what the old identity named in this database: %d exactly-once unit rows", got.Units)
		if table.Dialect() == outbox.Postgres {
			pub := got.Publication
			if pub == "" {
				pub = "none"
			}
			fmt.Fprintf(w, ", %d cdc slot rows, cdc publication: %s", got.Slots, pub)
		}
		fmt.Fprintln(w)
		fmt.Fprintf(w, "%d rows of the events table were copied from the original; its pending ones are published by this "+
			"installation's relays (delete them first if the original publishes them)\n", got.Rows)
	case a.rebind:
		got, err := outbox.Rebind(ctx, db, table)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "installation %s of %s rebound to %s (was bound to %s); its identity, units and checkpoints are kept\n",
			got.Installation, table, bindingName(got.BoundTo), bindingName(got.Previous))
	}
	return nil
}

// bindingName shows a binding, "nothing" for SQLite's (or an unbound installation's) empty one.
func bindingName(binding string) string {
	if binding == "" {
		return "nothing"
	}
	return binding
}
