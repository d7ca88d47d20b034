package forwarder

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"
)

// cdcDecoder turns pgoutput insert messages (binary tuples) into records, with pgx's type
// codecs. It keeps the column layout of each relation the stream announced.
type cdcDecoder struct {
	types     *pgtype.Map
	target    cdcTarget // the outbox table, resolved by PostgreSQL (cdc_names.go)
	table     string    // its name, for errors
	relations map[uint32]*cdcRelation
}

// cdcRelation is the column layout of one relation: for each column of the outbox table that a
// record needs, its position in the tuple and its type.
type cdcRelation struct {
	ours    bool
	columns map[string]int
	oids    []uint32
}

// cdcColumns are the outbox table's columns a record is built from.
var cdcColumns = []string{"seq", "event_id", "topic", "aggregate_type", "aggregate_id", "event_type", "tenant_id",
	"payload", "headers", "key_hash", "created_at", "attempts", "partition_no"}

func newCDCDecoder(target cdcTarget) *cdcDecoder {
	return &cdcDecoder{types: pgtype.NewMap(), target: target, table: target.String(), relations: map[uint32]*cdcRelation{}}
}

// relation records a relation message. The outbox is the relation with the table's OID; a
// relation of another table (a publication shared by mistake) is remembered as not ours, and
// its inserts are ignored.
func (d *cdcDecoder) relation(m *pglogrepl.RelationMessageV2) error {
	rel := &cdcRelation{columns: map[string]int{}, ours: m.RelationID == d.target.oid}
	if !rel.ours && m.Namespace == d.target.schema && m.RelationName == d.target.name {
		// The table was dropped and created again: the session ends, and the next one resolves it anew.
		return fmt.Errorf("cdc: relation %s now has OID %d, not %d (recreated?)", d.table, m.RelationID, d.target.oid)
	}
	for i, c := range m.Columns {
		rel.columns[c.Name] = i
		rel.oids = append(rel.oids, c.DataType)
	}
	if rel.ours {
		for _, c := range cdcColumns {
			if _, ok := rel.columns[c]; !ok {
				return fmt.Errorf("cdc: relation %s.%s has no column %q (is the table migrated?)", m.Namespace, m.RelationName, c)
			}
		}
	}
	d.relations[m.RelationID] = rel
	return nil
}

// insert decodes an insert into a record; ok is false for a relation that is not the outbox.
func (d *cdcDecoder) insert(m *pglogrepl.InsertMessageV2) (r record, ok bool, err error) {
	rel := d.relations[m.RelationID]
	if rel == nil {
		return record{}, false, fmt.Errorf("cdc: insert into relation %d before its relation message", m.RelationID)
	}
	if !rel.ours {
		return record{}, false, nil
	}
	var (
		eventID, created any
		headers          []byte
		partition        int16
		attempts         int32
	)
	dest := []any{&r.seq, &eventID, &r.event.Topic, &r.event.AggregateType, &r.event.AggregateID, &r.event.EventType,
		&r.event.TenantID, &r.event.Payload, &headers, &r.keyHash, &created, &attempts, &partition}
	for i, name := range cdcColumns {
		pos := rel.columns[name]
		if pos >= len(m.Tuple.Columns) {
			return record{}, false, fmt.Errorf("cdc: insert into %s has %d columns, column %q is at %d", d.table, len(m.Tuple.Columns), name, pos)
		}
		col := m.Tuple.Columns[pos]
		if col.DataType != pglogrepl.TupleDataTypeBinary {
			return record{}, false, fmt.Errorf("cdc: column %q of %s came as %q, not binary", name, d.table, col.DataType)
		}
		if err := d.types.Scan(rel.oids[pos], pgtype.BinaryFormatCode, col.Data, dest[i]); err != nil {
			return record{}, false, fmt.Errorf("cdc: decode column %q of %s: %w", name, d.table, err)
		}
	}
	r.partition, r.attempts = int(partition), int(attempts)
	switch id := eventID.(type) {
	case [16]byte:
		r.event.ID = uuid.UUID(id)
	default:
		return record{}, false, fmt.Errorf("cdc: row %d: event id of type %T", r.seq, eventID)
	}
	t, ok := created.(time.Time)
	if !ok {
		return record{}, false, fmt.Errorf("cdc: row %d: created_at of type %T", r.seq, created)
	}
	r.event.CreatedAt = t.UTC()
	if len(headers) > 0 {
		if err := json.Unmarshal(headers, &r.event.Headers); err != nil {
			return record{}, false, fmt.Errorf("cdc: row %d: headers: %w", r.seq, err)
		}
		if len(r.event.Headers) == 0 {
			r.event.Headers = nil
		}
	}
	return r, true, nil
}
