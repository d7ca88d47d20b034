package outbox_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"testing"

	"github.com/jackc/pglogrepl"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// walSlot is a logical replication slot with pgoutput that a test reads through SQL
// (pg_logical_slot_get_binary_changes, protocol 2, messages on) and decodes with pglogrepl: the
// stream the wal source reads. It is registered as the wal slot of the targets it serves, so
// their writers may emit. The slot and its (empty) publication are dropped with the test.
type walSlot struct {
	db        *sql.DB
	name, pub string
}

// walMessage is one logical decoding message of a committed transaction.
type walMessage struct {
	xid           uint32
	lsn           pglogrepl.LSN
	transactional bool
	prefix        string
	content       []byte
}

// newWALSlot creates the slot the targets' writers are configured with (one name for all).
func newWALSlot(t *testing.T, db *sql.DB, serves ...walTarget) *walSlot {
	t.Helper()
	for _, tg := range serves[1:] {
		if tg.slot != serves[0].slot {
			t.Fatalf("targets on slots %s and %s", serves[0].slot, tg.slot)
		}
	}
	ctx := context.Background()
	var level string
	if err := db.QueryRowContext(ctx, "SHOW wal_level").Scan(&level); err != nil {
		t.Fatal(err)
	}
	if level != "logical" {
		t.Fatalf("the test PostgreSQL has wal_level=%s; the wal source needs logical (scripts/services.sh sets it)", level)
	}
	s := &walSlot{db: db, name: serves[0].slot, pub: testsupport.UniqueName("obk_walw_pub")}
	// pgoutput looks the publication up for the business rows of a transaction; messages are not
	// filtered by publications, so an empty one will do.
	if _, err := db.ExecContext(ctx, "CREATE PUBLICATION "+s.pub); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = db.Exec("DROP PUBLICATION IF EXISTS " + s.pub) })
	if _, err := db.ExecContext(ctx, "SELECT pg_create_logical_replication_slot($1, 'pgoutput')", s.name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// A test may have dropped it already.
		if _, err := db.Exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", s.name); err != nil {
			t.Errorf("drop slot %s: %v", s.name, err)
		}
		// ResetWALSlot creates the publication of the slot's name.
		_, _ = db.Exec("DROP PUBLICATION IF EXISTS " + s.name)
	})
	for _, tg := range serves {
		if _, err := outbox.CreateWALSlot(ctx, db, tg.writer.Table(), s.name); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// messages consumes what the slot holds and returns the messages whose prefix is prefix, in
// stream order, each with its transaction's id.
func (s *walSlot) messages(t *testing.T, prefix string) []walMessage {
	t.Helper()
	return s.read(t, "pg_logical_slot_get_binary_changes", prefix)
}

// peek is messages without consuming them.
func (s *walSlot) peek(t *testing.T, prefix string) []walMessage {
	t.Helper()
	return s.read(t, "pg_logical_slot_peek_binary_changes", prefix)
}

func (s *walSlot) read(t *testing.T, function, prefix string) []walMessage {
	t.Helper()
	rows, err := s.db.Query("SELECT data FROM "+function+"($1, NULL, NULL, "+
		"'proto_version', '2', 'publication_names', $2, 'messages', 'true')", s.name, s.pub)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []walMessage
	var xid uint32
	for rows.Next() {
		var data []byte
		if err := rows.Scan(&data); err != nil {
			t.Fatal(err)
		}
		msg, err := pglogrepl.ParseV2(data, false)
		if err != nil {
			t.Fatalf("decode pgoutput: %v", err)
		}
		switch m := msg.(type) {
		case *pglogrepl.BeginMessage:
			xid = m.Xid
		case *pglogrepl.LogicalDecodingMessageV2:
			if m.Prefix == prefix {
				out = append(out, walMessage{xid: xid, lsn: m.LSN, transactional: m.Transactional, prefix: m.Prefix,
					content: append([]byte(nil), m.Content...)})
			}
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// events decodes the messages' envelopes, in order.
func walEvents(t *testing.T, msgs []walMessage) []outbox.Event {
	t.Helper()
	var out []outbox.Event
	for _, m := range msgs {
		events, err := outbox.DecodeWALEnvelope(m.content)
		if err != nil {
			t.Fatalf("message at %s: %v", m.lsn, err)
		}
		out = append(out, events...)
	}
	return out
}

// walTarget is an outbox table migrated on the test PostgreSQL, with a ModeWAL writer on slot
// and a business table; the test drops them.
type walTarget struct {
	db       *sql.DB
	writer   *outbox.Writer
	business string
	slot     string
}

// newWALTarget is newWALTargetOn a slot of its own.
func newWALTarget(t *testing.T, db *sql.DB, name string) walTarget {
	t.Helper()
	return newWALTargetOn(t, db, name, testsupport.UniqueName("obk_walw"))
}

func newWALTargetOn(t *testing.T, db *sql.DB, name, slot string) walTarget {
	t.Helper()
	ctx := context.Background()
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: name, Mode: outbox.ModeWAL, WALSlot: slot})
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(ctx, db, w.Table()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	business := name + "_orders"
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+business+" (id TEXT PRIMARY KEY, total INT NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, tbl := range append([]string{business}, w.Table().Tables()...) {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + tbl)
		}
		for _, fn := range w.Table().Functions() {
			_, _ = db.Exec("DROP FUNCTION IF EXISTS " + fn)
		}
	})
	return walTarget{db: db, writer: w, business: business, slot: slot}
}

// sqlEmit calls the table's emit function in its own transaction and returns the event id.
func (tg walTarget) sqlEmit(t *testing.T, e outbox.Event) (string, error) {
	t.Helper()
	headers := []byte("{}")
	if len(e.Headers) > 0 {
		var err error
		if headers, err = json.Marshal(e.Headers); err != nil {
			t.Fatal(err)
		}
	}
	var id string
	var created any
	if !e.CreatedAt.IsZero() {
		created = e.CreatedAt
	}
	var eventID any
	if e.ID != [16]byte{} {
		eventID = e.ID.String()
	}
	err := tg.db.QueryRow("SELECT "+tg.writer.Table().WALEmitFunction()+"($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9)",
		e.Topic, e.AggregateType, e.AggregateID, e.EventType, e.Payload, string(headers), e.TenantID, eventID, created).Scan(&id)
	return id, err
}
