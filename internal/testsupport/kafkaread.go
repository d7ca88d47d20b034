package testsupport

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// CreateKafkaTopicWithMaxBytes is CreateKafkaTopic with the topic's max.message.bytes set to
// maxBytes: a topic whose broker refuses, whole, a batch holding a larger record.
func CreateKafkaTopicWithMaxBytes(t testing.TB, brokers []string, topic string, maxBytes int) {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatalf("kafka client: %v", err)
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	size := fmt.Sprint(maxBytes)
	resp, err := admin.CreateTopic(ctx, -1, -1, map[string]*string{"max.message.bytes": &size}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		t.Fatalf("create kafka topic %s: %v", topic, err)
	}
	waitServed(ctx, t, admin, topic)
}

// waitServed waits until the partition leaders of topic answer.
func waitServed(ctx context.Context, t testing.TB, admin *kadm.Client, topic string) {
	t.Helper()
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

// ReadKafkaTopic returns every record of topic up to its end offsets at the time of the call,
// partition after partition, each in offset order (read_uncommitted).
func ReadKafkaTopic(t testing.TB, brokers []string, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatalf("kafka client: %v", err)
	}
	ends, err := kadm.NewClient(client).ListEndOffsets(ctx, topic)
	client.Close()
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		t.Fatalf("end offsets of kafka topic %s: %v", topic, err)
	}
	want := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) {
		if o.Offset > 0 {
			want[o.Partition] = o.Offset
		}
	})
	byPartition := consumeUntil(ctx, t, brokers, topic, want)
	var got []*kgo.Record
	for p := range int32(len(ends[topic])) {
		got = append(got, byPartition[p]...)
	}
	return got
}

// consumeUntil consumes topic from the start until every partition of want reached its end
// offset, and returns the records by partition.
func consumeUntil(ctx context.Context, t testing.TB, brokers []string, topic string, want map[int32]int64) map[int32][]*kgo.Record {
	t.Helper()
	got := map[int32][]*kgo.Record{}
	if len(want) == 0 {
		return got
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatalf("kafka consumer: %v", err)
	}
	defer client.Close()
	for len(want) > 0 {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading kafka topic %s back: %v (partitions not read to their end: %v)", topic, ctx.Err(), want)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			got[r.Partition] = append(got[r.Partition], r)
			if end, ok := want[r.Partition]; ok && r.Offset >= end-1 {
				delete(want, r.Partition)
			}
		})
	}
	return got
}
