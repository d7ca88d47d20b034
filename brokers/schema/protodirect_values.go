package schema

import (
	"encoding/json"
	"math"
	"strconv"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// protoMember appends the field of one member; JSON null is the field's default (nothing), as
// in toProto, except for a singular google.protobuf.Value.
func protoMember(s *jsonScanner, f *protoField, buf []byte) ([]byte, error) {
	if s.ws() == 'n' && !nullIsAValue(f.fd) {
		return buf, s.expect(s.literal("null"))
	}
	switch {
	case f.isMap:
		return protoMap(s, f, buf)
	case f.list:
		return protoList(s, f, buf)
	case f.msg != nil:
		return protoSubMessage(s, f.msg, protowire.AppendTag(buf, f.num, protowire.BytesType))
	}
	return protoScalar(s, f, buf, true, !f.presence)
}

// protoSubMessage appends a message's length and encoding.
func protoSubMessage(s *jsonScanner, m *protoMsg, buf []byte) ([]byte, error) {
	lenPos := len(buf)
	buf = append(buf, 0)
	var err error
	if m.wellKnown {
		buf, err = protoWellKnown(s, m, buf)
	} else {
		buf, err = protoMessage(s, m, buf)
	}
	if err != nil {
		return buf, err
	}
	return fixLength(buf, lenPos), nil
}

// fixLength writes the length of what follows the one byte reserved at lenPos into it, moving
// the bytes along when the length needs more than one.
func fixLength(buf []byte, lenPos int) []byte {
	n := len(buf) - lenPos - 1
	if n < 0x80 {
		buf[lenPos] = byte(n)
		return buf
	}
	size := protowire.SizeVarint(uint64(n))
	end := len(buf)
	buf = append(buf, make([]byte, size-1)...)
	copy(buf[lenPos+size:], buf[lenPos+1:end])
	protowire.AppendVarint(buf[:lenPos], uint64(n))
	return buf
}

// protoWellKnown reads a well-known type's own JSON form with protojson, as wellKnownToProto does.
func protoWellKnown(s *jsonScanner, m *protoMsg, buf []byte) ([]byte, error) {
	start, end, err := s.skip()
	if err != nil {
		return buf, errGiveUp
	}
	msg := dynamicpb.NewMessage(m.md)
	if err := protojson.Unmarshal(s.data[start:end], msg); err != nil {
		return buf, errGiveUp
	}
	if buf, err = (proto.MarshalOptions{Deterministic: true}).MarshalAppend(buf, msg); err != nil {
		return buf, errGiveUp
	}
	return buf, nil
}

// protoList appends a repeated field: packed scalars in one record, else one record per element.
func protoList(s *jsonScanner, f *protoField, buf []byte) ([]byte, error) {
	if !s.consume('[') {
		return buf, errGiveUp
	}
	if f.packed {
		tagPos := len(buf)
		buf = append(protowire.AppendTag(buf, f.num, protowire.BytesType), 0)
		lenPos, count := len(buf)-1, 0
		err := s.elements(func() error {
			var err error
			count++
			buf, err = protoScalar(s, f, buf, false, false)
			return err
		})
		if err != nil || count == 0 {
			return buf[:tagPos], err
		}
		return fixLength(buf, lenPos), nil
	}
	err := s.elements(func() error {
		var err error
		if f.msg != nil {
			buf, err = protoSubMessage(s, f.msg, protowire.AppendTag(buf, f.num, protowire.BytesType))
		} else {
			buf, err = protoScalar(s, f, buf, true, false)
		}
		return err
	})
	return buf, err
}

// wireInteger is the wire value of a signed integer of kind.
func wireInteger(kind protoreflect.Kind, i int64) uint64 {
	switch kind {
	case protoreflect.Sint32Kind, protoreflect.Sint64Kind:
		return protowire.EncodeZigZag(i)
	case protoreflect.Sfixed32Kind:
		return uint64(uint32(int32(i)))
	}
	return uint64(i)
}

// appendProtoNumber appends a scalar of a fixed or varint kind, given as its wire value.
func appendProtoNumber(buf []byte, f *protoField, v uint64, tagged bool) []byte {
	switch f.kind {
	case protoreflect.Fixed32Kind, protoreflect.Sfixed32Kind, protoreflect.FloatKind:
		if tagged {
			buf = protowire.AppendTag(buf, f.num, protowire.Fixed32Type)
		}
		return protowire.AppendFixed32(buf, uint32(v))
	case protoreflect.Fixed64Kind, protoreflect.Sfixed64Kind, protoreflect.DoubleKind:
		if tagged {
			buf = protowire.AppendTag(buf, f.num, protowire.Fixed64Type)
		}
		return protowire.AppendFixed64(buf, v)
	}
	if tagged {
		buf = protowire.AppendTag(buf, f.num, protowire.VarintType)
	}
	return protowire.AppendVarint(buf, v)
}

// protoScalar appends the scalar at s, with the conversions of protoValue; skipZero leaves out a
// zero value (a proto3 field without presence).
func protoScalar(s *jsonScanner, f *protoField, buf []byte, tagged, skipZero bool) ([]byte, error) {
	c := s.ws()
	switch f.kind {
	case protoreflect.StringKind, protoreflect.BytesKind:
		if c != '"' {
			return buf, errGiveUp
		}
		raw, escaped, err := s.str()
		if err != nil {
			return buf, errGiveUp
		}
		if escaped || f.kind == protoreflect.BytesKind {
			s.pos -= len(raw) + 2
			text, err := s.text()
			if err != nil {
				return buf, errGiveUp
			}
			if raw = []byte(text); f.kind == protoreflect.BytesKind {
				if raw, err = decodeBase64(text); err != nil {
					return buf, errGiveUp
				}
			}
		}
		if skipZero && len(raw) == 0 {
			return buf, nil
		}
		if tagged {
			buf = protowire.AppendTag(buf, f.num, protowire.BytesType)
		}
		return protowire.AppendBytes(buf, raw), nil
	}
	v, err := protoNumber(s, f, c)
	if err != nil || (skipZero && v == 0) {
		return buf, err
	}
	return appendProtoNumber(buf, f, v, tagged), nil
}

// protoNumber reads a boolean, an enum, a float or an integer and returns its wire value.
func protoNumber(s *jsonScanner, f *protoField, c byte) (uint64, error) {
	isNumber := c == '-' || (c >= '0' && c <= '9')
	switch f.kind {
	case protoreflect.BoolKind:
		switch {
		case c == 't' && s.literal("true"):
			return 1, nil
		case c == 'f' && s.literal("false"):
			return 0, nil
		}
		return 0, errGiveUp
	case protoreflect.EnumKind:
		if c == '"' {
			raw, escaped, err := s.str()
			n, ok := f.enum[string(raw)]
			if err != nil || escaped || !ok {
				return 0, errGiveUp
			}
			return uint64(int64(n)), nil
		}
		text, err := s.number()
		if err != nil {
			return 0, errGiveUp
		}
		v, m := enumValue(f.fd.Enum(), json.Number(text), "$")
		if m != nil {
			return 0, errGiveUp
		}
		return uint64(int64(v.Enum())), nil
	case protoreflect.FloatKind, protoreflect.DoubleKind:
		return protoFloat(s, f, c, isNumber)
	}
	var text []byte
	var err error
	switch {
	case isNumber:
		text, err = s.number()
	case c == '"':
		var escaped bool
		if text, escaped, err = s.str(); escaped {
			err = errGiveUp
		}
	default:
		err = errGiveUp
	}
	if err != nil {
		return 0, errGiveUp
	}
	return protoInteger(f.kind, text)
}

func protoFloat(s *jsonScanner, f *protoField, c byte, isNumber bool) (uint64, error) {
	var v float64
	switch {
	case isNumber:
		text, err := s.number()
		if err != nil {
			return 0, errGiveUp
		}
		if v, err = strconv.ParseFloat(transient(text), 64); err != nil {
			return 0, errGiveUp
		}
	case c == '"':
		text, err := s.text()
		if err != nil {
			return 0, errGiveUp
		}
		val, m := floatValue(f.kind, text, "$")
		if m != nil {
			return 0, errGiveUp
		}
		v = val.Float()
	default:
		return 0, errGiveUp
	}
	if f.kind == protoreflect.DoubleKind {
		return math.Float64bits(v), nil
	}
	if !math.IsInf(v, 0) && !math.IsNaN(v) && math.Abs(v) > math.MaxFloat32 {
		return 0, errGiveUp
	}
	return uint64(math.Float32bits(float32(v))), nil
}

// protoInteger parses text as integerValue does and returns the wire value.
func protoInteger(kind protoreflect.Kind, text []byte) (uint64, error) {
	switch kind {
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind, protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		bits := 64
		if kind == protoreflect.Uint32Kind || kind == protoreflect.Fixed32Kind {
			bits = 32
		}
		n, err := strconv.ParseUint(transient(text), 10, bits)
		if err != nil {
			return 0, errGiveUp
		}
		return n, nil
	}
	i, ok := parseInteger(text)
	if !ok {
		return 0, errGiveUp
	}
	switch kind {
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		if i < math.MinInt32 || i > math.MaxInt32 {
			return 0, errGiveUp
		}
	}
	return wireInteger(kind, i), nil
}
