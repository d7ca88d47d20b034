package main

import (
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/outboxkit/outboxkit/outbox"
)

// The cdc ceiling relay decodes the stream with the stock libraries, as a relay written from
// their documentation would: pglogrepl parses each pgoutput message (its tuple columns copied),
// and pgx's type map scans each column from its binary format into a Go value. The outboxkit cdc
// source has a decoder of its own (forwarder/internal/pgrepl), which the benchmark may not
// import.

// ceilingMessage is what the cdc and wal ceiling relays need of one CopyData payload.
type ceilingMessage struct {
	kind           ceilingKind
	event          outbox.Event   // ceilingInsert
	events         []outbox.Event // ceilingEvents: the events of one wal message
	end            pglogrepl.LSN  // ceilingCommit: the end of the transaction
	replyRequested bool           // ceilingKeepalive
}

type ceilingKind int

const (
	ceilingSkip ceilingKind = iota
	ceilingKeepalive
	ceilingInsert
	ceilingEvents
	ceilingCommit
)

// ceilingDecoder decodes one CopyData payload of a ceiling relay's stream: the cdc ceiling's
// stockDecoder, the wal ceiling's walDecoder.
type ceilingDecoder interface {
	decode(data []byte) (ceilingMessage, error)
}

// cdcCeilingColumns are the outbox columns the ceiling decodes: every column the outboxkit cdc
// source decodes, so that both do the same work per row.
var cdcCeilingColumns = []string{"seq", "event_id", "topic", "aggregate_type", "aggregate_id", "event_type", "tenant_id",
	"payload", "headers", "key_hash", "created_at", "attempts", "partition_no"}

// stockDecoder decodes the stream of the outbox table's publication (which publishes that
// table's inserts only) with pglogrepl and pgtype.
type stockDecoder struct {
	types *pgtype.Map
	// relations are the column positions and types of each relation, in cdcCeilingColumns' order.
	relations map[uint32]*stockRelation
}

type stockRelation struct {
	name string
	pos  []int
	oids []uint32
}

func newStockDecoder() *stockDecoder {
	return &stockDecoder{types: pgtype.NewMap(), relations: map[uint32]*stockRelation{}}
}

// decode decodes one CopyData payload.
func (d *stockDecoder) decode(data []byte) (ceilingMessage, error) {
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
		case *pglogrepl.RelationMessageV2:
			return ceilingMessage{}, d.relation(m)
		case *pglogrepl.InsertMessageV2:
			e, err := d.insert(m)
			return ceilingMessage{kind: ceilingInsert, event: e}, err
		case *pglogrepl.CommitMessage:
			return ceilingMessage{kind: ceilingCommit, end: m.TransactionEndLSN}, nil
		}
	}
	return ceilingMessage{}, nil
}

// relation records where the outbox columns are in the relation's tuples.
func (d *stockDecoder) relation(m *pglogrepl.RelationMessageV2) error {
	rel := &stockRelation{name: m.Namespace + "." + m.RelationName}
	for _, name := range cdcCeilingColumns {
		pos := -1
		for i, c := range m.Columns {
			if c.Name == name {
				pos = i
			}
		}
		if pos < 0 {
			return fmt.Errorf("relation %s has no column %q", rel.name, name)
		}
		rel.pos = append(rel.pos, pos)
		rel.oids = append(rel.oids, m.Columns[pos].DataType)
	}
	d.relations[m.RelationID] = rel
	return nil
}

// insert scans the outbox columns of an insert into an event (and the row's other columns into
// the values the outboxkit source decodes them to).
func (d *stockDecoder) insert(m *pglogrepl.InsertMessageV2) (outbox.Event, error) {
	rel := d.relations[m.RelationID]
	if rel == nil {
		return outbox.Event{}, fmt.Errorf("insert into relation %d before its relation message", m.RelationID)
	}
	if m.Tuple == nil {
		return outbox.Event{}, fmt.Errorf("insert into %s without a tuple", rel.name)
	}
	var (
		e            outbox.Event
		seq, keyHash int64
		id           pgtype.UUID
		attempts     int32
		partition    int16
		headers      []byte
	)
	dst := []any{&seq, &id, &e.Topic, &e.AggregateType, &e.AggregateID, &e.EventType, &e.TenantID,
		&e.Payload, &headers, &keyHash, &e.CreatedAt, &attempts, &partition}
	for i, target := range dst {
		pos := rel.pos[i]
		if pos >= len(m.Tuple.Columns) {
			return outbox.Event{}, fmt.Errorf("insert into %s: the tuple has %d columns, %q is at %d", rel.name, len(m.Tuple.Columns), cdcCeilingColumns[i], pos)
		}
		col := m.Tuple.Columns[pos]
		format := int16(pgtype.BinaryFormatCode)
		switch col.DataType {
		case pglogrepl.TupleDataTypeBinary:
		case pglogrepl.TupleDataTypeText:
			format = pgtype.TextFormatCode
		default:
			return outbox.Event{}, fmt.Errorf("insert into %s: column %q is of kind %q", rel.name, cdcCeilingColumns[i], col.DataType)
		}
		if err := d.types.Scan(rel.oids[i], format, col.Data, target); err != nil {
			return outbox.Event{}, fmt.Errorf("insert into %s: column %q: %w", rel.name, cdcCeilingColumns[i], err)
		}
	}
	e.ID = uuid.UUID(id.Bytes)
	e.CreatedAt = e.CreatedAt.UTC()
	if string(headers) != "{}" { // as the outboxkit source: no map for the empty object
		if err := json.Unmarshal(headers, &e.Headers); err != nil {
			return outbox.Event{}, fmt.Errorf("insert into %s: headers %.100q: %w", rel.name, headers, err)
		}
		if len(e.Headers) == 0 {
			e.Headers = nil
		}
	}
	return e, nil
}
