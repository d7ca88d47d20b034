package schema

import (
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/brokers/kafka"
)

// newKafkaPublisher returns the schema publisher, encoding with cl and cfg, over a
// brokers/kafka publisher to the real Kafka at brokers; it is closed when the test ends.
func newKafkaPublisher(t *testing.T, brokers []string, cl *sr.Client, cfg Config) message.Publisher {
	t.Helper()
	kpub, err := kafka.NewPublisher(kafka.Config{Brokers: brokers}, nil)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := NewEncoder(cl, cfg)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := NewPublisher(kpub, enc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	return pub
}

// unreachableRegistry returns a registry client of an address nothing listens on: every call
// fails as with the registry down.
func unreachableRegistry(t *testing.T) *sr.Client {
	t.Helper()
	down, err := sr.NewClient(sr.URLs("http://127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	return down
}
