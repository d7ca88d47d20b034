package forwarder

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/outboxkit/outboxkit/outbox"
)

// Names on the cdc path. The kit writes every table name into its SQL unquoted (outbox.Table
// validates them as plain identifiers, optionally schema.table), so PostgreSQL folds them to
// lower case and looks an unqualified name up on the connection's search_path: a table
// configured as OrdersOutbox is the relation ordersoutbox, App.Outbox is app.outbox. pgoutput's
// relation messages carry the relation's OID and its names as stored (folded), so the stream is
// matched to the outbox by OID, resolved at the start of every session through the same
// connection pool the relay's SQL runs on: exactly the relation its queries, and the migration,
// name. (The configured spelling compared with the streamed names would miss every event of a
// mixed-case table, and the slot would confirm past them.)

// cdcTarget is the outbox table as PostgreSQL resolved it.
type cdcTarget struct {
	oid          uint32
	schema, name string
}

// String is the schema-qualified name of the relation, as stored.
func (t cdcTarget) String() string { return t.schema + "." + t.name }

// resolveTable resolves the configured table name the way the relay's SQL does (to_regclass
// parses it as an SQL name: unquoted parts folded, an unqualified name on the search_path).
func resolveTable(ctx context.Context, db *sql.DB, table outbox.Table) (cdcTarget, error) {
	var t cdcTarget
	var oid int64
	err := db.QueryRowContext(ctx, "SELECT c.oid::bigint, n.nspname, c.relname FROM pg_class c"+
		" JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass($1)", table.Events()).
		Scan(&oid, &t.schema, &t.name)
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("cdc: table %s does not exist (is it migrated, and on the search_path?)", table.Events())
	}
	if err != nil {
		return t, fmt.Errorf("cdc: resolve table %s: %w", table.Events(), err)
	}
	t.oid = uint32(oid)
	return t, nil
}

// foldedName is an unquoted identifier as PostgreSQL stores it: in lower case (the names the
// kit derives are validated ASCII identifiers, which PostgreSQL folds exactly so).
func foldedName(name string) string { return strings.ToLower(name) }

// publicationCoverage is what pg_publication says about the table's publication.
type publicationCoverage struct {
	exists, inserts, covers, filtered bool
}

// readPublication reads whether the publication exists, publishes inserts, covers the table
// (listed, or FOR ALL TABLES) and filters its rows (a WHERE clause: rows it filters out are
// never streamed).
func readPublication(ctx context.Context, db *sql.DB, pub string, target cdcTarget) (publicationCoverage, error) {
	var c publicationCoverage
	err := db.QueryRowContext(ctx, "SELECT true, p.pubinsert, p.puballtables OR r.prrelid IS NOT NULL,"+
		// A row filter is pg_publication_rel.prqual, from PostgreSQL 15 on (the key is absent before).
		" to_jsonb(r) ->> 'prqual' IS NOT NULL"+
		" FROM pg_publication p LEFT JOIN pg_publication_rel r ON r.prpubid = p.oid AND r.prrelid = $2::bigint::oid"+
		" WHERE p.pubname = $1", pub, int64(target.oid)).Scan(&c.exists, &c.inserts, &c.covers, &c.filtered)
	if errors.Is(err, sql.ErrNoRows) {
		return publicationCoverage{}, nil
	}
	if err != nil {
		return c, fmt.Errorf("cdc: read publication %s: %w", pub, err)
	}
	return c, nil
}
