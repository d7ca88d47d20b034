package schema

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/outbox"
)

// The schemas of relaybench's payload (relayBenchPayload), one per format.
const (
	relayBenchAvro = `{"type":"record","name":"OrderChanged","namespace":"relaybench","fields":[` +
		`{"name":"order","type":"string"},{"name":"seq","type":"long"},{"name":"note","type":"string"}]}`
	relayBenchProto = "syntax = \"proto3\";\npackage relaybench;\nmessage OrderChanged {\n  string order = 1;\n  int64 seq = 2;\n  string note = 3;\n}\n"
)

// relayBenchPayload is relaybench's JSON payload of about 256 bytes for key and seq.
func relayBenchPayload(key string, seq int) string {
	return `{"order":"` + key + `","seq":` + strconv.Itoa(seq) + `,"note":"` + strings.Repeat("0123456789abcdef", 13) + `"}`
}

// discardPublisher is the measuring instrument of BenchmarkPublishEach: it sends nothing and
// reports every message published, so that the benchmark measures the decorator's own step.
type discardPublisher struct{ bytes int }

func (d *discardPublisher) Publish(string, ...*message.Message) error { return nil }
func (d *discardPublisher) Close() error                              { return nil }
func (d *discardPublisher) PublishEach(_ context.Context, _ string, msgs []*message.Message) []error {
	for _, m := range msgs {
		d.bytes += len(m.Payload)
	}
	return make([]error, len(msgs))
}

// BenchmarkPublishEach measures the publisher's encode step per event: a batch of 500
// relaybench events (outbox.Event.ToMessage, as the forwarder makes them, 1,000 keys) through
// the decorator into a publisher that discards them, with the registry's lookups cached
// (go test -run '^$' -bench PublishEach ./brokers/schema, against the test registry);
// ns/event is ns/op over the batch (allocs/op and B/op are per batch), cpu-ns/event the
// process's CPU time (user and system, the garbage collector's included) per event, which a
// busy machine disturbs less; registry/10k is the registry requests per 10,000 events.
func BenchmarkPublishEach(b *testing.B) {
	for _, tc := range []struct {
		name string
		typ  sr.SchemaType
		text string
	}{
		{"avro", sr.TypeAvro, relayBenchAvro},
		{"protobuf", sr.TypeProtobuf, relayBenchProto},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cl, counter, topic, _ := registry(b)
			topic += "_publish"
			registerAs(b, cl, Subject(topic), tc.typ, tc.text)
			enc, err := NewEncoder(cl, Config{})
			if err != nil {
				b.Fatal(err)
			}
			sink := &discardPublisher{}
			pub, err := NewPublisher(sink, enc)
			if err != nil {
				b.Fatal(err)
			}
			each := pub.(outcomePublisher)
			msgs := make([]*message.Message, 500)
			for i := range msgs {
				key := "order-" + strconv.Itoa(i%1000)
				msgs[i] = outbox.Event{ID: uuid.Must(uuid.NewV7()), Topic: topic, AggregateType: "order", AggregateID: key,
					EventType: "OrderChanged", CreatedAt: time.Now(), Payload: []byte(relayBenchPayload(key, i))}.ToMessage()
			}
			ctx := context.Background()
			counter.n.Store(0)
			b.ReportAllocs()
			b.ResetTimer()
			cpu := processCPU()
			for range b.N {
				for i, err := range each.PublishEach(ctx, topic, msgs) {
					if err != nil {
						b.Fatalf("message %d: %v", i, err)
					}
				}
			}
			b.StopTimer()
			cpu = processCPU() - cpu
			events := float64(b.N * len(msgs))
			b.ReportMetric(float64(cpu.Nanoseconds())/events, "cpu-ns/event")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/events, "ns/event")
			b.ReportMetric(float64(counter.n.Load())*10000/events, "registry/10k")
		})
	}
}
