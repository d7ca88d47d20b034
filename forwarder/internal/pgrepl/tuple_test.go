package pgrepl

import (
	"encoding/binary"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgtype"
)

// testRelation is an outbox relation with one extra column, "note", first.
const testRelationID = 42

func testDecoder(t *testing.T) *Decoder {
	t.Helper()
	d := NewDecoder(Target{OID: testRelationID, Schema: "public", Name: "outbox"})
	m := &pglogrepl.RelationMessageV2{RelationMessage: pglogrepl.RelationMessage{RelationID: testRelationID, Namespace: "public", RelationName: "outbox"}}
	m.Columns = append(m.Columns, &pglogrepl.RelationMessageColumn{Name: "note", DataType: pgtype.TextOID})
	types := columnTypes()
	for col, name := range Columns {
		m.Columns = append(m.Columns, &pglogrepl.RelationMessageColumn{Name: name, DataType: types[col].oids[0]})
	}
	if err := d.Relation(m); err != nil {
		t.Fatal(err)
	}
	return d
}

// testTuple returns the binary values of an outbox row (with the extra column first, in text
// format) created at created and with headers as jsonb text.
func testTuple(created time.Time, headers string) []tupleColumn {
	be := func(n int, v uint64) []byte {
		b := make([]byte, 8)
		binary.BigEndian.PutUint64(b, v)
		return b[8-n:]
	}
	id := uuid.MustParse("0b0a6c55-7e3c-4c1e-9d6a-3c1f1d1f0001")
	us := created.Sub(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).Microseconds()
	if created.Year() < 1700 || created.Year() > 2250 { // beyond time.Duration: whole days apart
		days := (created.Unix() - unixToY2K) / 86400
		rest := created.Sub(time.Unix(unixToY2K+days*86400, 0))
		us = days*86_400_000_000 + rest.Microseconds()
	}
	bin := func(b []byte) tupleColumn { return tupleColumn{kind: 'b', data: b} }
	text := func(s string) tupleColumn { return bin([]byte(s)) }
	return []tupleColumn{{kind: 't', data: []byte("(1,2)")},
		bin(be(8, 7)), bin(id[:]), text("orders"), text("order"), text("o-1"), text("OrderPlaced"), text(""),
		bin([]byte(`{"total":42}`)), bin(append([]byte{1}, headers...)), bin(be(8, 99)), bin(be(8, uint64(us))),
		bin(be(4, 0)), bin(be(2, 5))}
}

// insertBody encodes values as an insert message's body (after its 'I').
func insertBody(relation uint32, values []tupleColumn) []byte {
	b := binary.BigEndian.AppendUint32(nil, relation)
	b = append(b, 'N')
	b = binary.BigEndian.AppendUint16(b, uint16(len(values)))
	for _, v := range values {
		b = append(b, v.kind)
		if v.kind == 'b' || v.kind == 't' {
			b = binary.BigEndian.AppendUint32(b, uint32(len(v.data)))
			b = append(b, v.data...)
		}
	}
	return b
}

func TestInsertDecodesEveryYearAndTheRowsColumns(t *testing.T) {
	d := testDecoder(t)
	for _, created := range []time.Time{
		time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1600, 5, 1, 0, 0, 0, 0, time.UTC),
		time.Date(1999, 12, 31, 23, 59, 59, 999_999_000, time.UTC),
		time.Date(2026, 12, 2, 21, 30, 0, 123_456_000, time.UTC),
		time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999_999_000, time.UTC),
	} {
		r, ok, err := d.insert(insertBody(testRelationID, testTuple(created, `{"trace": "abc"}`)))
		if err != nil || !ok {
			t.Fatalf("created %v: ok %v, %v", created, ok, err)
		}
		if !r.Event.CreatedAt.Equal(created) || r.Event.CreatedAt.Location() != time.UTC {
			t.Errorf("created_at %v decoded as %v", created, r.Event.CreatedAt)
		}
		if r.Seq != 7 || r.KeyHash != 99 || r.Partition != 5 || r.Attempts != 0 || r.Event.Topic != "orders" ||
			r.Event.AggregateID != "o-1" || string(r.Event.Payload) != `{"total":42}` || r.Event.Headers["trace"] != "abc" {
			t.Errorf("decoded %+v", r)
		}
	}
	r, _, err := d.insert(insertBody(testRelationID, testTuple(time.Now(), `{}`)))
	if err != nil || r.Event.Headers != nil {
		t.Errorf("empty headers: %v, %v", r.Event.Headers, err)
	}
}

func TestInsertRefusesBadColumnsByName(t *testing.T) {
	d := testDecoder(t)
	cases := []struct {
		name   string
		change func([]tupleColumn)
		want   string
	}{
		{"headers not an object", func(v []tupleColumn) { v[1+colHeaders].data = []byte("\x015") }, "headers"},
		{"headers of another jsonb version", func(v []tupleColumn) { v[1+colHeaders].data = []byte("\x02{}") }, `"headers"`},
		{"topic NULL", func(v []tupleColumn) { v[1+colTopic] = tupleColumn{kind: 'n'} }, `"topic" of public.outbox: NULL`},
		{"payload unchanged TOAST", func(v []tupleColumn) { v[1+colPayload] = tupleColumn{kind: 'u'} }, `"payload" of public.outbox: an unchanged TOAST`},
		{"seq in text", func(v []tupleColumn) { v[1+colSeq] = tupleColumn{kind: 't', data: []byte("7")} }, `"seq" of public.outbox: in text format`},
		{"uuid short", func(v []tupleColumn) { v[1+colEventID].data = v[1+colEventID].data[:15] }, `"event_id" of public.outbox: 15 bytes, want 16`},
		{"infinite created_at", func(v []tupleColumn) {
			v[1+colCreatedAt].data = []byte{0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
		}, `"created_at" of public.outbox: an infinite timestamp`},
	}
	for _, c := range cases {
		values := testTuple(time.Now(), `{"a": "b"}`)
		c.change(values)
		if _, _, err := d.insert(insertBody(testRelationID, values)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %s", c.name, err, c.want)
		}
	}
	// A column the relay does not read may come in any format, even as NULL.
	values := testTuple(time.Now(), `{}`)
	values[0] = tupleColumn{kind: 'n'}
	if _, ok, err := d.insert(insertBody(testRelationID, values)); err != nil || !ok {
		t.Errorf("a NULL in a column the relay does not read: ok %v, %v", ok, err)
	}
}
