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
// the checkpoint topic, or nil. It reads read_committed, backwards from the partition's high
// watermark in growing windows, keeping the transaction markers so that it knows when it has
// reached the end. The high watermark is taken when lastCheckpoint is called: after the unit's
// InitProducerId, every transaction of the unit is complete and below it. A transaction of
// another unit sharing the partition may still be open below it, holding back the last stable
// offset (the end of a read_committed read); lastCheckpoint waits for it to end, since a read
// stopped there could miss this unit's last checkpoint.
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
	var start, end, stable int64
	var err error
	// A topic just created has no leaders for a moment (NOT_LEADER_FOR_PARTITION), and another
	// writer's transaction may hold the last stable offset below the end: both are waited for,
	// within ctx.
	for wait := 20 * time.Millisecond; ; wait = min(2*wait, 500*time.Millisecond) {
		start, err = bounds(adm.ListStartOffsets)
		if err == nil && end == 0 {
			end, err = bounds(adm.ListEndOffsets)
		}
		if err == nil {
			stable, err = bounds(adm.ListCommittedOffsets)
		}
		if err == nil && stable >= end {
			break
		}
		if err != nil && !kerr.IsRetriable(err) {
			return nil, fmt.Errorf("kafka: cannot list the offsets of checkpoint topic %q partition %d: %w", topic, partition, err)
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("its last stable offset %d stayed below its end %d: a transaction of another writer is open on it", stable, end)
			}
			return nil, fmt.Errorf("kafka: checkpoint topic %q partition %d: %w (%w)", topic, partition, err, ctx.Err())
		case <-time.After(wait):
		}
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
		fetches := client.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, false, fmt.Errorf("kafka: reading checkpoints of topic %q partition %d up to offset %d: %w", topic, partition, end, err)
		}
		var fetchErr error
		fetches.EachError(func(_ string, _ int32, err error) { fetchErr = err })
		if fetchErr != nil {
			return nil, false, fmt.Errorf("kafka: reading checkpoints of topic %q partition %d: %w", topic, partition, fetchErr)
		}
		last := int64(-1)
		fetches.EachRecord(func(r *kgo.Record) {
			last = max(last, r.Offset)
			if !r.Attrs.IsControl() && string(r.Key) == unit && r.Offset < end {
				value, found = r.Value, true
			}
		})
		// Every offset below end is a record or a transaction marker (kept), so the read is
		// complete when it has seen end-1; it never ends on a quiet poll.
		if last >= end-1 {
			return value, found, nil
		}
	}
}
