package schema

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// registerWithRefs registers text of type typ under subject with references and returns its id.
func registerWithRefs(t *testing.T, cl *sr.Client, subject string, typ sr.SchemaType, text string, refs ...sr.SchemaReference) int {
	t.Helper()
	ss, err := cl.CreateSchema(context.Background(), subject, sr.Schema{Schema: text, Type: typ, References: refs})
	if err != nil {
		t.Fatalf("register %s under %s: %v", typ, subject, err)
	}
	return ss.ID
}

// referencedSchemas registers, for one test, a schema of each type that the main schemas
// reference from other subjects: Money in Avro, shop/money.proto, money.json.
func referencedSchemas(t *testing.T, cl *sr.Client) (avroRef, protoRef, jsonRef sr.SchemaReference) {
	t.Helper()
	prefix := testsupport.UniqueName("common")
	registerAs(t, cl, prefix+"-money-avro", sr.TypeAvro,
		`{"type":"record","name":"Money","namespace":"outboxkit.common","fields":[{"name":"cents","type":"long"},{"name":"currency","type":"string"}]}`)
	registerAs(t, cl, prefix+"-money-proto", sr.TypeProtobuf,
		"syntax = \"proto3\";\npackage outboxkit.common;\nmessage Money { int64 cents = 1; string currency = 2; }\n")
	registerAs(t, cl, prefix+"-money-json", sr.TypeJSON,
		`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","required":["cents"],"properties":{"cents":{"type":"integer"},"currency":{"type":"string"}}}`)
	return sr.SchemaReference{Name: "outboxkit.common.Money", Subject: prefix + "-money-avro", Version: 1},
		sr.SchemaReference{Name: "shop/money.proto", Subject: prefix + "-money-proto", Version: 1},
		sr.SchemaReference{Name: "money.json", Subject: prefix + "-money-json", Version: 1}
}

const (
	avroWithRef  = `{"type":"record","name":"Invoice","namespace":"outboxkit.test","fields":[{"name":"id","type":"string"},{"name":"total","type":"outboxkit.common.Money"}]}`
	protoWithRef = "syntax = \"proto3\";\npackage outboxkit.test;\nimport \"shop/money.proto\";\nmessage Invoice { string id = 1; outboxkit.common.Money total = 2; }\n"
	jsonWithRef  = `{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","required":["id","total"],"properties":{"id":{"type":"string"},"total":{"$ref":"money.json"}}}`
)

// TestSchemasWithReferences: a schema that references another subject's schema (an Avro named
// type, a Protobuf import, a JSON Schema $ref) encodes and decodes with it; a value that does not
// fit the referenced part names its path there; a reference the registry does not have is a
// retriable registry error.
func TestSchemasWithReferences(t *testing.T) {
	cl, _, topic, _ := registry(t)
	avroRef, protoRef, jsonRef := referencedSchemas(t, cl)
	enc, dec := codecs(t, cl)
	for _, tc := range []struct {
		typ            sr.SchemaType
		text           string
		ref            sr.SchemaReference
		payload, want  string
		bad, badReason string
	}{
		{sr.TypeAvro, avroWithRef, avroRef, `{"id":"i-1","total":{"cents":1250,"currency":"EUR"}}`, `{"id":"i-1","total":{"cents":1250,"currency":"EUR"}}`,
			`{"id":"i-1","total":{"cents":"x","currency":"EUR"}}`, "$.total.cents: want an integer, got a string"},
		{sr.TypeProtobuf, protoWithRef, protoRef, `{"id":"i-1","total":{"cents":1250,"currency":"EUR"}}`, `{"id":"i-1","total":{"cents":"1250","currency":"EUR"}}`,
			`{"id":"i-1","total":{"cents":"x","currency":"EUR"}}`, "$.total.cents: x is not an int64 (an integer in range)"},
		{sr.TypeJSON, jsonWithRef, jsonRef, `{"id":"i-1","total":{"cents":1250,"currency":"EUR"}}`, `{"id":"i-1","total":{"cents":1250,"currency":"EUR"}}`,
			`{"id":"i-1","total":{"cents":"x","currency":"EUR"}}`, "$.total.cents: got string, want integer"},
	} {
		subjectTopic := topic + "_" + strings.ToLower(tc.typ.String())
		registerWithRefs(t, cl, Subject(subjectTopic), tc.typ, tc.text, tc.ref)
		framed, err := enc.Encode(context.Background(), subjectTopic, []byte(tc.payload))
		if err != nil {
			t.Fatalf("%s: %v", tc.typ, err)
		}
		out, err := dec.Decode(context.Background(), framed)
		if err != nil {
			t.Fatalf("%s: decode: %v", tc.typ, err)
		}
		if got, want := decodeNumbers(t, string(out)), decodeNumbers(t, tc.want); !reflect.DeepEqual(normalize(got), normalize(want)) {
			t.Errorf("%s: decoded %s, want %s", tc.typ, out, tc.want)
		}
		_, err = enc.Encode(context.Background(), subjectTopic, []byte(tc.bad))
		var mismatch *MismatchError
		if !errors.As(err, &mismatch) || mismatch.Path+": "+mismatch.Reason != tc.badReason {
			t.Errorf("%s: %v, want a mismatch %q", tc.typ, err, tc.badReason)
		}
	}

	missing := sr.SchemaReference{Name: "gone.proto", Subject: testsupport.UniqueName("gone"), Version: 1}
	_, err := newCodec(context.Background(), cl, sr.SubjectSchema{ID: 5, Schema: sr.Schema{Type: sr.TypeProtobuf,
		Schema: "syntax = \"proto3\";\nimport \"gone.proto\";\nmessage A { string a = 1; }\n", References: []sr.SchemaReference{missing}}})
	if err == nil || !strings.HasPrefix(err.Error(), `schema 5: reference "gone.proto" (subject "`+missing.Subject+`" version 1): `) {
		t.Errorf("missing reference: %v", err)
	}
}

// TestPythonDeserializersReadReferencedSchemas: confluent-kafka's AvroDeserializer (which
// resolves the references itself) and ProtobufDeserializer (the imported .proto compiled beside
// the schema) read events whose schemas reference other subjects.
func TestPythonDeserializersReadReferencedSchemas(t *testing.T) {
	python := pythonEnv(t)
	cl, _, _, _ := registry(t)
	avroRef, protoRef, _ := referencedSchemas(t, cl)
	for _, tc := range []struct {
		typ          sr.SchemaType
		text         string
		ref          sr.SchemaReference
		format, want string
	}{
		{sr.TypeAvro, avroWithRef, avroRef, "avro", `{"id":"i-1","total":{"cents":1250,"currency":"EUR"}}`},
		{sr.TypeProtobuf, protoWithRef, protoRef, "protobuf", `{"id":"i-1","total":{"cents":"1250","currency":"EUR"}}`},
	} {
		brokers, topic, _ := publishThroughWith(t, cl, func(subject string) {
			registerWithRefs(t, cl, subject, tc.typ, tc.text, tc.ref)
		}, []string{`{"id":"i-1","total":{"cents":1250,"currency":"EUR"}}`}, []string{""})
		records := readWithPython(t, python, tc.format, brokers, topic, 1)
		if len(records) != 1 {
			t.Fatalf("%s: python read %d records, want 1", tc.typ, len(records))
		}
		if want := decodeNumbers(t, tc.want); !reflect.DeepEqual(normalize(records[0].Value), normalize(want)) {
			t.Errorf("%s: python read %v, want %v", tc.typ, records[0].Value, want)
		}
	}
}
