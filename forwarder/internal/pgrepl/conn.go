package pgrepl

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
)

// LSN is a position in the write-ahead log.
type LSN = pglogrepl.LSN

// Conn is a replication connection (Connect).
type Conn = pgconn.PgConn

// PostgreSQL error codes the cdc source tells apart.
const (
	ObjectInUse       = "55006" // the slot is active for another walsender
	DuplicateObject   = "42710" // the publication or slot exists already
	UndefinedObject   = "42704" // the slot does not exist
	PrerequisiteState = "55000" // the slot was invalidated
)

// Code is the PostgreSQL error code of err ("" when err is not a server error).
func Code(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

// ValidDSN reports whether dsn is a valid PostgreSQL connection string. Its error names no part
// of dsn (pgconn's message may quote it, password included).
func ValidDSN(dsn string) error {
	if _, err := pgconn.ParseConfig(dsn); err != nil {
		return errors.New("not a valid PostgreSQL connection string")
	}
	return nil
}

// Connect opens a logical replication connection (replication=database) to dsn.
func Connect(ctx context.Context, dsn string) (*Conn, error) {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return nil, errors.New("cdc: CDC.DSN is not a valid PostgreSQL connection string")
	}
	cfg.RuntimeParams["replication"] = "database"
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "outboxkit-cdc"
	}
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("cdc: open the replication connection to %s:%d: %w", cfg.Host, cfg.Port, err)
	}
	return conn, nil
}

// CreateSlot creates the logical slot (pgoutput) on the replication connection; it reports
// whether it created it (false: another relay did meanwhile).
func CreateSlot(ctx context.Context, conn *Conn, slot string) (bool, error) {
	_, err := pglogrepl.CreateReplicationSlot(ctx, conn, slot, "pgoutput",
		pglogrepl.CreateReplicationSlotOptions{Mode: pglogrepl.LogicalReplication, SnapshotAction: "NOEXPORT_SNAPSHOT"})
	switch {
	case err == nil:
		return true, nil
	case Code(err) == DuplicateObject:
		return false, nil
	}
	return false, fmt.Errorf("cdc: create replication slot %s: %w", slot, err)
}

// StartMessages starts streaming the slot from its confirmed position with the logical decoding
// messages on (pgoutput protocol 2, `messages 'true'`, PostgreSQL 14+): the wal source's stream.
// pgoutput needs a publication, which filters only rows: an empty one will do. A slot another
// walsender streams fails with Code ObjectInUse.
func StartMessages(ctx context.Context, conn *Conn, slot, publication string) error {
	err := pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{
		Mode:       pglogrepl.LogicalReplication,
		PluginArgs: []string{"proto_version '2'", "publication_names '" + publication + "'", "messages 'true'"},
	})
	if err != nil {
		return fmt.Errorf("wal: start streaming slot %s: %w", slot, err)
	}
	return nil
}

// Start starts streaming the slot from its confirmed position: pgoutput protocol 2 with binary
// tuples, the inserts of the publication, no logical decoding messages. A slot another
// walsender streams fails with Code ObjectInUse.
func Start(ctx context.Context, conn *Conn, slot, publication string) error {
	err := pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{
		Mode: pglogrepl.LogicalReplication,
		PluginArgs: []string{"proto_version '2'", "publication_names '" + publication + "'",
			"binary 'true'", "messages 'false'"},
	})
	if err != nil {
		return fmt.Errorf("cdc: start streaming slot %s: %w", slot, err)
	}
	return nil
}
