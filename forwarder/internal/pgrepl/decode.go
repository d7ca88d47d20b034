package pgrepl

import (
	"fmt"

	"github.com/jackc/pglogrepl"

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

// Decoder turns pgoutput insert messages (binary tuples) into rows of the outbox table
// (tuple.go). It keeps the column layout of each relation the stream announced.
type Decoder struct {
	target    Target // the outbox table, resolved by PostgreSQL (ResolveTable)
	table     string // its name, for errors
	relations map[uint32]*relation
	values    []tupleColumn // the current insert's columns, reused
}

// relation is the column layout of one relation: for the outbox, the position in the tuple of
// each column a row needs (in Columns' order).
type relation struct {
	ours bool
	pos  [numColumns]int
}

// Columns are the outbox table's columns a row is decoded from, in the order of the col
// constants (tuple.go).
var Columns = []string{"seq", "event_id", "topic", "aggregate_type", "aggregate_id", "event_type", "tenant_id",
	"payload", "headers", "key_hash", "created_at", "attempts", "partition_no"}

// NewDecoder returns a decoder of the inserts into target. The stream is matched to the outbox
// by OID: pgoutput's relation messages carry the relation's OID and its names as stored
// (folded), which the configured spelling of a mixed-case table would not match.
func NewDecoder(target Target) *Decoder {
	return &Decoder{target: target, table: target.String(), relations: map[uint32]*relation{}}
}

// Relation records a relation message. The outbox is the relation with the table's OID; a
// relation of another table (a publication shared by mistake) is remembered as not ours, and
// its inserts are ignored. The outbox's columns must have the types its schema gives them.
func (d *Decoder) Relation(m *pglogrepl.RelationMessageV2) error {
	rel := &relation{ours: m.RelationID == d.target.OID}
	if !rel.ours && m.Namespace == d.target.Schema && m.RelationName == d.target.Name {
		// The table was dropped and created again: the session ends, and the next one resolves it anew.
		return fmt.Errorf("cdc: relation %s now has OID %d, not %d (recreated?)", d.table, m.RelationID, d.target.OID)
	}
	if rel.ours {
		positions := make(map[string]int, len(m.Columns))
		for i, c := range m.Columns {
			positions[c.Name] = i
		}
		types := columnTypes()
		for col, name := range Columns {
			pos, ok := positions[name]
			if !ok {
				return fmt.Errorf("cdc: relation %s.%s has no column %q (is the table migrated?)", m.Namespace, m.RelationName, name)
			}
			if want := types[col]; !want.accepts(m.Columns[pos].DataType) {
				return fmt.Errorf("cdc: column %q of %s.%s has the type of OID %d, not %s", name, m.Namespace, m.RelationName, m.Columns[pos].DataType, want.name)
			}
			rel.pos[col] = pos
		}
	}
	d.relations[m.RelationID] = rel
	return nil
}

// insert decodes the body of an insert message (after its type byte) into a row; ok is false
// for a relation that is not the outbox.
func (d *Decoder) insert(body []byte) (r Row, ok bool, err error) {
	relID, values, err := tupleColumns(body, d.values)
	if err != nil {
		return Row{}, false, fmt.Errorf("cdc: parse an insert message: %w", err)
	}
	d.values = values
	rel := d.relations[relID]
	if rel == nil {
		return Row{}, false, fmt.Errorf("cdc: insert into relation %d before its relation message", relID)
	}
	if !rel.ours {
		return Row{}, false, nil
	}
	r, err = d.decodeRow(rel, values)
	return r, err == nil, err
}
