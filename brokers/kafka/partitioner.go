package kafka

import (
	"fmt"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

// NewMurmur2Partitioner is a sarama.PartitionerConstructor that places keyed messages on the
// same partition as Kafka's Java client: murmur2(key) & 0x7fffffff % partitions. Sarama has no
// murmur2 hasher (its NewReferenceHashPartitioner matches Java's sign handling but keeps FNV-1a),
// so keyed messages are hashed by franz-go's StickyKeyPartitioner, whose keyed path is exactly
// Kafka's default partitioner. Messages without a key go to a random partition, as with
// Sarama's default.
func NewMurmur2Partitioner(topic string) sarama.Partitioner {
	return &murmur2Partitioner{
		keyed:  kgo.StickyKeyPartitioner(nil).ForTopic(topic),
		random: sarama.NewRandomPartitioner(topic),
	}
}

type murmur2Partitioner struct {
	keyed  kgo.TopicPartitioner
	random sarama.Partitioner
}

// Partition implements sarama.Partitioner.
func (p *murmur2Partitioner) Partition(msg *sarama.ProducerMessage, numPartitions int32) (int32, error) {
	if msg.Key == nil {
		return p.random.Partition(msg, numPartitions)
	}
	key, err := msg.Key.Encode()
	if err != nil {
		return -1, fmt.Errorf("murmur2 partitioner: cannot encode the key: %w", err)
	}
	if key == nil {
		// A nil key after encoding: no key at all, like msg.Key == nil.
		return p.random.Partition(msg, numPartitions)
	}
	return int32(p.keyed.Partition(&kgo.Record{Key: key}, int(numPartitions))), nil
}

// RequiresConsistency implements sarama.Partitioner: a key always maps to the same partition.
func (p *murmur2Partitioner) RequiresConsistency() bool { return true }

// MessageRequiresConsistency implements sarama.DynamicConsistencyPartitioner: only keyed
// messages must stay on their partition while Sarama retries.
func (p *murmur2Partitioner) MessageRequiresConsistency(msg *sarama.ProducerMessage) bool {
	return msg.Key != nil
}
