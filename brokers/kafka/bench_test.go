package kafka_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	wkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// BenchmarkPublish compares outboxkit's batching Publisher with watermill-kafka's stock one on the
// real Kafka, with the same Sarama configuration (idempotent, acks=all, lz4), 256-byte payloads,
// 16 keys. b.N counts messages; msgs/s is reported.
//
//	go test -run '^$' -bench BenchmarkPublish -benchtime 20000x ./brokers/kafka/
func BenchmarkPublish(b *testing.B) {
	brokers := testsupport.KafkaBrokers(b)
	cfg := kafka.Config{Brokers: brokers}
	cfg.SetDefaults()
	payload := make([]byte, 256)
	for i := range payload {
		payload[i] = byte('a' + i%26)
	}
	publishers := map[string]func(b *testing.B) message.Publisher{
		"outboxkit": func(b *testing.B) message.Publisher {
			p, err := kafka.NewPublisher(cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			return p
		},
		"watermill-kafka": func(b *testing.B) message.Publisher {
			sc, err := cfg.SaramaConfig()
			if err != nil {
				b.Fatal(err)
			}
			p, err := wkafka.NewPublisher(wkafka.PublisherConfig{
				Brokers: brokers, Marshaler: kafka.NewMarshaler(cfg.KeyMetadata), OverwriteSaramaConfig: sc,
			}, watermill.NopLogger{})
			if err != nil {
				b.Fatal(err)
			}
			return p
		},
	}
	for _, batch := range []int{1, 100} {
		for _, conc := range []int{1, 64} {
			for _, impl := range []string{"outboxkit", "watermill-kafka"} {
				b.Run(fmt.Sprintf("batch=%d/publishers=%d/%s", batch, conc, impl), func(b *testing.B) {
					pub := publishers[impl](b)
					defer pub.Close()
					topic := testsupport.UniqueName("bench")
					// Create the topic and warm up metadata and connections outside the timing.
					if err := pub.Publish(topic, keyed("warmup", payload)); err != nil {
						b.Fatal(err)
					}
					var next atomic.Int64
					calls := (b.N + batch - 1) / batch
					var wg sync.WaitGroup
					errs := make(chan error, conc)
					b.ResetTimer()
					for w := 0; w < conc; w++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for {
								n := next.Add(1)
								if n > int64(calls) {
									return
								}
								msgs := make([]*message.Message, batch)
								for i := range msgs {
									msgs[i] = keyed(fmt.Sprintf("key-%d", (int(n)*batch+i)%16), payload)
								}
								if err := pub.Publish(topic, msgs...); err != nil {
									errs <- err
									return
								}
							}
						}()
					}
					wg.Wait()
					b.StopTimer()
					close(errs)
					for err := range errs {
						b.Fatal(err)
					}
					b.ReportMetric(float64(calls*batch)/b.Elapsed().Seconds(), "msgs/s")
				})
			}
		}
	}
}
