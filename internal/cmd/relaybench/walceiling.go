package main

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outboxkit/outboxkit/outbox"
)

// The wal ceiling relay (-relays wal-ceiling, PostgreSQL) is the simplest relay that could
// stream the wal source's messages to the same broker: the backlog is written by outbox.Writer
// in ModeWAL (one logical decoding message per transaction, no row) into a slot made before it,
// and the relay receives the stream as the cdc ceiling does (pgoutput protocol 2, messages on,
// one goroutine receiving), parses each message with stock pglogrepl, decodes the envelope with
// outbox.DecodeWALEnvelope, produces each event with franz-go (the other relays' producer
// settings) and confirms the slot position once every record before it is acknowledged. No
// order across keys, no parking, no retries, no leases, no metrics: the limit of this machine
// for a relay of the wal source, which its drain (outboxkit-wal) is to be set beside.

// relayWALCeiling is the wal ceiling relay.
const relayWALCeiling = "wal-ceiling"

// walCeilingSlot is the slot (and the name of its empty publication) of the wal ceiling's
// outbox table name: bench names are lower-case identifiers.
func walCeilingSlot(name string) string { return name + "_wal" }

// walCeilingSetup prepares the outbox table name for the wal ceiling: migrated (the emit guard's
// register), the empty publication pgoutput needs, the slot, created and registered before the
// backlog is written; it returns a function that writes events in one transaction in ModeWAL.
func walCeilingSetup(ctx context.Context, db *sql.DB, d database, name string) (writeFunc, error) {
	if d.dialect != outbox.Postgres {
		return nil, &notAvailableError{reason: "the wal source needs PostgreSQL"}
	}
	slot := walCeilingSlot(name)
	w, err := outbox.NewWriter(outbox.Config{Dialect: d.dialect, Table: name, Mode: outbox.ModeWAL, WALSlot: slot})
	if err != nil {
		return nil, fmt.Errorf("outbox writer: %w", err)
	}
	if err := outbox.Migrate(ctx, db, w.Table()); err != nil {
		return nil, fmt.Errorf("migrate outbox table %s: %w", name, err)
	}
	if _, err := db.ExecContext(ctx, "CREATE PUBLICATION "+slot); err != nil {
		return nil, fmt.Errorf("create publication %s: %w", slot, err)
	}
	if _, err := outbox.CreateWALSlot(ctx, db, w.Table(), slot); err != nil {
		return nil, err
	}
	return func(ctx context.Context, events []outbox.Event) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := w.WriteTx(ctx, tx, events...); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}, nil
}

// dropWALCeiling removes the wal ceiling's slot (ending its walsender first), its publication
// and the functions its migrations made.
func dropWALCeiling(db *sql.DB, name string) {
	slot := walCeilingSlot(name)
	for range 50 {
		_, _ = db.Exec("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL", slot)
		_, _ = db.Exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1 AND NOT active", slot)
		var left int
		if db.QueryRow("SELECT COUNT(*) FROM pg_replication_slots WHERE slot_name = $1", slot).Scan(&left) != nil || left == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	_, _ = db.Exec("DROP PUBLICATION IF EXISTS " + slot)
	_, _ = db.Exec("DROP TABLE IF EXISTS " + name + "_wal_slots")
	_, _ = db.Exec("DROP FUNCTION IF EXISTS " + name + "_emit(text, text, text, text, bytea, jsonb, text, uuid, timestamptz, timestamptz), " +
		name + "_wal_guard(), " + name + "_wal_refuse(text)")
}

// runWALCeiling is the wal ceiling relay's child process, until ctx ends.
func runWALCeiling(ctx context.Context, d database, name string, o options) error {
	table, err := outbox.NewTable(d.dialect, name)
	if err != nil {
		return fmt.Errorf("outbox table %q: %w", name, err)
	}
	client, err := ceilingClient(ctx, o)
	if err != nil {
		return err
	}
	defer client.Close()
	cfg, err := pgconn.ParseConfig(d.dsn)
	if err != nil {
		return fmt.Errorf("parse the PostgreSQL DSN: %w", err)
	}
	cfg.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("replication connection: %w", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if err := waitForGo(); err != nil {
		return err
	}
	slot := walCeilingSlot(name)
	if err := pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{
		Mode:       pglogrepl.LogicalReplication,
		PluginArgs: []string{"proto_version '2'", "publication_names '" + slot + "'", "messages 'true'"},
	}); err != nil {
		return fmt.Errorf("start streaming slot %s: %w", slot, err)
	}
	s := &cdcCeilingStream{conn: conn, client: client, decoder: walDecoder{prefix: table.WALPrefix()}, acks: &ackTracker{done: map[uint64]bool{}}}
	err = s.run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// walDecoder decodes the stream of the wal source with stock pglogrepl: the messages with the
// outbox's prefix become their events; the commits end transactions.
type walDecoder struct{ prefix string }

func (d walDecoder) decode(data []byte) (ceilingMessage, error) {
	if len(data) == 0 {
		return ceilingMessage{}, nil
	}
	switch data[0] {
	case pglogrepl.PrimaryKeepaliveMessageByteID:
		ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
		if err != nil {
			return ceilingMessage{}, fmt.Errorf("parse keepalive: %w", err)
		}
		return ceilingMessage{kind: ceilingKeepalive, replyRequested: ka.ReplyRequested}, nil
	case pglogrepl.XLogDataByteID:
		xld, err := pglogrepl.ParseXLogData(data[1:])
		if err != nil {
			return ceilingMessage{}, fmt.Errorf("parse XLogData: %w", err)
		}
		msg, err := pglogrepl.ParseV2(xld.WALData, false)
		if err != nil {
			return ceilingMessage{}, fmt.Errorf("parse pgoutput message: %w", err)
		}
		switch m := msg.(type) {
		case *pglogrepl.LogicalDecodingMessageV2:
			if m.Prefix != d.prefix {
				return ceilingMessage{}, nil
			}
			events, err := outbox.DecodeWALEnvelope(m.Content)
			if err != nil {
				return ceilingMessage{}, fmt.Errorf("message at %s: %w", m.LSN, err)
			}
			return ceilingMessage{kind: ceilingEvents, events: events}, nil
		case *pglogrepl.CommitMessage:
			return ceilingMessage{kind: ceilingCommit, end: m.TransactionEndLSN}, nil
		}
	}
	return ceilingMessage{}, nil
}
