package kafka

import (
	"fmt"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	wkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
)

// NewSubscriber returns watermill-kafka's Subscriber configured from config: the same Sarama
// settings as the publisher (protocol version, TLS, SASL), config.ConsumerGroup, the initial
// offset (oldest by default), config.IsolationLevel (read_uncommitted by default; set
// read_committed to consume a topic written in exactly_once delivery mode) and NewMarshaler,
// the wire format of the publisher's records. It is used
// as is because its consumer-group handling (rebalances, reconnects, ack-then-commit) is what a
// Watermill user expects; only the publishing side needed replacing.
func NewSubscriber(config Config, logger watermill.LoggerAdapter) (*wkafka.Subscriber, error) {
	config.setDefaults()
	sc, err := config.SaramaConfig()
	if err != nil {
		return nil, err
	}
	partitions, replication := config.TopicPartitions, config.TopicReplicationFactor
	if partitions == 0 {
		partitions = -1 // the broker's num.partitions
	}
	if replication == 0 {
		replication = -1 // the broker's default.replication.factor
	}
	sub, err := wkafka.NewSubscriber(wkafka.SubscriberConfig{
		Brokers:               config.Brokers,
		Unmarshaler:           NewMarshaler(config.KeyMetadata),
		OverwriteSaramaConfig: sc,
		ConsumerGroup:         config.ConsumerGroup,
		NackResendSleep:       config.NackResendSleep,
		InitializeTopicDetails: &sarama.TopicDetail{
			NumPartitions:     partitions,
			ReplicationFactor: replication,
		},
	}, logger)
	if err != nil {
		return nil, fmt.Errorf("kafka: cannot create the subscriber (consumer group %q): %w", config.ConsumerGroup, err)
	}
	return sub, nil
}
