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

// The outbox row's columns, in the order of Columns and columnTypes.
const (
	colSeq = iota
	colEventID
	colTopic
	colAggregateType
	colAggregateID
	colEventType
	colTenantID
	colPayload
	colHeaders
	colKeyHash
	colCreatedAt
	colAttempts
	colPartition
	numColumns
)

// columnTypes returns the type of each outbox column, in Columns' order.
func columnTypes() [numColumns]columnType {
	int8Type := columnType{[]uint32{pgtype.Int8OID}, "bigint"}
	textType := columnType{[]uint32{pgtype.TextOID, pgtype.VarcharOID}, "text"}
	return [numColumns]columnType{
		colSeq: int8Type, colEventID: {[]uint32{pgtype.UUIDOID}, "uuid"}, colTopic: textType, colAggregateType: textType,
		colAggregateID: textType, colEventType: textType, colTenantID: textType, colPayload: {[]uint32{pgtype.ByteaOID}, "bytea"},
		colHeaders: {[]uint32{pgtype.JSONBOID}, "jsonb"}, colKeyHash: int8Type, colCreatedAt: {[]uint32{pgtype.TimestamptzOID}, "timestamptz"},
		colAttempts: {[]uint32{pgtype.Int4OID}, "integer"}, colPartition: {[]uint32{pgtype.Int2OID}, "smallint"},
	}
}

// accepts reports whether oid is one of the type's OIDs.
func (c columnType) accepts(oid uint32) bool {
	for _, o := range c.oids {
		if o == oid {
			return true
		}
	}
	return false
}

// tupleColumn is one value of a tuple: its kind ('b' binary, 't' text, 'n' NULL, 'u' an
// unchanged TOAST value) and, for 'b' and 't', its bytes (a sub-slice of the message).
type tupleColumn struct {
	kind byte
	data []byte
}

// tupleColumns splits an insert message's body (after its 'I' byte: the relation OID, 'N' and
// the tuple) into the relation OID and the tuple's values, appended to cols[:0].
func tupleColumns(body []byte, cols []tupleColumn) (relation uint32, out []tupleColumn, err error) {
	if len(body) < 7 || body[4] != 'N' {
		return 0, nil, fmt.Errorf("not an insert of a new tuple (%d bytes: % x)", len(body), body[:min(len(body), 8)])
	}
	relation = binary.BigEndian.Uint32(body)
	n := int(binary.BigEndian.Uint16(body[5:]))
	rest := body[7:]
	out = cols[:0]
	for i := range n {
		if len(rest) < 1 {
			return 0, nil, fmt.Errorf("the message ends before column %d of %d", i, n)
		}
		c := tupleColumn{kind: rest[0]}
		rest = rest[1:]
		switch c.kind {
		case 'n', 'u':
			out = append(out, c)
			continue
		case 't', 'b':
		default:
			return 0, nil, fmt.Errorf("column %d of %d is of kind %q", i, n, c.kind)
		}
		if len(rest) < 4 {
			return 0, nil, fmt.Errorf("the message ends inside the length of column %d of %d", i, n)
		}
		size := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(size) > uint64(len(rest)) {
			return 0, nil, fmt.Errorf("column %d of %d is %d bytes, the message has %d left", i, n, size, len(rest))
		}
		c.data = rest[:size:size]
		out = append(out, c)
		rest = rest[size:]
	}
	return relation, out, nil
}

// rowColumns reads the outbox columns of one tuple, each in the binary format of its type
// (checked by Relation). The first failure is kept, with its column, and later reads return
// zero values.
type rowColumns struct {
	values []tupleColumn // by position in the tuple
	pos    *[numColumns]int
	err    error
	col    int // the column that failed
}

// value returns column col's bytes, which alias the message; size is the length its type's
// binary format has, or -1 for any.
func (c *rowColumns) value(col, size int) []byte {
	if c.err != nil {
		return nil
	}
	pos := c.pos[col]
	if pos >= len(c.values) {
		c.fail(col, fmt.Errorf("the tuple has %d columns, the column is at %d", len(c.values), pos))
		return nil
	}
	v := c.values[pos]
	switch {
	case v.kind == 'n':
		c.fail(col, errors.New("NULL"))
	case v.kind == 'u':
		c.fail(col, errors.New("an unchanged TOAST value, not the value"))
	case v.kind == 't':
		c.fail(col, errors.New("in text format, not binary"))
	case size >= 0 && len(v.data) != size:
		c.fail(col, fmt.Errorf("%d bytes, want %d", len(v.data), size))
	}
	return v.data
}

func (c *rowColumns) fail(col int, err error) { c.err, c.col = err, col }

func (c *rowColumns) int64(col int) int64 {
	if v := c.value(col, 8); c.err == nil {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}

func (c *rowColumns) int32(col int) int32 {
	if v := c.value(col, 4); c.err == nil {
		return int32(binary.BigEndian.Uint32(v))
	}
	return 0
}

func (c *rowColumns) int16(col int) int16 {
	if v := c.value(col, 2); c.err == nil {
		return int16(binary.BigEndian.Uint16(v))
	}
	return 0
}

func (c *rowColumns) text(col int) string { return string(c.value(col, -1)) }

func (c *rowColumns) uuid(col int) (id uuid.UUID) {
	if v := c.value(col, 16); c.err == nil {
		copy(id[:], v)
	}
	return id
}

// jsonb returns the JSON text of a jsonb value (its binary format: a version byte, 1, then the
// text).
func (c *rowColumns) jsonb(col int) []byte {
	v := c.value(col, -1)
	if c.err != nil {
		return nil
	}
	if len(v) == 0 || v[0] != 1 {
		c.fail(col, fmt.Errorf("jsonb of format version % x, want 01", v[:min(len(v), 1)]))
		return nil
	}
	return v[1:]
}

// unixToY2K is the seconds from the Unix epoch to 2000-01-01 UTC, where timestamptz's binary
// format counts microseconds from.
const unixToY2K = 946_684_800

// timestamp reads a timestamptz; PostgreSQL's infinity and -infinity are refused (no event is
// written with them).
func (c *rowColumns) timestamp(col int) time.Time {
	us := c.int64(col)
	if c.err != nil {
		return time.Time{}
	}
	if us == math.MaxInt64 || us == math.MinInt64 {
		c.fail(col, errors.New("an infinite timestamp"))
		return time.Time{}
	}
	return time.Unix(unixToY2K+us/1_000_000, us%1_000_000*1_000).UTC()
}

// decodeRow reads the outbox row of an insert's tuple. The payload aliases the message.
func (d *Decoder) decodeRow(rel *relation, values []tupleColumn) (Row, error) {
	c := rowColumns{values: values, pos: &rel.pos}
	var r Row
	r.Seq = c.int64(colSeq)
	r.Event.ID = c.uuid(colEventID)
	r.Event.Topic = c.text(colTopic)
	r.Event.AggregateType = c.text(colAggregateType)
	r.Event.AggregateID = c.text(colAggregateID)
	r.Event.EventType = c.text(colEventType)
	r.Event.TenantID = c.text(colTenantID)
	r.Event.Payload = c.value(colPayload, -1)
	headers := c.jsonb(colHeaders)
	r.KeyHash = c.int64(colKeyHash)
	r.Event.CreatedAt = c.timestamp(colCreatedAt)
	r.Attempts = int(c.int32(colAttempts))
	r.Partition = int(c.int16(colPartition))
	if c.err != nil {
		return Row{}, fmt.Errorf("cdc: decode column %q of %s: %w", Columns[c.col], d.table, c.err)
	}
	if string(headers) != "{}" {
		if err := json.Unmarshal(headers, &r.Event.Headers); err != nil {
			return Row{}, fmt.Errorf("cdc: row %d of %s: headers %.100q: %w", r.Seq, d.table, headers, err)
		}
		if len(r.Event.Headers) == 0 {
			r.Event.Headers = nil
		}
	}
	return r, nil
}
