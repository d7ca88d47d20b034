package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// createTopic creates topic and waits until its leaders serve it (awaitTopic), before the
// consumer and the relay first ask for its metadata.
func createTopic(brokers []string, topic string) error {
	admin, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return fmt.Errorf("Kafka admin client for topic %s: %w", topic, err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), topicReadyWait)
	defer cancel()
	return awaitTopic(ctx, kadm.NewClient(admin), topic)
}

// topicReadyWait bounds how long a drain waits for its topic to be created and served.
const topicReadyWait = 30 * time.Second

// awaitTopic creates topic with the brokers' default partitions and replication (what
// auto-creation would give it) and returns once every partition's leader serves it (or ctx
// ends), so that a drain times the relay and not the topic's creation: a topic auto-created by
// the consumer's first metadata request, or created but not yet served by its leaders, makes the
// consumer wait for its next metadata refresh or offset listing.
func awaitTopic(ctx context.Context, adm *kadm.Client, topic string) error {
	created, err := adm.CreateTopic(ctx, -1, -1, nil, topic)
	if err == nil {
		err = created.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("create Kafka topic %s: %w", topic, err)
	}
	for {
		if err = topicServed(ctx, adm, topic); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			if errors.Is(err, ctx.Err()) {
				return fmt.Errorf("Kafka topic %s is not served on every partition in time: %w", topic, err)
			}
			return fmt.Errorf("Kafka topic %s is not served on every partition in time: %w", topic, errors.Join(err, ctx.Err()))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// topicServed returns nil once the topic has partitions, each with a leader that serves it: the
// metadata names a partition's leader before that broker hosts it, and a consumer that lists
// its offsets then retries a second later.
func topicServed(ctx context.Context, adm *kadm.Client, topic string) error {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return fmt.Errorf("topic %s metadata: %w", topic, err)
	}
	t := md.Topics[topic]
	if t.Err != nil || len(t.Partitions) == 0 {
		return fmt.Errorf("topic %s: no partitions yet (%v)", topic, t.Err)
	}
	for _, p := range t.Partitions {
		if p.Err != nil || p.Leader < 0 {
			return fmt.Errorf("topic %s partition %d: no leader yet (%v)", topic, p.Partition, p.Err)
		}
	}
	listed, err := adm.ListStartOffsets(ctx, topic)
	if err != nil {
		return fmt.Errorf("list topic %s's start offsets: %w", topic, err)
	}
	if len(listed[topic]) != len(t.Partitions) {
		return fmt.Errorf("topic %s: %d of %d partitions listed", topic, len(listed[topic]), len(t.Partitions))
	}
	return listed.Error()
}
