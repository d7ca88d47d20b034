package pgrepl

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/outboxkit/outboxkit/outbox"
)

// Row is one outbox row decoded from an insert.
type Row struct {
	Seq       int64
	Event     outbox.Event
	KeyHash   int64
	Attempts  int
	Partition int
}

// Decoder turns pgoutput insert messages (binary tuples) into rows of the outbox table, with
// pgx's type codecs. It keeps the column layout of each relation the stream announced.
type Decoder struct {
	types     *pgtype.Map
	target    Target // the outbox table, resolved by PostgreSQL (ResolveTable)
	table     string // its name, for errors
	relations map[uint32]*relation
}

// relation is the column layout of one relation: for each column of the outbox table that a
// row needs, its position in the tuple and its type.
type relation struct {
	ours    bool
	columns map[string]int
	oids    []uint32
}

// Columns are the outbox table's columns a row is decoded from.
var Columns = []string{"seq", "event_id", "topic", "aggregate_type", "aggregate_id", "event_type", "tenant_id",
	"payload", "headers", "key_hash", "created_at", "attempts", "partition_no"}

// NewDecoder returns a decoder of the inserts into target. The stream is matched to the outbox
// by OID: pgoutput's relation messages carry the relation's OID and its names as stored
// (folded), which the configured spelling of a mixed-case table would not match.
func NewDecoder(target Target) *Decoder {
	return &Decoder{types: pgtype.NewMap(), target: target, table: target.String(), relations: map[uint32]*relation{}}
}

// Relation records a relation message. The outbox is the relation with the table's OID; a
// relation of another table (a publication shared by mistake) is remembered as not ours, and
// its inserts are ignored.
func (d *Decoder) Relation(m *pglogrepl.RelationMessageV2) error {
	rel := &relation{columns: map[string]int{}, ours: m.RelationID == d.target.OID}
	if !rel.ours && m.Namespace == d.target.Schema && m.RelationName == d.target.Name {
		// The table was dropped and created again: the session ends, and the next one resolves it anew.
		return fmt.Errorf("cdc: relation %s now has OID %d, not %d (recreated?)", d.table, m.RelationID, d.target.OID)
	}
	for i, c := range m.Columns {
		rel.columns[c.Name] = i
		rel.oids = append(rel.oids, c.DataType)
	}
	if rel.ours {
		for _, c := range Columns {
			if _, ok := rel.columns[c]; !ok {
				return fmt.Errorf("cdc: relation %s.%s has no column %q (is the table migrated?)", m.Namespace, m.RelationName, c)
			}
		}
	}
	d.relations[m.RelationID] = rel
	return nil
}

// Insert decodes an insert into a row; ok is false for a relation that is not the outbox.
func (d *Decoder) Insert(m *pglogrepl.InsertMessageV2) (r Row, ok bool, err error) {
	rel := d.relations[m.RelationID]
	if rel == nil {
		return Row{}, false, fmt.Errorf("cdc: insert into relation %d before its relation message", m.RelationID)
	}
	if !rel.ours {
		return Row{}, false, nil
	}
	var (
		eventID, created any
		headers          []byte
		partition        int16
		attempts         int32
	)
	dest := []any{&r.Seq, &eventID, &r.Event.Topic, &r.Event.AggregateType, &r.Event.AggregateID, &r.Event.EventType,
		&r.Event.TenantID, &r.Event.Payload, &headers, &r.KeyHash, &created, &attempts, &partition}
	for i, name := range Columns {
		pos := rel.columns[name]
		if pos >= len(m.Tuple.Columns) {
			return Row{}, false, fmt.Errorf("cdc: insert into %s has %d columns, column %q is at %d", d.table, len(m.Tuple.Columns), name, pos)
		}
		col := m.Tuple.Columns[pos]
		if col.DataType != pglogrepl.TupleDataTypeBinary {
			return Row{}, false, fmt.Errorf("cdc: column %q of %s came as %q, not binary", name, d.table, col.DataType)
		}
		if err := d.types.Scan(rel.oids[pos], pgtype.BinaryFormatCode, col.Data, dest[i]); err != nil {
			return Row{}, false, fmt.Errorf("cdc: decode column %q of %s: %w", name, d.table, err)
		}
	}
	r.Partition, r.Attempts = int(partition), int(attempts)
	if err := d.finish(&r, eventID, created, headers); err != nil {
		return Row{}, false, err
	}
	return r, true, nil
}

// finish converts the columns pgx decodes into generic values.
func (d *Decoder) finish(r *Row, eventID, created any, headers []byte) error {
	id, ok := eventID.([16]byte)
	if !ok {
		return fmt.Errorf("cdc: row %d: event id of type %T", r.Seq, eventID)
	}
	r.Event.ID = uuid.UUID(id)
	t, ok := created.(time.Time)
	if !ok {
		return fmt.Errorf("cdc: row %d: created_at of type %T", r.Seq, created)
	}
	r.Event.CreatedAt = t.UTC()
	if len(headers) > 0 {
		if err := json.Unmarshal(headers, &r.Event.Headers); err != nil {
			return fmt.Errorf("cdc: row %d: headers: %w", r.Seq, err)
		}
		if len(r.Event.Headers) == 0 {
			r.Event.Headers = nil
		}
	}
	return nil
}
