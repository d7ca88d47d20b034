package schema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"

	"github.com/hamba/avro/v2"
)

// mismatch is a payload that does not fit at path, before the subject is known.
type mismatch struct{ path, reason string }

// decodeJSON parses payload keeping numbers exact (json.Number), so that a long keeps all its
// digits.
func decodeJSON(payload []byte) (any, *mismatch) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &mismatch{"$", "not JSON: " + err.Error()}
	}
	if dec.More() {
		return nil, &mismatch{"$", "more than one JSON value"}
	}
	return v, nil
}

// toAvro converts a decoded JSON value to the Go value hamba/avro encodes for s: maps for
// records and maps, []any for arrays, int32/int64/float32/float64 for numbers, a one-key map
// for a union branch. Fields missing from a record take their schema default.
func toAvro(s avro.Schema, v any, path string) (any, *mismatch) {
	switch s := s.(type) {
	case *avro.RefSchema:
		return toAvro(s.Schema(), v, path)
	case *avro.RecordSchema:
		return recordToAvro(s, v, path)
	case *avro.ArraySchema:
		items, ok := v.([]any)
		if !ok {
			return nil, &mismatch{path, "want an array, got " + jsonKind(v)}
		}
		out := make([]any, len(items))
		for i, item := range items {
			conv, m := toAvro(s.Items(), item, path+"["+strconv.Itoa(i)+"]")
			if m != nil {
				return nil, m
			}
			out[i] = conv
		}
		return out, nil
	case *avro.MapSchema:
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, &mismatch{path, "want an object (Avro map), got " + jsonKind(v)}
		}
		out := make(map[string]any, len(obj))
		for k, item := range obj {
			conv, m := toAvro(s.Values(), item, path+"."+k)
			if m != nil {
				return nil, m
			}
			out[k] = conv
		}
		return out, nil
	case *avro.UnionSchema:
		return unionToAvro(s, v, path)
	case *avro.EnumSchema:
		str, ok := v.(string)
		if !ok {
			return nil, &mismatch{path, "want a string (enum " + s.FullName() + "), got " + jsonKind(v)}
		}
		for _, sym := range s.Symbols() {
			if sym == str {
				return str, nil
			}
		}
		return nil, &mismatch{path, fmt.Sprintf("%q is not a symbol of enum %s", str, s.FullName())}
	case *avro.PrimitiveSchema:
		return primitiveToAvro(s, v, path)
	case *avro.FixedSchema:
		return fixedToAvro(s, v, path)
	default:
		return nil, &mismatch{path, "Avro type " + string(s.Type()) + " is not supported yet"}
	}
}

func recordToAvro(s *avro.RecordSchema, v any, path string) (any, *mismatch) {
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, &mismatch{path, "want an object (record " + s.FullName() + "), got " + jsonKind(v)}
	}
	out := make(map[string]any, len(s.Fields()))
	known := make(map[string]bool, len(s.Fields()))
	for _, f := range s.Fields() {
		known[f.Name()] = true
		fieldPath := path + "." + f.Name()
		raw, present := obj[f.Name()]
		if !present {
			if f.HasDefault() {
				continue // hamba/avro writes the field's default
			}
			return nil, &mismatch{fieldPath, "required field is missing (it has no default)"}
		}
		conv, m := toAvro(f.Type(), raw, fieldPath)
		if m != nil {
			return nil, m
		}
		out[f.Name()] = conv
	}
	for name := range obj {
		if !known[name] {
			return nil, &mismatch{path + "." + name, "field is not in record " + s.FullName()}
		}
	}
	return out, nil
}

// unionToAvro picks the first branch the value fits: null for JSON null, else the first
// non-null branch that converts. A nullable union (null and one other type) takes the value
// itself; any other union a one-key map naming the branch, as hamba/avro wants.
func unionToAvro(s *avro.UnionSchema, v any, path string) (any, *mismatch) {
	if v == nil {
		if !s.Nullable() && !hasNull(s) {
			return nil, &mismatch{path, "null is not a branch of the union"}
		}
		return nil, nil
	}
	var first *mismatch
	for _, branch := range s.Types() {
		if branch.Type() == avro.Null {
			continue
		}
		conv, m := toAvro(branch, v, path)
		if m != nil {
			if first == nil {
				first = m
			}
			continue
		}
		return map[string]any{branchName(branch): conv}, nil
	}
	if first != nil && len(s.Types()) <= 2 {
		return nil, first // one candidate branch: its own reason is the clearest
	}
	return nil, &mismatch{path, jsonKind(v) + " fits no branch of the union"}
}

func hasNull(s *avro.UnionSchema) bool {
	for _, t := range s.Types() {
		if t.Type() == avro.Null {
			return true
		}
	}
	return false
}

// branchName is the key hamba/avro expects for a union branch: the full name of a named type,
// else the type name.
func branchName(s avro.Schema) string {
	if ref, ok := s.(*avro.RefSchema); ok {
		s = ref.Schema()
	}
	if named, ok := s.(avro.NamedSchema); ok {
		return named.FullName()
	}
	if p, ok := s.(*avro.PrimitiveSchema); ok && p.Logical() != nil {
		return string(s.Type()) + "." + string(p.Logical().Type()) // as in hamba/avro's schemaTypeName
	}
	return string(s.Type())
}

func primitiveToAvro(s *avro.PrimitiveSchema, v any, path string) (any, *mismatch) {
	if s.Logical() != nil {
		return logicalToAvro(s, v, path)
	}
	switch s.Type() {
	case avro.Null:
		if v != nil {
			return nil, &mismatch{path, "want null, got " + jsonKind(v)}
		}
		return nil, nil
	case avro.Boolean:
		b, ok := v.(bool)
		if !ok {
			return nil, &mismatch{path, "want a boolean, got " + jsonKind(v)}
		}
		return b, nil
	case avro.String:
		str, ok := v.(string)
		if !ok {
			return nil, &mismatch{path, "want a string, got " + jsonKind(v)}
		}
		return str, nil
	case avro.Bytes:
		str, ok := v.(string)
		if !ok {
			return nil, &mismatch{path, "want a string (bytes), got " + jsonKind(v)}
		}
		return []byte(str), nil
	case avro.Int, avro.Long:
		return integerToAvro(s.Type(), v, path)
	case avro.Float, avro.Double:
		n, ok := v.(json.Number)
		if !ok {
			return nil, &mismatch{path, "want a number, got " + jsonKind(v)}
		}
		f, err := n.Float64()
		if err != nil {
			return nil, &mismatch{path, fmt.Sprintf("%s is not a %s: %v", n, s.Type(), err)}
		}
		if s.Type() == avro.Float {
			return float32(f), nil
		}
		return f, nil
	default:
		return nil, &mismatch{path, "Avro type " + string(s.Type()) + " is not supported yet"}
	}
}

func integerToAvro(t avro.Type, v any, path string) (any, *mismatch) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, &mismatch{path, "want an integer, got " + jsonKind(v)}
	}
	i, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil {
		return nil, &mismatch{path, fmt.Sprintf("%s is not a %s (an integer in range)", n, t)}
	}
	if t == avro.Int {
		if i < math.MinInt32 || i > math.MaxInt32 {
			return nil, &mismatch{path, fmt.Sprintf("%d is out of the range of an Avro int (32 bits)", i)}
		}
		return int32(i), nil
	}
	return i, nil
}

// jsonKind names the JSON type of a decoded value, for error messages.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	default:
		return fmt.Sprintf("%T", v)
	}
}
