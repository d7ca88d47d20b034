package schema

import (
	"errors"

	"github.com/hamba/avro/v2"
)

// The direct Avro encoder reads the writer's JSON token by token and writes Avro's binary
// encoding as it goes, with a program compiled once per schema: no generic map of the payload,
// no reflection. It writes exactly the bytes hamba/avro writes for the converted value (blocks of
// 100 items with their byte size, a missing field's default), except for the order of a map's
// entries, which hamba/avro takes from Go's random map order and this encoder from the JSON.
//
// It only ever succeeds on a payload the generic path (avrojson.go, then hamba/avro) encodes the
// same way. Anything else, a payload that does not fit included, it gives up on, and the codec
// runs the generic path, which words the error: field paths and reasons stay those of one place.

// avroKind is what an avroNode encodes.
type avroKind uint8

const (
	avroNull avroKind = iota
	avroBoolean
	avroInt
	avroLong
	avroFloat
	avroDouble
	avroString
	avroBytes
	avroEnum
	avroRecord
	avroArray
	avroMap
	avroUnion
	avroLogical // a logical type on int, long or string, converted by logicalToAvro
	avroGeneric // decimal, fixed, anything rare: converted by toAvro, encoded by hamba/avro
)

// avroNode is the compiled form of one schema.
type avroNode struct {
	kind   avroKind
	schema avro.Schema
	// fields of a record; index names a record's fields or an enum's symbols by position.
	fields []avroField
	index  map[string]int
	// items of an array, values of a map.
	items *avroNode
	// branches of a union (nil for a null branch), and the position of its first null branch
	// (-1: none).
	branches []*avroNode
	null     int
}

// avroField is a record's field: its node and, when it has a default, the default's encoding.
type avroField struct {
	node       *avroNode
	hasDefault bool
	// def is the default's encoding; defErr says hamba/avro cannot encode the default.
	def    []byte
	defErr bool
}

// Reasons the direct encoder stops. errNoFit: the value does not fit the node (a union then
// tries its next branch); errOutOfOrder: a record's fields are not in schema order (it reads
// them again by position); errGiveUp: anything else (the generic path decides).
var (
	errNoFit      = errors.New("does not fit")
	errOutOfOrder = errors.New("fields out of order")
	errGiveUp     = errors.New("left to the generic path")
)

// avroBlockLength is the number of items hamba/avro writes in one block of an array or a map.
const avroBlockLength = 100

// compileAvro compiles s; records are compiled once, so that recursive schemas terminate.
func compileAvro(s avro.Schema, records map[*avro.RecordSchema]*avroNode) *avroNode {
	switch s := s.(type) {
	case *avro.RefSchema:
		return compileAvro(s.Schema(), records)
	case *avro.RecordSchema:
		if n, ok := records[s]; ok {
			return n
		}
		n := &avroNode{kind: avroRecord, schema: s, index: map[string]int{}}
		records[s] = n
		for i, f := range s.Fields() {
			n.index[f.Name()] = i
			n.fields = append(n.fields, compileField(f, records))
		}
		return n
	case *avro.ArraySchema:
		return &avroNode{kind: avroArray, schema: s, items: compileAvro(s.Items(), records)}
	case *avro.MapSchema:
		return &avroNode{kind: avroMap, schema: s, items: compileAvro(s.Values(), records)}
	case *avro.UnionSchema:
		n := &avroNode{kind: avroUnion, schema: s, null: -1}
		for i, t := range s.Types() {
			if t.Type() == avro.Null { // no value but null takes this branch: nil
				if n.null < 0 {
					n.null = i
				}
				n.branches = append(n.branches, nil)
				continue
			}
			n.branches = append(n.branches, compileAvro(t, records))
		}
		return n
	case *avro.EnumSchema:
		n := &avroNode{kind: avroEnum, schema: s, index: map[string]int{}}
		for i, sym := range s.Symbols() {
			if _, dup := n.index[sym]; !dup {
				n.index[sym] = i
			}
		}
		return n
	case *avro.PrimitiveSchema:
		return compilePrimitive(s)
	}
	return &avroNode{kind: avroGeneric, schema: s}
}

func compilePrimitive(s *avro.PrimitiveSchema) *avroNode {
	if l := s.Logical(); l != nil {
		switch {
		case l.Type() == avro.Decimal:
			return &avroNode{kind: avroGeneric, schema: s}
		case s.Type() == avro.Int || s.Type() == avro.Long || s.Type() == avro.String:
			return &avroNode{kind: avroLogical, schema: s}
		}
		return &avroNode{kind: avroGeneric, schema: s}
	}
	kinds := map[avro.Type]avroKind{avro.Null: avroNull, avro.Boolean: avroBoolean, avro.Int: avroInt,
		avro.Long: avroLong, avro.Float: avroFloat, avro.Double: avroDouble, avro.String: avroString, avro.Bytes: avroBytes}
	if k, ok := kinds[s.Type()]; ok {
		return &avroNode{kind: k, schema: s}
	}
	return &avroNode{kind: avroGeneric, schema: s}
}

// compileField compiles a record field and encodes its default the way hamba/avro does for a
// field missing from a map: a union's default as its first branch, a null default as nothing.
func compileField(f *avro.Field, records map[*avro.RecordSchema]*avroNode) avroField {
	out := avroField{node: compileAvro(f.Type(), records), hasDefault: f.HasDefault()}
	if !f.HasDefault() {
		return out
	}
	def := f.Default()
	switch {
	case f.Type().Type() == avro.Union:
		def = map[string]any{string(f.Type().(*avro.UnionSchema).Types()[0].Type()): def}
	case def == nil:
		return out
	}
	b, err := avro.Marshal(f.Type(), def)
	out.def, out.defErr = b, err != nil
	return out
}

// avroDirect encodes JSON payloads with one compiled schema.
type avroDirect struct{ root *avroNode }

func newAvroDirect(s avro.Schema) avroDirect {
	return avroDirect{root: compileAvro(s, map[*avro.RecordSchema]*avroNode{})}
}

// encode returns payload's Avro encoding, or false when the generic path must decide.
func (d avroDirect) encode(payload []byte) ([]byte, bool) {
	return d.appendEncode(make([]byte, 0, len(payload)+16), payload)
}

// appendEncode appends payload's Avro encoding to buf.
func (d avroDirect) appendEncode(buf, payload []byte) ([]byte, bool) {
	s := jsonScanner{data: payload}
	buf, err := avroValue(&s, d.root, buf)
	if err != nil || !s.atEnd() {
		return nil, false
	}
	return buf, true
}

// avroValue appends the encoding of the JSON value at s for n.
func avroValue(s *jsonScanner, n *avroNode, buf []byte) ([]byte, error) {
	switch n.kind {
	case avroRecord:
		return avroRecordValue(s, n, buf)
	case avroArray:
		return avroArrayValue(s, n, buf)
	case avroMap:
		return avroMapValue(s, n, buf)
	case avroUnion:
		return avroUnionValue(s, n, buf)
	case avroLogical:
		return avroLogicalValue(s, n, buf)
	case avroGeneric:
		return avroGenericValue(s, n, buf)
	}
	return avroScalar(s, n, buf)
}

// avroRecordValue writes a record's fields in schema order: straight from the JSON while its
// members come in that order, else from where each member was found.
func avroRecordValue(s *jsonScanner, n *avroNode, buf []byte) ([]byte, error) {
	if !s.consume('{') {
		return buf, errNoFit
	}
	start, bufStart := s.pos, len(buf)
	next := 0
	err := s.members(func(name []byte, escaped bool) error {
		i, ok := n.index[string(name)]
		switch {
		case escaped:
			return errOutOfOrder
		case !ok:
			return errNoFit
		case i != next:
			return errOutOfOrder
		}
		var err error
		buf, err = avroValue(s, n.fields[i].node, buf)
		next++
		return err
	})
	if errors.Is(err, errOutOfOrder) {
		s.pos = start
		return avroRecordByPosition(s, n, buf[:bufStart])
	}
	if err != nil {
		return buf, err
	}
	for _, f := range n.fields[next:] {
		if buf, err = avroDefault(f, buf); err != nil {
			return buf, err
		}
	}
	return buf, nil
}

// avroRecordByPosition reads a record's members (its '{' read), noting where each value is, and
// then writes the fields in schema order.
func avroRecordByPosition(s *jsonScanner, n *avroNode, buf []byte) ([]byte, error) {
	spans := make([]int, len(n.fields))
	err := s.members(func(name []byte, escaped bool) error {
		i, ok := n.index[string(name)]
		if escaped {
			key, err := unquoteName(name, escaped)
			if err != nil {
				return errGiveUp
			}
			i, ok = n.index[key]
		}
		if !ok {
			return errNoFit
		}
		if spans[i] != 0 {
			return errGiveUp // a member named twice: encoding/json keeps the last, leave it the case
		}
		start, _, err := s.skip()
		spans[i] = start + 1
		return err
	})
	if err != nil {
		return buf, err
	}
	end := s.pos
	for i, f := range n.fields {
		if spans[i] == 0 {
			buf, err = avroDefault(f, buf)
		} else {
			s.pos = spans[i] - 1
			buf, err = avroValue(s, f.node, buf)
		}
		if err != nil {
			return buf, err
		}
	}
	s.pos = end
	return buf, nil
}

// avroDefault writes the default of a field missing from the JSON.
func avroDefault(f avroField, buf []byte) ([]byte, error) {
	switch {
	case !f.hasDefault:
		return buf, errNoFit
	case f.defErr:
		return buf, errGiveUp
	}
	return append(buf, f.def...), nil
}

func avroArrayValue(s *jsonScanner, n *avroNode, buf []byte) ([]byte, error) {
	if !s.consume('[') {
		return buf, errNoFit
	}
	count, block := 0, len(buf)
	err := s.elements(func() error {
		var err error
		if buf, err = avroValue(s, n.items, buf); err != nil {
			return err
		}
		if count++; count == avroBlockLength {
			buf = closeBlock(buf, block, count)
			count, block = 0, len(buf)
		}
		return nil
	})
	if err != nil {
		return buf, err
	}
	if count > 0 {
		buf = closeBlock(buf, block, count)
	}
	return append(buf, 0), nil
}

func avroMapValue(s *jsonScanner, n *avroNode, buf []byte) ([]byte, error) {
	if !s.consume('{') {
		return buf, errNoFit
	}
	count, block := 0, len(buf)
	var keys keySet
	err := s.members(func(name []byte, escaped bool) error {
		if escaped {
			key, err := unquoteName(name, escaped)
			if err != nil {
				return errGiveUp
			}
			name = []byte(key)
		}
		if !keys.add(name) {
			return errGiveUp // a key named twice: a Go map keeps the last, leave it the generic path
		}
		buf = appendAvroLong(buf, int64(len(name)))
		buf = append(buf, name...)
		var err error
		if buf, err = avroValue(s, n.items, buf); err != nil {
			return err
		}
		if count++; count == avroBlockLength {
			buf = closeBlock(buf, block, count)
			count, block = 0, len(buf)
		}
		return nil
	})
	if err != nil {
		return buf, err
	}
	if count > 0 {
		buf = closeBlock(buf, block, count)
	}
	return append(buf, 0), nil
}
