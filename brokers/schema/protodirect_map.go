package schema

import (
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// mapEntry is where one encoded entry of a map field is, and its key.
type mapEntry struct {
	key        protoreflect.Value
	start, end int
}

// protoMap appends a map field's entries, key (field 1) and value (field 2) each, sorted by key
// as the deterministic marshaller sorts them.
func protoMap(s *jsonScanner, f *protoField, buf []byte) ([]byte, error) {
	if !s.consume('{') {
		return buf, errGiveUp
	}
	var entries []mapEntry
	err := s.members(func(name []byte, escaped bool) error {
		text, err := unquoteName(name, escaped)
		if err != nil {
			return errGiveUp
		}
		key, m := protoValue(f.key.fd, nil, mapKeyJSON(f.key.fd, text), "$")
		if m != nil {
			return errGiveUp
		}
		start := len(buf)
		buf = append(protowire.AppendTag(buf, f.num, protowire.BytesType), 0)
		lenPos := len(buf) - 1
		buf = appendProtoKey(buf, f.key, key)
		if f.value.msg != nil {
			buf, err = protoSubMessage(s, f.value.msg, protowire.AppendTag(buf, 2, protowire.BytesType))
		} else {
			buf, err = protoScalar(s, f.value, buf, true, false)
		}
		if err != nil {
			return err
		}
		buf = fixLength(buf, lenPos)
		entries = append(entries, mapEntry{key, start, len(buf)})
		return nil
	})
	if err != nil || len(entries) < 2 {
		return buf, err
	}
	return sortEntries(buf, entries, f.key.kind)
}

// sortEntries puts a map's encoded entries in key order; a key given twice (a number written
// two ways) is left to the generic path.
func sortEntries(buf []byte, entries []mapEntry, kind protoreflect.Kind) ([]byte, error) {
	compare := func(x, y mapEntry) int { return compareKeys(kind, x.key, y.key) }
	sorted := slices.IsSortedFunc(entries, compare)
	if !sorted {
		start := entries[0].start
		encoded := slices.Clone(buf[start:])
		slices.SortFunc(entries, compare)
		buf = buf[:start]
		for _, e := range entries {
			buf = append(buf, encoded[e.start-start:e.end-start]...)
		}
	}
	for i := 1; i < len(entries); i++ {
		if compare(entries[i-1], entries[i]) == 0 {
			return buf, errGiveUp
		}
	}
	return buf, nil
}

// compareKeys orders map keys of kind as protobuf-go's order.GenericKeyOrder does.
func compareKeys(kind protoreflect.Kind, x, y protoreflect.Value) int {
	switch kind {
	case protoreflect.BoolKind:
		return compareBool(x.Bool(), y.Bool())
	case protoreflect.StringKind:
		return cmpInt(x.String(), y.String())
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.Fixed32Kind, protoreflect.Fixed64Kind:
		return cmpInt(x.Uint(), y.Uint())
	}
	return cmpInt(x.Int(), y.Int())
}

func compareBool(x, y bool) int {
	switch {
	case x == y:
		return 0
	case !x:
		return -1
	}
	return 1
}

func cmpInt[T int64 | uint64 | string](x, y T) int {
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// appendProtoKey appends a map key (field 1), converted by protoValue.
func appendProtoKey(buf []byte, f *protoField, key protoreflect.Value) []byte {
	switch f.kind {
	case protoreflect.StringKind:
		return protowire.AppendString(protowire.AppendTag(buf, 1, protowire.BytesType), key.String())
	case protoreflect.BoolKind:
		return appendProtoNumber(buf, f, protowire.EncodeBool(key.Bool()), true)
	case protoreflect.Uint32Kind, protoreflect.Uint64Kind, protoreflect.Fixed32Kind, protoreflect.Fixed64Kind:
		return appendProtoNumber(buf, f, key.Uint(), true)
	}
	return appendProtoNumber(buf, f, wireInteger(f.kind, key.Int()), true)
}
