package kafka

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// CheckpointReplicationFactor is the replication factor of a checkpoint topic created by
// OpenUnit on a cluster of at least that many brokers (on a smaller cluster: one replica per
// broker). Such a topic is created with min.insync.replicas CheckpointMinInsyncReplicas, so a
// committed checkpoint is on two brokers at least and survives the loss of any one.
const (
	CheckpointReplicationFactor = 3
	CheckpointMinInsyncReplicas = 2
)

// ErrCheckpointTopicNotDurable is returned by OpenUnit for an existing checkpoint topic that
// could lose a committed checkpoint: one replica on a cluster of several brokers, or unclean
// leader election enabled. A lost checkpoint makes the unit's next owner publish the rows of the
// unit's last transaction again.
var ErrCheckpointTopicNotDurable = errors.New("kafka: the checkpoint topic could lose a committed checkpoint")

// ensureCheckpointTopic creates the checkpoint topic when missing (compacted, replicated:
// CheckpointReplicationFactor) and returns its partition count. An existing topic is refused
// when it is not compacted (retention could delete a unit's last checkpoint while its rows are
// still in the outbox, and a new owner would publish them again) or not durable
// (checkDurability).
func (p *Publisher) ensureCheckpointTopic(ctx context.Context, topic string) (int32, error) {
	p.units.mu.Lock()
	n, ok := p.units.topics[topic]
	p.units.mu.Unlock()
	if ok {
		return n, nil
	}
	adm := kadm.NewClient(p.client) // not closed: closing it would close the publisher's client
	if err := p.createCheckpointTopic(ctx, adm, topic); err != nil {
		return 0, err
	}
	var configs map[string]string
	err := retryUnknownTopic(ctx, func() (err error) {
		configs, err = checkpointTopicConfigs(ctx, adm, topic)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("kafka: checkpoint topic %q: %w", topic, err)
	}
	if policy := configs["cleanup.policy"]; policy != "compact" {
		return 0, fmt.Errorf("kafka: checkpoint topic %q: cleanup.policy is %q, not compact: retention could delete "+
			"a unit's last checkpoint while its rows are still in the outbox", topic, policy)
	}
	var meta kadm.Metadata
	err = retryUnknownTopic(ctx, func() (err error) {
		if meta, err = adm.Metadata(ctx, topic); err == nil {
			err = meta.Topics.Error()
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("kafka: cannot read the partitions of the checkpoint topic %q: %w", topic, err)
	}
	detail := meta.Topics[topic]
	n = int32(len(detail.Partitions))
	if n == 0 {
		return 0, fmt.Errorf("kafka: the checkpoint topic %q has no partitions", topic)
	}
	if err := checkDurability(topic, detail, len(meta.Brokers), configs); err != nil {
		return 0, err
	}
	p.units.mu.Lock()
	if p.units.topics == nil {
		p.units.topics = map[string]int32{}
	}
	p.units.topics[topic] = n
	p.units.mu.Unlock()
	return n, nil
}

// createCheckpointTopic creates the checkpoint topic unless it exists: compacted, with
// CheckpointPartitions partitions, CheckpointReplicationFactor replicas (fewer on a smaller
// cluster) and, with that many, min.insync.replicas CheckpointMinInsyncReplicas.
func (p *Publisher) createCheckpointTopic(ctx context.Context, adm *kadm.Client, topic string) error {
	brokers, err := adm.ListBrokers(ctx)
	if err != nil {
		return fmt.Errorf("kafka: cannot list the brokers to create the checkpoint topic %q on %v: %w", topic, p.config.Brokers, err)
	}
	rf := int16(min(CheckpointReplicationFactor, max(len(brokers), 1)))
	compact := "compact"
	configs := map[string]*string{"cleanup.policy": &compact}
	if rf >= CheckpointReplicationFactor {
		isr := strconv.Itoa(CheckpointMinInsyncReplicas)
		configs["min.insync.replicas"] = &isr
	}
	_, err = adm.CreateTopic(ctx, CheckpointPartitions, rf, configs, topic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("kafka: cannot create the checkpoint topic %q (replication factor %d) on brokers %v: %w",
			topic, rf, p.config.Brokers, err)
	}
	return nil
}

// unknownTopicWait bounds how long a topic just created may stay unknown to the broker asked
// about it: on a cluster, the other brokers learn of a new topic a moment after its creation.
const unknownTopicWait = 10 * time.Second

// retryUnknownTopic runs fn until it returns anything but UNKNOWN_TOPIC_OR_PARTITION, with a
// short growing pause, for at most unknownTopicWait.
func retryUnknownTopic(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(unknownTopicWait)
	pause := 20 * time.Millisecond
	for {
		err := fn()
		if !errors.Is(err, kerr.UnknownTopicOrPartition) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		pause = min(2*pause, 500*time.Millisecond)
	}
}

// checkpointTopicConfigs returns the topic's configuration values (defaults included).
func checkpointTopicConfigs(ctx context.Context, adm *kadm.Client, topic string) (map[string]string, error) {
	configs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, err
	}
	values := map[string]string{}
	_, err = configs.On(topic, func(rc *kadm.ResourceConfig) error {
		if rc.Err != nil {
			return rc.Err
		}
		for _, c := range rc.Configs {
			if c.Value != nil {
				values[c.Key] = *c.Value
			}
		}
		return nil
	})
	return values, err
}

// checkDurability refuses a checkpoint topic that could lose a committed checkpoint: a partition
// with a single replica on a cluster of several brokers (the checkpoint is on one disk only,
// though the cluster could keep more copies), or unclean leader election enabled (an
// out-of-sync replica may become leader and drop committed records).
func checkDurability(topic string, detail kadm.TopicDetail, brokers int, configs map[string]string) error {
	rf := -1
	for _, pd := range detail.Partitions {
		if rf < 0 || len(pd.Replicas) < rf {
			rf = len(pd.Replicas)
		}
	}
	minISR := configs["min.insync.replicas"]
	switch {
	case rf < 2 && brokers > 1:
		return fmt.Errorf("%w: topic %q has replication factor %d (min.insync.replicas %s) on a cluster of %d brokers; "+
			"recreate it (empty) with replication factor %d and min.insync.replicas %d, or name another CheckpointTopic",
			ErrCheckpointTopicNotDurable, topic, rf, minISR, brokers, min(CheckpointReplicationFactor, brokers), CheckpointMinInsyncReplicas)
	case configs["unclean.leader.election.enable"] == "true":
		return fmt.Errorf("%w: topic %q has unclean.leader.election.enable=true (replication factor %d, %d brokers): "+
			"an out-of-sync replica could become leader without the last checkpoints; set it to false",
			ErrCheckpointTopicNotDurable, topic, rf, brokers)
	}
	return nil
}
