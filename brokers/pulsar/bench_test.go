package pulsar_test

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/pulsar"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// BenchmarkPublish measures Publish against the real broker with 256-byte payloads: one
// message per call from 1 and from 64 concurrent publishers, and 100 messages per call
// from one publisher, with per-key batches (default) and mixed-key batches. Every Publish waits for the broker's acknowledgement of all its
// messages. Run: go test -run '^$' -bench BenchmarkPublish -benchtime 5000x ./brokers/pulsar/
func BenchmarkPublish(b *testing.B) {
	payload := bytes.Repeat([]byte("x"), 256)
	for _, tc := range []struct {
		publishers, perCall int
		mixedKeys           bool
	}{
		{1, 1, false},
		{64, 1, false},
		{1, 100, false},
		{1, 100, true},
	} {
		name := fmt.Sprintf("publishers=%d/messages_per_call=%d", tc.publishers, tc.perCall)
		if tc.mixedKeys {
			name += "/mixed_key_batches"
		}
		b.Run(name, func(b *testing.B) {
			pub := newTestPublisher(b, func(c *pulsar.PublisherConfig) { c.MixedKeyBatches = tc.mixedKeys })
			topic := testsupport.UniqueName("bench")
			// Warm up: create the producer outside the measurement.
			if err := pub.Publish(topic, message.NewMessage(watermill.NewUUID(), payload)); err != nil {
				b.Fatal(err)
			}
			benchPublish(b, pub, topic, payload, tc.publishers, tc.perCall)
		})
	}
}

// benchPublish publishes b.N messages in calls of perCall messages from publishers goroutines.
func benchPublish(b *testing.B, pub *pulsar.Publisher, topic string, payload []byte, publishers, perCall int) {
	b.SetBytes(int64(len(payload)))
	calls := (b.N + perCall - 1) / perCall
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, publishers)
	b.ResetTimer()
	for range publishers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			msgs := make([]*message.Message, perCall)
			for next.Add(1) <= int64(calls) {
				for i := range msgs {
					msgs[i] = message.NewMessage(watermill.NewUUID(), payload)
					msgs[i].Metadata.Set("aggregate_id", fmt.Sprintf("agg-%d", i%16))
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
	b.ReportMetric(float64(calls*perCall)/b.Elapsed().Seconds(), "msgs/s")
}
