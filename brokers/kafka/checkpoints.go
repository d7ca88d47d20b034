package kafka

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// CheckpointPartitions is the partition count of a checkpoint topic created by OpenUnit: one per
// outbox partition, so each unit's checkpoints have a partition of their own and its last one is
// the partition's last committed record.
const CheckpointPartitions = 64

// checkpointIdle ends a checkpoint read that has seen nothing for this long: the records before
// the last stable offset are all there, unless compaction removed the partition's tail markers.
const checkpointIdle = 3 * time.Second

// ensureCheckpointTopic creates the checkpoint topic when missing, compacted, and returns its
// partition count. A topic that exists but is not compacted is refused: deletion by retention
// could remove a unit's last checkpoint while its rows are still in the outbox, and a new owner
// would then publish them again.
func (p *Publisher) ensureCheckpointTopic(ctx context.Context, topic string) (int32, error) {
	p.units.mu.Lock()
	n, ok := p.units.topics[topic]
	p.units.mu.Unlock()
	if ok {
		return n, nil
	}
	adm := kadm.NewClient(p.client) // not closed: closing it would close the publisher's client
	compact := "compact"
	_, err := adm.CreateTopic(ctx, CheckpointPartitions, -1, map[string]*string{"cleanup.policy": &compact}, topic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return 0, fmt.Errorf("kafka: cannot create the checkpoint topic %q on brokers %v: %w", topic, p.config.Brokers, err)
	}
	configs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err == nil {
		_, err = configs.On(topic, func(rc *kadm.ResourceConfig) error {
			if rc.Err != nil {
				return rc.Err
			}
			for _, c := range rc.Configs {
				if c.Key == "cleanup.policy" && (c.Value == nil || *c.Value != compact) {
					value := "<unset>"
					if c.Value != nil {
						value = *c.Value
					}
					return fmt.Errorf("cleanup.policy is %q, not compact: retention could delete a unit's last checkpoint "+
						"while its rows are still in the outbox", value)
				}
			}
			return nil
		})
	}
	if err != nil {
		return 0, fmt.Errorf("kafka: checkpoint topic %q: %w", topic, err)
	}
	topics, err := adm.ListTopics(ctx, topic)
	if err == nil {
		err = topics.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("kafka: cannot read the partitions of the checkpoint topic %q: %w", topic, err)
	}
	n = int32(len(topics[topic].Partitions))
	if n == 0 {
		return 0, fmt.Errorf("kafka: the checkpoint topic %q has no partitions", topic)
	}
	p.units.mu.Lock()
	if p.units.topics == nil {
		p.units.topics = map[string]int32{}
	}
	p.units.topics[topic] = n
	p.units.mu.Unlock()
	return n, nil
}

// LastCheckpoint returns the last checkpoint unit committed to checkpointTopic (at partition
// slot modulo its partitions), or nil, without opening the unit: its owner is not fenced. It
// implements the forwarder's CheckpointReader (outboxkit status). A missing topic has no
// checkpoint.
func (p *Publisher) LastCheckpoint(ctx context.Context, unit, checkpointTopic string, slot int) ([]byte, error) {
	topics, err := kadm.NewClient(p.client).ListTopics(ctx, checkpointTopic)
	if err != nil {
		return nil, fmt.Errorf("kafka: cannot describe the checkpoint topic %q: %w", checkpointTopic, err)
	}
	detail, ok := topics[checkpointTopic]
	if !ok || errors.Is(detail.Err, kerr.UnknownTopicOrPartition) {
		return nil, nil
	}
	if detail.Err != nil {
		return nil, fmt.Errorf("kafka: cannot describe the checkpoint topic %q: %w", checkpointTopic, detail.Err)
	}
	if len(detail.Partitions) == 0 {
		return nil, nil
	}
	return p.lastCheckpoint(ctx, checkpointTopic, int32(slot)%int32(len(detail.Partitions)), unit)
}

// lastCheckpoint returns the value of the last committed record keyed unit in the partition of
// the checkpoint topic, or nil. It reads read_committed, backwards from the partition's last
// stable offset in growing windows, keeping the transaction markers so that it knows when it
// has reached that offset.
func (p *Publisher) lastCheckpoint(ctx context.Context, topic string, partition int32, unit string) ([]byte, error) {
	adm := kadm.NewClient(p.client)
	bounds := func(list func(context.Context, ...string) (kadm.ListedOffsets, error)) (int64, error) {
		offsets, err := list(ctx, topic)
		if err == nil {
			err = offsets.Error()
		}
		if err != nil {
			return 0, err
		}
		o, ok := offsets.Lookup(topic, partition)
		if !ok {
			return 0, fmt.Errorf("partition %d not listed", partition)
		}
		return o.Offset, nil
	}
	var start, end int64
	var err error
	// A topic just created has no leaders for a moment (NOT_LEADER_FOR_PARTITION): retried.
	for wait := 50 * time.Millisecond; ; wait *= 2 {
		start, err = bounds(adm.ListStartOffsets)
		if err == nil {
			end, err = bounds(adm.ListCommittedOffsets)
		}
		if err == nil || !kerr.IsRetriable(err) || wait > 2*time.Second {
			break
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
	if err != nil {
		return nil, fmt.Errorf("kafka: cannot list the offsets of checkpoint topic %q partition %d: %w", topic, partition, err)
	}
	for window := int64(64); ; window *= 8 {
		from := max(start, end-window)
		value, found, err := p.readCheckpoints(ctx, topic, partition, unit, from, end)
		if err != nil || found || from == start {
			return value, err
		}
	}
}

// readCheckpoints reads the partition from offset from up to offset end (excluded),
// read_committed, and returns the value of the last record keyed unit.
func (p *Publisher) readCheckpoints(ctx context.Context, topic string, partition int32, unit string, from, end int64) ([]byte, bool, error) {
	if from >= end {
		return nil, false, nil
	}
	opts := append(p.opts[:len(p.opts):len(p.opts)],
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	client, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, false, fmt.Errorf("kafka: cannot create the checkpoint reader: %w", err)
	}
	defer client.Close()
	var value []byte
	found := false
	for {
		pollCtx, cancel := context.WithTimeout(ctx, checkpointIdle)
		fetches := client.PollFetches(pollCtx)
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, false, fmt.Errorf("kafka: reading checkpoints of topic %q partition %d: %w", topic, partition, err)
		}
		idle := true
		var fetchErr error
		fetches.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				fetchErr = err
			}
		})
		if fetchErr != nil {
			return nil, false, fmt.Errorf("kafka: reading checkpoints of topic %q partition %d: %w", topic, partition, fetchErr)
		}
		last := int64(-1)
		fetches.EachRecord(func(r *kgo.Record) {
			idle = false
			last = r.Offset
			if !r.Attrs.IsControl() && string(r.Key) == unit {
				value, found = r.Value, true
			}
		})
		if idle || last >= end-1 {
			return value, found, nil
		}
	}
}
