package schema

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/big"

	"github.com/hamba/avro/v2"
)

// avroCodec encodes with a registered Avro schema: straight from the JSON to Avro's binary
// encoding (avrodirect.go) and, for a payload that path leaves alone (one that does not fit, or
// holds what it does not take), with github.com/hamba/avro/v2, the JSON payload converted guided
// by the schema (avrojson.go), which words the errors.
type avroCodec struct {
	schema avro.Schema
	direct avroDirect
}

// newAvroCodec parses text after the schemas it references, in one cache, so that it can name
// their types.
func newAvroCodec(text string, refs []reference) (codec, error) {
	cache := &avro.SchemaCache{}
	for _, r := range refs {
		if _, err := avro.ParseWithCache(r.text, "", cache); err != nil {
			return nil, fmt.Errorf("referenced schema %q: %w", r.name, err)
		}
	}
	parsed, err := avro.ParseWithCache(text, "", cache)
	if err != nil {
		return nil, err
	}
	return avroCodec{schema: parsed, direct: newAvroDirect(parsed)}, nil
}

func (c avroCodec) encode(payload []byte, _ string) ([]int, []byte, *mismatch) {
	if body, ok := c.direct.encode(payload); ok {
		return nil, body, nil
	}
	return c.encodeGeneric(payload)
}

// appendFramed writes the wire format's header (magic byte, schema id) and the payload's
// encoding by the direct path in one buffer.
func (c avroCodec) appendFramed(id int, payload []byte, _ string) ([]byte, bool) {
	buf := make([]byte, 5, 5+len(payload)+16)
	binary.BigEndian.PutUint32(buf[1:], uint32(id))
	return c.direct.appendEncode(buf, payload)
}

// encodeGeneric encodes through a generic value and hamba/avro.
func (c avroCodec) encodeGeneric(payload []byte) ([]int, []byte, *mismatch) {
	decoded, m := decodeJSON(payload)
	if m == nil {
		decoded, m = toAvro(c.schema, decoded, "$")
	}
	if m != nil {
		return nil, nil, m
	}
	body, err := avro.Marshal(c.schema, decoded)
	if err != nil {
		return nil, nil, &mismatch{"$", err.Error()}
	}
	return nil, body, nil
}

func (c avroCodec) decode(body []byte) ([]byte, *mismatch) {
	var v any
	if err := avro.Unmarshal(c.schema, body, &v); err != nil {
		return nil, &mismatch{"$", "not Avro of this schema: " + err.Error()}
	}
	out, err := json.Marshal(fromAvro(c.schema, v))
	if err != nil {
		return nil, &mismatch{"$", "no JSON for the decoded record: " + err.Error()}
	}
	return out, nil
}

// fromAvro turns what hamba/avro decodes into `any` into the JSON value toAvro reads: a union's
// complex or named branch, which hamba/avro wraps in a one-key map naming the branch, unwrapped;
// bytes as a string.
func fromAvro(s avro.Schema, v any) any {
	switch s := s.(type) {
	case *avro.RefSchema:
		return fromAvro(s.Schema(), v)
	case *avro.RecordSchema:
		obj, ok := v.(map[string]any)
		if !ok {
			return v
		}
		out := make(map[string]any, len(obj))
		for _, f := range s.Fields() {
			if val, ok := obj[f.Name()]; ok {
				out[f.Name()] = fromAvro(f.Type(), val)
			}
		}
		return out
	case *avro.ArraySchema:
		items, ok := v.([]any)
		if !ok {
			return v
		}
		out := make([]any, len(items))
		for i, item := range items {
			out[i] = fromAvro(s.Items(), item)
		}
		return out
	case *avro.MapSchema:
		obj, ok := v.(map[string]any)
		if !ok {
			return v
		}
		out := make(map[string]any, len(obj))
		for k, item := range obj {
			out[k] = fromAvro(s.Values(), item)
		}
		return out
	case *avro.UnionSchema:
		if obj, ok := v.(map[string]any); ok && len(obj) == 1 {
			for _, branch := range s.Types() {
				if _, primitive := branch.(*avro.PrimitiveSchema); primitive {
					continue
				}
				if val, ok := obj[branchName(branch)]; ok {
					return fromAvro(branch, val)
				}
			}
		}
		for _, branch := range s.Types() { // a logical type's value comes unwrapped
			if p, ok := branch.(*avro.PrimitiveSchema); ok && p.Logical() != nil && logicalValue(v) {
				return logicalFromAvro(p, v)
			}
		}
	}
	if p, ok := s.(*avro.PrimitiveSchema); ok && p.Logical() != nil {
		return logicalFromAvro(p, v)
	}
	if f, ok := s.(*avro.FixedSchema); ok {
		if d, ok := f.Logical().(*avro.DecimalLogicalSchema); ok {
			if r, ok := v.(*big.Rat); ok {
				return json.Number(r.FloatString(d.Scale()))
			}
		}
		if d, ok := v.(avro.LogicalDuration); ok {
			return durationFromAvro(d)
		}
		return fixedFromAvro(v)
	}
	if b, ok := v.([]byte); ok {
		return string(b)
	}
	return v
}
