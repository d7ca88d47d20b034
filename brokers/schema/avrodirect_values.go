package schema

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"strconv"

	"github.com/hamba/avro/v2"
)

// avroScalar appends a primitive value or an enum's index, with the conversions of
// primitiveToAvro.
func avroScalar(s *jsonScanner, n *avroNode, buf []byte) ([]byte, error) {
	c := s.ws()
	switch n.kind {
	case avroNull:
		if c != 'n' {
			return buf, errNoFit
		}
		return buf, s.expect(s.literal("null"))
	case avroBoolean:
		switch {
		case c == 't' && s.literal("true"):
			return append(buf, 1), nil
		case c == 'f' && s.literal("false"):
			return append(buf, 0), nil
		}
		return buf, errNoFit
	case avroInt, avroLong:
		if c != '-' && (c < '0' || c > '9') {
			return buf, errNoFit
		}
		text, err := s.number()
		if err != nil {
			return buf, errGiveUp
		}
		i, ok := parseInteger(text)
		if !ok || (n.kind == avroInt && (i < math.MinInt32 || i > math.MaxInt32)) {
			return buf, errNoFit
		}
		return appendAvroLong(buf, i), nil
	case avroFloat, avroDouble:
		if c != '-' && (c < '0' || c > '9') {
			return buf, errNoFit
		}
		text, err := s.number()
		if err != nil {
			return buf, errGiveUp
		}
		f, err := strconv.ParseFloat(transient(text), 64)
		if err != nil {
			return buf, errNoFit
		}
		if n.kind == avroFloat {
			return binary.LittleEndian.AppendUint32(buf, math.Float32bits(float32(f))), nil
		}
		return binary.LittleEndian.AppendUint64(buf, math.Float64bits(f)), nil
	case avroString, avroBytes:
		if c != '"' {
			return buf, errNoFit
		}
		return appendJSONString(s, buf)
	case avroEnum:
		if c != '"' {
			return buf, errNoFit
		}
		raw, escaped, err := s.str()
		if err != nil || escaped {
			return buf, errGiveUp
		}
		i, ok := n.index[string(raw)]
		if !ok {
			return buf, errNoFit
		}
		return appendAvroLong(buf, int64(i)), nil
	}
	return buf, errGiveUp
}

// appendJSONString appends the string at s as Avro string or bytes: its length, then its bytes.
func appendJSONString(s *jsonScanner, buf []byte) ([]byte, error) {
	raw, escaped, err := s.str()
	if err != nil {
		return buf, errGiveUp
	}
	if escaped {
		s.pos -= len(raw) + 2
		text, err := s.text()
		if err != nil {
			return buf, errGiveUp
		}
		buf = appendAvroLong(buf, int64(len(text)))
		return append(buf, text...), nil
	}
	buf = appendAvroLong(buf, int64(len(raw)))
	return append(buf, raw...), nil
}

// avroLogicalValue converts a date, time, timestamp or uuid with logicalToAvro and writes the
// underlying int, long or string.
func avroLogicalValue(s *jsonScanner, n *avroNode, buf []byte) ([]byte, error) {
	var v any
	switch c := s.ws(); {
	case c == '"':
		text, err := s.text()
		if err != nil {
			return buf, errGiveUp
		}
		v = text
	case c == '-' || (c >= '0' && c <= '9'):
		text, err := s.number()
		if err != nil {
			return buf, errGiveUp
		}
		v = json.Number(text)
	default:
		return buf, errNoFit
	}
	p := n.schema.(*avro.PrimitiveSchema)
	conv, m := logicalToAvro(p, v, "$")
	if m != nil {
		return buf, errNoFit
	}
	switch x := conv.(type) {
	case int32:
		if p.Type() == avro.Int {
			return appendAvroLong(buf, int64(x)), nil
		}
	case int64:
		if p.Type() == avro.Long {
			return appendAvroLong(buf, x), nil
		}
	case string:
		if p.Type() == avro.String {
			buf = appendAvroLong(buf, int64(len(x)))
			return append(buf, x...), nil
		}
	}
	return buf, errGiveUp // what hamba/avro would make of it is for the generic path to find out
}

// avroGenericValue converts the value with toAvro and encodes it with hamba/avro: the path of
// decimals, fixed and the rare types.
func avroGenericValue(s *jsonScanner, n *avroNode, buf []byte) ([]byte, error) {
	start, end, err := s.skip()
	if err != nil {
		return buf, errGiveUp
	}
	v, m := decodeJSON(s.data[start:end])
	if m != nil {
		return buf, errGiveUp
	}
	conv, m := toAvro(n.schema, v, "$")
	if m != nil {
		return buf, errNoFit
	}
	b, err := avro.Marshal(n.schema, conv)
	if err != nil {
		return buf, errGiveUp
	}
	return append(buf, b...), nil
}

// appendAvroLong appends i zig-zag encoded as a variable-length integer (Avro int and long).
func appendAvroLong(buf []byte, i int64) []byte {
	return binary.AppendUvarint(buf, uint64(i<<1)^uint64(i>>63))
}

// parseInteger parses a JSON number's text as strconv.ParseInt(text, 10, 64) does, without
// allocating for the common short integers.
func parseInteger(text []byte) (int64, bool) {
	digits := text
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 18 {
		i, err := strconv.ParseInt(transient(text), 10, 64)
		return i, err == nil
	}
	var n int64
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if len(digits) < len(text) {
		n = -n
	}
	return n, true
}

// keySet tells whether a map's keys repeat, without allocating for small maps.
type keySet struct {
	small [16][]byte
	n     int
	large map[string]struct{}
}

// add reports whether key is new.
func (k *keySet) add(key []byte) bool {
	if k.large != nil {
		if _, dup := k.large[string(key)]; dup {
			return false
		}
		k.large[string(key)] = struct{}{}
		return true
	}
	for _, seen := range k.small[:k.n] {
		if bytes.Equal(seen, key) {
			return false
		}
	}
	if k.n < len(k.small) {
		k.small[k.n] = key
		k.n++
		return true
	}
	k.large = make(map[string]struct{}, 2*len(k.small))
	for _, seen := range k.small {
		k.large[string(seen)] = struct{}{}
	}
	k.large[string(key)] = struct{}{}
	return true
}

// closeBlock puts the header of the block of count items written from start in front of them:
// the negated count and the block's size in bytes, as hamba/avro writes it (just the count when
// the items take no bytes).
func closeBlock(buf []byte, start, count int) []byte {
	var header [20]byte
	size := len(buf) - start
	h := header[:0]
	if size > 0 {
		h = appendAvroLong(appendAvroLong(h, -int64(count)), int64(size))
	} else {
		h = appendAvroLong(h, int64(count))
	}
	buf = append(buf, h...)
	copy(buf[start+len(h):], buf[start:start+size])
	copy(buf[start:], h)
	return buf
}

// avroUnionValue writes the index of the first branch the value fits and the value in it: the
// null branch for null, else the first other branch that takes it, as unionToAvro chooses.
func avroUnionValue(s *jsonScanner, n *avroNode, buf []byte) ([]byte, error) {
	if s.ws() == 'n' {
		if !s.literal("null") {
			return buf, errGiveUp
		}
		if n.null < 0 {
			return buf, errNoFit
		}
		return appendAvroLong(buf, int64(n.null)), nil
	}
	start, bufStart := s.pos, len(buf)
	for i, b := range n.branches {
		if b == nil {
			continue
		}
		s.pos = start
		out, err := avroValue(s, b, appendAvroLong(buf[:bufStart], int64(i)))
		if err == nil {
			return out, nil
		}
		if !errors.Is(err, errNoFit) {
			return out, err
		}
	}
	return buf[:bufStart], errNoFit
}
