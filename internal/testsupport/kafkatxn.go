package testsupport

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// ProduceAbortedThenCommitted writes two records of one key into topic, each in a Kafka
// transaction of its own: first abortedValue in a transaction that is aborted, then
// committedValue in one that commits. Both land in the same partition, in that order, so a
// consumer that reads the partition up to committedValue has also passed the aborted record:
// a read_uncommitted consumer sees both, a read_committed one only committedValue.
func ProduceAbortedThenCommitted(t testing.TB, brokers []string, topic, abortedValue, committedValue string) {
	t.Helper()
	client, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.TransactionalID(UniqueName("isolation-test")),
		kgo.DefaultProduceTopic(topic),
	)
	if err != nil {
		t.Fatalf("kafka transactional client: %v", err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, step := range []struct {
		value  string
		commit kgo.TransactionEndTry
	}{{abortedValue, kgo.TryAbort}, {committedValue, kgo.TryCommit}} {
		if err := client.BeginTransaction(); err != nil {
			t.Fatalf("begin transaction: %v", err)
		}
		rec := &kgo.Record{
			Key:   []byte("isolation-key"),
			Value: []byte(step.value),
			Headers: []kgo.RecordHeader{
				{Key: "_watermill_message_uuid", Value: []byte(step.value)},
			},
		}
		if err := client.ProduceSync(ctx, rec).FirstErr(); err != nil {
			t.Fatalf("produce %q in a transaction: %v", step.value, err)
		}
		if err := client.EndTransaction(ctx, step.commit); err != nil {
			t.Fatalf("end the transaction of %q: %v", step.value, err)
		}
	}
}
