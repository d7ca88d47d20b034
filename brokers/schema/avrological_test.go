package schema

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

const logicalSchema = `{"type":"record","name":"Logical","namespace":"outboxkit.test","fields":[
 {"name":"day","type":{"type":"int","logicalType":"date"}},
 {"name":"at","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"at_us","type":{"type":"long","logicalType":"timestamp-micros"}},
 {"name":"local","type":{"type":"long","logicalType":"local-timestamp-millis"}},
 {"name":"opens","type":{"type":"int","logicalType":"time-millis"}},
 {"name":"id","type":{"type":"string","logicalType":"uuid"}},
 {"name":"price","type":{"type":"bytes","logicalType":"decimal","precision":9,"scale":2}},
 {"name":"maybe","type":["null",{"type":"long","logicalType":"timestamp-millis"}],"default":null}
]}`

// TestAvroLogicalTypesRoundTrip: dates, times, timestamps, uuids and decimals are read from their
// JSON strings (or their underlying integers), encoded, and decoded back to the same strings.
func TestAvroLogicalTypesRoundTrip(t *testing.T) {
	cl, _, topic, _ := registry(t)
	topic += "_logical"
	registerAs(t, cl, Subject(topic), sr.TypeAvro, logicalSchema)
	enc, dec := codecs(t, cl)
	for _, tc := range []struct{ payload, want string }{
		{`{"day":"2026-12-07","at":"2026-12-07T10:00:00.123Z","at_us":"2026-12-07T11:00:00.000001+01:00","local":"2026-12-07T10:00:00",
		   "opens":"08:30:00.5","id":"0b8f1f5e-8a8e-4c39-9a34-3c5d3f0b8e2a","price":12.5,"maybe":"2026-12-07T10:00:00Z"}`,
			`{"day":"2026-12-07","at":"2026-12-07T10:00:00.123Z","at_us":"2026-12-07T10:00:00.000001Z","local":"2026-12-07T10:00:00",
		   "opens":"08:30:00.5","id":"0b8f1f5e-8a8e-4c39-9a34-3c5d3f0b8e2a","price":12.50,"maybe":"2026-12-07T10:00:00Z"}`},
		{`{"day":0,"at":1796637600000,"at_us":0,"local":0,"opens":0,"id":"0b8f1f5e-8a8e-4c39-9a34-3c5d3f0b8e2a","price":"-9999999.99"}`,
			`{"day":"1970-01-01","at":"2026-12-07T10:00:00Z","at_us":"1970-01-01T00:00:00Z","local":"1970-01-01T00:00:00",
		   "opens":"00:00:00","id":"0b8f1f5e-8a8e-4c39-9a34-3c5d3f0b8e2a","price":-9999999.99,"maybe":null}`},
	} {
		framed, err := enc.Encode(context.Background(), topic, []byte(tc.payload))
		if err != nil {
			t.Fatalf("%s: %v", tc.payload, err)
		}
		out, err := dec.Decode(context.Background(), framed)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := decodeNumbers(t, string(out)), decodeNumbers(t, tc.want); !reflect.DeepEqual(normalize(got), normalize(want)) {
			t.Errorf("%s:\n decoded %s\n want    %s", tc.payload, out, tc.want)
		}
	}
}

// TestAvroLogicalTypeMismatches: a value a logical type cannot take names the path and why,
// permanently.
func TestAvroLogicalTypeMismatches(t *testing.T) {
	cl, _, topic, _ := registry(t)
	topic += "_logical"
	registerAs(t, cl, Subject(topic), sr.TypeAvro, logicalSchema)
	enc, err := NewEncoder(cl, Config{})
	if err != nil {
		t.Fatal(err)
	}
	valid := map[string]string{"day": `"2026-12-07"`, "at": `0`, "at_us": `0`, "local": `0`, "opens": `0`,
		"id": `"0b8f1f5e-8a8e-4c39-9a34-3c5d3f0b8e2a"`, "price": `1`}
	with := func(field, value string) string {
		out := "{"
		for _, k := range []string{"day", "at", "at_us", "local", "opens", "id", "price"} {
			v := valid[k]
			if k == field {
				v = value
			}
			out += `"` + k + `":` + v + ","
		}
		return out[:len(out)-1] + "}"
	}
	for _, tc := range []struct{ field, value, reason string }{
		{"day", `"07.12.2026"`, `"07.12.2026" is not a date (want 2006-01-02)`},
		{"at", `"yesterday"`, `"yesterday" is not a timestamp-millis (want 2006-01-02T15:04:05.999999999Z07:00)`},
		{"at", `true`, "want a string or an integer (timestamp-millis), got a boolean"},
		{"opens", `"25:00"`, `"25:00" is not a time of day (want 15:04:05 or 15:04:05.999999)`},
		{"id", `"not-a-uuid"`, `"not-a-uuid" is not a UUID`},
		{"price", `1.234`, "1.234 has more than 2 decimal places (the scale)"},
		{"price", `12345678.9`, "12345678.9 has more than 9 digits (the precision)"},
		{"price", `"1/3"`, `"1/3" is not a decimal number`},
	} {
		_, err := enc.Encode(context.Background(), topic, []byte(with(tc.field, tc.value)))
		var mismatch *MismatchError
		if !errors.As(err, &mismatch) || mismatch.Path != "$."+tc.field || mismatch.Reason != tc.reason || Retriable(err) {
			t.Errorf("%s=%s: %v, want a permanent mismatch at $.%s: %s", tc.field, tc.value, err, tc.field, tc.reason)
		}
	}
}

// TestPythonAvroDeserializerReadsLogicalTypes: confluent-kafka's AvroDeserializer (fastavro)
// reads the logical types the relay encoded from JSON strings as the same instants, dates, times,
// UUIDs and decimals (printed with Python's str).
func TestPythonAvroDeserializerReadsLogicalTypes(t *testing.T) {
	python := pythonEnv(t)
	payload := `{"day":"2026-12-07","at":"2026-12-07T10:00:00.123Z","at_us":"2026-12-07T11:00:00.000001+01:00",
		"local":"2026-12-07T10:00:00","opens":"08:30:00.5","id":"0b8f1f5e-8a8e-4c39-9a34-3c5d3f0b8e2a","price":12.5,
		"maybe":"2026-12-07T10:00:00Z"}`
	brokers, topic, _ := publishThrough(t, sr.TypeAvro, logicalSchema, []string{payload}, []string{""})
	records := readWithPython(t, python, "avro", brokers, topic, 1)
	if len(records) != 1 {
		t.Fatalf("python read %d records, want 1", len(records))
	}
	want := map[string]any{"day": "2026-12-07", "at": "2026-12-07 10:00:00.123000+00:00",
		"at_us": "2026-12-07 10:00:00.000001+00:00", "local": "2026-12-07 10:00:00", "opens": "08:30:00.500000",
		"id": "0b8f1f5e-8a8e-4c39-9a34-3c5d3f0b8e2a", "price": "12.50", "maybe": "2026-12-07 10:00:00+00:00"}
	if !reflect.DeepEqual(records[0].Value, want) {
		t.Errorf("python read\n %v\nwant\n %v", records[0].Value, want)
	}
}

const fixedSchema = `{"type":"record","name":"Fixed","namespace":"outboxkit.test","fields":[
 {"name":"code","type":{"type":"fixed","name":"Code","size":4}},
 {"name":"amount","type":{"type":"fixed","name":"Amount","size":8,"logicalType":"decimal","precision":12,"scale":3}},
 {"name":"alt","type":["null","Code"],"default":null}
]}`

// TestAvroFixedRoundTrip: a fixed takes a string of exactly its size, a fixed decimal a number;
// both decode back; a wrong size or type and a decimal past its scale are permanent mismatches
// naming the path;
// confluent-kafka's AvroDeserializer reads the same bytes and decimal.
func TestAvroFixedRoundTrip(t *testing.T) {
	cl, _, topic, _ := registry(t)
	topic += "_fixed"
	registerAs(t, cl, Subject(topic), sr.TypeAvro, fixedSchema)
	enc, dec := codecs(t, cl)
	payload := `{"code":"ABCD","amount":-1234.5,"alt":"WXYZ"}`
	framed, err := enc.Encode(context.Background(), topic, []byte(payload))
	if err != nil {
		t.Fatal(err)
	}
	out, err := dec.Decode(context.Background(), framed)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"code":"ABCD","amount":-1234.500,"alt":"WXYZ"}`
	if got, w := decodeNumbers(t, string(out)), decodeNumbers(t, want); !reflect.DeepEqual(normalize(got), normalize(w)) {
		t.Errorf("decoded %s, want %s", out, want)
	}
	checkMismatches(t, enc, topic, []mismatchCase{
		{`{"code":"ABC","amount":1}`, "$.code", "3 bytes, fixed outboxkit.test.Code has 4"},
		{`{"code":"ABCD","amount":1,"alt":"TOO LONG"}`, "$.alt", "8 bytes, fixed outboxkit.test.Code has 4"},
		{`{"code":7,"amount":1}`, "$.code", "want a string (fixed outboxkit.test.Code), got a number"},
		{`{"code":"ABCD","amount":0.0001}`, "$.amount", "0.0001 has more than 3 decimal places (the scale)"},
	})
	if python := pythonEnv(t); python != "" {
		brokers, pyTopic, _ := publishThrough(t, sr.TypeAvro, fixedSchema, []string{payload}, []string{""})
		records := readWithPython(t, python, "avro", brokers, pyTopic, 1)
		want := map[string]any{"code": "b'ABCD'", "amount": "-1234.500", "alt": "b'WXYZ'"}
		if len(records) != 1 || !reflect.DeepEqual(records[0].Value, want) {
			t.Errorf("python read %v, want %v", records, want)
		}
	}
}
