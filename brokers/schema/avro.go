package schema

import "github.com/hamba/avro/v2"

// avroCodec encodes with a registered Avro schema (github.com/hamba/avro/v2), the JSON payload
// converted guided by the schema (avrojson.go).
type avroCodec struct{ schema avro.Schema }

func newAvroCodec(text string) (codec, error) {
	parsed, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		return nil, err
	}
	return avroCodec{schema: parsed}, nil
}

func (c avroCodec) encode(payload []byte, _ string) ([]int, []byte, *mismatch) {
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
