package schema

import (
	"context"
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
