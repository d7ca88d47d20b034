package cdc

import (
	"context"
	"fmt"

	"github.com/outboxkit/outboxkit/forwarder/internal/pgrepl"
)

// Names on the cdc path. The kit writes every table name into its SQL unquoted (outbox.Table
// validates them as plain identifiers, optionally schema.table), so PostgreSQL folds them to
// lower case and looks an unqualified name up on the connection's search_path: a table
// configured as OrdersOutbox is the relation ordersoutbox, App.Outbox is app.outbox. pgoutput's
// relation messages carry the relation's OID and its names as stored (folded), so the stream is
// matched to the outbox by OID, resolved at the start of every session (pgrepl.ResolveTable)
// through the same connection pool the relay's SQL runs on: exactly the relation its queries, and
// the migration, name. (The configured spelling compared with the streamed names would miss every event of a
// mixed-case table, and the slot would confirm past them.)

// ensurePublication makes sure the table's publication exists and streams the table's inserts,
// and returns its name as stored (folded: the name in SQL is unquoted). It creates a missing
// one (inserts only; creating it needs ownership of the table, or an operator creates it
// beforehand, docs/cdc.md), adds the table to one that does not cover it (a table dropped and
// migrated again leaves its old publication empty), and refuses one that does not publish
// inserts. A row filter is warned about: the rows it filters out are never streamed (the stall
// check reports them).
func (s *Source) ensurePublication(ctx context.Context, target pgrepl.Target) (string, error) {
	table := s.core.Store.Table
	pub := s.publication // lower case: the name in SQL is unquoted
	c, err := pgrepl.ReadPublication(ctx, s.core.DB, pub, target)
	if err != nil {
		return "", err
	}
	// Both names are validated identifiers (outbox.Table), resolved by PostgreSQL as target was.
	switch {
	case !c.Exists:
		err := pgrepl.CreatePublication(ctx, s.core.DB, pub, table.Events())
		if err != nil && pgrepl.Code(err) != pgrepl.DuplicateObject {
			return "", fmt.Errorf("cdc: create publication %s on %s: %w", pub, target, err)
		}
		return pub, nil
	case !c.Inserts:
		return "", fmt.Errorf("cdc: publication %s does not publish inserts: recreate it WITH (publish = 'insert')", pub)
	case !c.Covers:
		s.core.Log.Warn("cdc: the publication does not cover the table (dropped and recreated?); adding it", "publication", pub, "relation", target.String())
		if err := pgrepl.AddTable(ctx, s.core.DB, pub, table.Events()); err != nil {
			return "", fmt.Errorf("cdc: add table %s to publication %s: %w", target, pub, err)
		}
	case c.Filtered:
		s.core.Log.Warn("cdc: the publication has a row filter: the rows it filters out are not streamed and stay pending",
			"publication", pub, "relation", target.String())
	}
	return pub, nil
}
