package schema

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
)

// benchPayload is an event of about 256 bytes of JSON, in the field names of orderSchema,
// orderProto and orderJSONSchema.
const benchPayload = `{"id":"o-000000001","amount":9007199254740993,"price":12.25,"status":"SHIPPED","note":"leave at the door",` +
	`"items":[{"sku":"sku-000001","qty":1},{"sku":"sku-000002","qty":2},{"sku":"sku-000003","qty":3}],"attrs":{"w":7,"h":12}}`

// BenchmarkEncode measures one event's encoding per format with the registry's lookups cached
// (go test -run '^$' -bench Encode ./brokers/schema, against the test registry); registry/10k is
// the registry requests per 10,000 events.
func BenchmarkEncode(b *testing.B) {
	avroPayload := `{"id":"o-000000001","amount":9007199254740993,"qty":3,"price":12.25,"paid":true,"status":"SHIPPED",` +
		`"note":"leave at the door","items":[{"sku":"sku-000001","qty":1},{"sku":"sku-000002","qty":2},{"sku":"sku-000003","qty":3}],"attrs":{"w":7,"h":12}}`
	protoPayload := `{"id":"o-000000001","amount":"9007199254740993","qty":3,"price":12.25,"paid":true,"status":"SHIPPED",` +
		`"note":"leave at the door","items":[{"sku":"sku-000001","qty":1},{"sku":"sku-000002","qty":2},{"sku":"sku-000003","qty":3}],"attrs":{"w":"7","h":"12"}}`
	for _, tc := range []struct {
		name    string
		typ     sr.SchemaType
		text    string
		payload string
	}{
		{"avro", sr.TypeAvro, orderSchema, avroPayload},
		{"protobuf", sr.TypeProtobuf, orderProto, protoPayload},
		{"jsonschema", sr.TypeJSON, orderJSONSchema, benchPayload},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cl, counter, topic, _ := registry(b)
			topic += "_bench"
			registerAs(b, cl, Subject(topic), tc.typ, tc.text)
			enc, err := NewEncoder(cl, Config{})
			if err != nil {
				b.Fatal(err)
			}
			counter.n.Store(0)
			b.SetBytes(int64(len(tc.payload)))
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if _, err := enc.Encode(context.Background(), topic, []byte(tc.payload)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(counter.n.Load())*10000/float64(b.N), "registry/10k")
		})
	}
}

// BenchmarkCodecPaths compares, per format, the direct encoder (JSON straight to the wire
// format) with the generic path (JSON to a generic value, then hamba/avro or dynamicpb) on the
// payload of BenchmarkEncode and on relaybench's (about 256 bytes): go test -run '^$' -bench
// CodecPaths ./brokers/schema (no registry needed).
func BenchmarkCodecPaths(b *testing.B) {
	relayPayload := `{"order":"key-000417","seq":123456,"note":"` + strings.Repeat("0123456789abcdef", 13) + `"}`
	relayAvro := `{"type":"record","name":"OrderChanged","namespace":"relaybench","fields":[` +
		`{"name":"order","type":"string"},{"name":"seq","type":"long"},{"name":"note","type":"string"}]}`
	relayProto := "syntax = \"proto3\";\npackage relaybench;\nmessage OrderChanged {\n  string order = 1;\n  int64 seq = 2;\n  string note = 3;\n}\n"
	order := directCases[orderSchema][0]
	orderP := protoDirectCases[0].payload
	for _, tc := range []struct {
		name, text, payload string
		avro                bool
	}{
		{"avro/order", orderSchema, order, true},
		{"avro/relaybench", relayAvro, relayPayload, true},
		{"protobuf/order", orderProto, orderP, false},
		{"protobuf/relaybench", relayProto, relayPayload, false},
	} {
		var direct, generic func([]byte) bool
		if tc.avro {
			c := mustAvroCodec(b, tc.text)
			direct = func(p []byte) bool { _, ok := c.direct.encode(p); return ok }
			generic = func(p []byte) bool { _, _, m := c.encodeGeneric(p); return m == nil }
		} else {
			c := mustProtoCodec(b, tc.text)
			md := c.message("")
			direct = func(p []byte) bool { _, ok := c.direct.encode(md, p); return ok }
			generic = func(p []byte) bool { _, _, m := c.encodeGeneric(md, p); return m == nil }
		}
		for _, path := range []struct {
			name string
			run  func([]byte) bool
		}{{"generic", generic}, {"direct", direct}} {
			b.Run(tc.name+"/"+path.name, func(b *testing.B) {
				p := []byte(tc.payload)
				b.SetBytes(int64(len(p)))
				b.ReportAllocs()
				for b.Loop() {
					if !path.run(p) {
						b.Fatal("not encoded")
					}
				}
			})
		}
	}
}
