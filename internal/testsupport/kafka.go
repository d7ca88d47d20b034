package testsupport

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// CreateKafkaTopic creates topic (the broker's default partitions and replication) and waits
// until its partition leaders serve it: a topic just created answers UNKNOWN_TOPIC_OR_PARTITION
// for a moment, longer on a broker that has just started, and a publish failing then moves an
// event to the forwarder's retry path. A test about the stream's order, not the retry path's,
// creates its topic first.
func CreateKafkaTopic(t testing.TB, brokers []string, topic string) {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatalf("kafka client: %v", err)
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := admin.CreateTopic(ctx, -1, -1, nil, topic); err != nil {
		t.Fatalf("create kafka topic %s: %v", topic, err)
	}
	for {
		offsets, err := admin.ListEndOffsets(ctx, topic)
		if err == nil {
			err = offsets.Error()
		}
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("kafka topic %s is not served a minute after its creation: %v", topic, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
