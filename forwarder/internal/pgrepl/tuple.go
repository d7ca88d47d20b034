package pgrepl

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// The outbox's inserts are decoded straight from the pgoutput message: the tuple's columns are
// sub-slices of the message (the stream hands every message in a buffer of its own), and each
// column is read by the binary format of the one type the outbox schema gives it. pglogrepl's
// TupleData copies every column into a new allocation, byte by byte, and pgx's Map.Scan picks a
// scan plan per value: in a traced drain of 100,000 events the two were a third of the cdc
// relay's CPU. Relation checks each column's type once, so a table whose column has another
// type is refused by name before any of its rows is decoded.

// columnType is the type an outbox column must have in the stream: its OIDs (TEXT columns may
// also be VARCHAR, whose binary format is the same) and its name, for errors.
type columnType struct {
	oids []uint32
	name string
}

var (
	int8Type   = columnType{[]uint32{pgtype.Int8OID}, "bigint"}
	int4Type   = columnType{[]uint32{pgtype.Int4OID}, "integer"}
	int2Type   = columnType{[]uint32{pgtype.Int2OID}, "smallint"}
	uuidType   = columnType{[]uint32{pgtype.UUIDOID}, "uuid"}
	textType   = columnType{[]uint32{pgtype.TextOID, pgtype.VarcharOID}, "text"}
	byteaType  = columnType{[]uint32{pgtype.ByteaOID}, "bytea"}
	jsonbType  = columnType{[]uint32{pgtype.JSONBOID}, "jsonb"}
	stampType  = columnType{[]uint32{pgtype.TimestamptzOID}, "timestamptz"}
	columnKind = map[string]columnType{
		"seq": int8Type, "event_id": uuidType, "topic": textType, "aggregate_type": textType, "aggregate_id": textType,
		"event_type": textType, "tenant_id": textType, "payload": byteaType, "headers": jsonbType, "key_hash": int8Type,
		"created_at": stampType, "attempts": int4Type, "partition_no": int2Type,
	}
)

// accepts reports whether oid is one of the type's OIDs.
func (c columnType) accepts(oid uint32) bool {
	for _, o := range c.oids {
		if o == oid {
			return true
		}
	}
	return false
}

// errShortTuple: the message ends inside its tuple.
var errShortTuple = errors.New("message ends inside its tuple")

// tupleColumns splits an insert message's body (after its 'I' byte: the relation OID, 'N' and
// the tuple) into the relation OID and the columns' values, appended to cols[:0]; a value is
// nil for a NULL or an unchanged TOAST value, and text reports whether any came in text format.
func tupleColumns(body []byte, cols [][]byte) (relation uint32, out [][]byte, text bool, err error) {
	if len(body) < 7 || body[4] != 'N' {
		return 0, nil, false, fmt.Errorf("not an insert of a new tuple (%d bytes)", len(body))
	}
	relation = binary.BigEndian.Uint32(body)
	n := int(binary.BigEndian.Uint16(body[5:]))
	rest := body[7:]
	out = cols[:0]
	for range n {
		if len(rest) < 1 {
			return 0, nil, false, errShortTuple
		}
		kind := rest[0]
		rest = rest[1:]
		switch kind {
		case 'n', 'u':
			out = append(out, nil)
			continue
		case 't':
			text = true
		case 'b':
		default:
			return 0, nil, false, fmt.Errorf("column %d of kind %q", len(out), kind)
		}
		if len(rest) < 4 {
			return 0, nil, false, errShortTuple
		}
		size := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(size) > uint64(len(rest)) {
			return 0, nil, false, errShortTuple
		}
		out = append(out, rest[:size:size])
		rest = rest[size:]
	}
	return relation, out, text, nil
}

// rowColumns reads the outbox row's columns (binary format, the types Relation checked) into r.
type rowColumns struct {
	values [][]byte // by position in the tuple
	rel    *relation
	err    error
	name   string // the first column that failed
}

func (c *rowColumns) value(name string, size int) []byte {
	if c.err != nil {
		return nil
	}
	pos := c.rel.columns[name]
	if pos >= len(c.values) {
		c.err, c.name = fmt.Errorf("the tuple has %d columns, the column is at %d", len(c.values), pos), name
		return nil
	}
	v := c.values[pos]
	switch {
	case v == nil:
		c.err, c.name = errors.New("NULL"), name
	case size >= 0 && len(v) != size:
		c.err, c.name = fmt.Errorf("%d bytes, want %d", len(v), size), name
	}
	return v
}

func (c *rowColumns) int64(name string) int64 {
	if v := c.value(name, 8); c.err == nil {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}

func (c *rowColumns) int32(name string) int32 {
	if v := c.value(name, 4); c.err == nil {
		return int32(binary.BigEndian.Uint32(v))
	}
	return 0
}

func (c *rowColumns) int16(name string) int16 {
	if v := c.value(name, 2); c.err == nil {
		return int16(binary.BigEndian.Uint16(v))
	}
	return 0
}

func (c *rowColumns) text(name string) string { return string(c.value(name, -1)) }

func (c *rowColumns) uuid(name string) (id uuid.UUID) {
	if v := c.value(name, 16); c.err == nil {
		copy(id[:], v)
	}
	return id
}

// jsonb returns the JSON text of a jsonb value (its binary format: a version byte, 1, then the
// text).
func (c *rowColumns) jsonb(name string) []byte {
	v := c.value(name, -1)
	if c.err != nil {
		return nil
	}
	if len(v) == 0 || v[0] != 1 {
		c.err, c.name = errors.New("not jsonb of format version 1"), name
		return nil
	}
	return v[1:]
}

// postgresEpoch is where timestamptz's binary format counts microseconds from.
var postgresEpoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

func (c *rowColumns) timestamp(name string) time.Time {
	us := c.int64(name)
	if c.err != nil {
		return time.Time{}
	}
	if us == math.MaxInt64 || us == math.MinInt64 {
		c.err, c.name = errors.New("an infinite timestamp"), name
		return time.Time{}
	}
	return postgresEpoch.Add(time.Duration(us) * time.Microsecond)
}

// decodeRow reads the outbox row of an insert's tuple.
func (d *Decoder) decodeRow(rel *relation, values [][]byte) (Row, error) {
	c := rowColumns{values: values, rel: rel}
	var r Row
	r.Seq = c.int64("seq")
	r.Event.ID = c.uuid("event_id")
	r.Event.Topic = c.text("topic")
	r.Event.AggregateType = c.text("aggregate_type")
	r.Event.AggregateID = c.text("aggregate_id")
	r.Event.EventType = c.text("event_type")
	r.Event.TenantID = c.text("tenant_id")
	r.Event.Payload = c.value("payload", -1)
	headers := c.jsonb("headers")
	r.KeyHash = c.int64("key_hash")
	r.Event.CreatedAt = c.timestamp("created_at")
	r.Attempts = int(c.int32("attempts"))
	r.Partition = int(c.int16("partition_no"))
	if c.err != nil {
		return Row{}, fmt.Errorf("cdc: decode column %q of %s: %w", c.name, d.table, c.err)
	}
	if len(headers) > 2 || len(headers) == 2 && string(headers) != "{}" {
		if err := json.Unmarshal(headers, &r.Event.Headers); err != nil {
			return Row{}, fmt.Errorf("cdc: row %d of %s: headers: %w", r.Seq, d.table, err)
		}
		if len(r.Event.Headers) == 0 {
			r.Event.Headers = nil
		}
	}
	return r, nil
}
