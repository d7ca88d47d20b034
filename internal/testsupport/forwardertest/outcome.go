package forwardertest

import (
	"testing"

	"github.com/outboxkit/outboxkit/forwarder/outcometest"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// KafkaBroker is the outcometest.Broker of the real Kafka at brokers: topics with the broker's
// default partitions, created and served before the suite publishes (with maxMessageBytes > 0,
// their max.message.bytes is set to it), read back partition by partition.
func KafkaBroker(brokers []string, maxMessageBytes int) outcometest.Broker {
	return outcometest.Broker{
		NewTopic: func(t *testing.T) string {
			topic := testsupport.UniqueName("outcometest")
			if maxMessageBytes > 0 {
				testsupport.CreateKafkaTopicWithMaxBytes(t, brokers, topic, maxMessageBytes)
			} else {
				testsupport.CreateKafkaTopic(t, brokers, topic)
			}
			return topic
		},
		ReadTopic: func(t *testing.T, topic string) []outcometest.Received {
			var got []outcometest.Received
			for _, r := range testsupport.ReadKafkaTopic(t, brokers, topic) {
				id := ""
				for _, h := range r.Headers {
					if h.Key == "_watermill_message_uuid" {
						id = string(h.Value)
					}
				}
				got = append(got, outcometest.Received{UUID: id, Key: string(r.Key)})
			}
			return got
		},
	}
}
