package kafka

import (
	"errors"
	"fmt"
	"sync"

	"github.com/IBM/sarama"
	"github.com/ThreeDotsLabs/watermill"
	wkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
)

// Publisher is a Watermill message.Publisher for Kafka that sends each Publish call as one
// pipelined batch.
//
// Why not watermill-kafka's Publisher: it calls SyncProducer.SendMessage once per message and
// waits for that message's acknowledgement before marshaling the next, so publishing 1000
// messages costs 1000 broker round trips. This Publisher marshals all messages first (with
// watermill-kafka's own Marshaler, so the wire format and the subscriber stay watermill-kafka's)
// and hands them to SyncProducer.SendMessages, which feeds them all to Sarama's producer at once:
// Sarama packs them into as few produce requests as it can and Publish returns when every message
// is acknowledged (acks=all) or has failed. See docs/kafka.md for the measured difference.
//
// Order: messages with the same key go to the same partition, and the idempotent producer with
// one in-flight request per broker (Net.MaxOpenRequests=1) keeps them in the given order within
// that partition, also across Sarama's internal retries.
//
// Publish and Close are safe for concurrent use.
type Publisher struct {
	config    Config
	marshaler wkafka.Marshaler
	producer  sarama.SyncProducer
	logger    watermill.LoggerAdapter

	mu     sync.RWMutex // held for reading by Publish, for writing by Close
	closed bool
}

// NewPublisher connects a Publisher to the brokers of config. A nil logger discards logs.
func NewPublisher(config Config, logger watermill.LoggerAdapter) (*Publisher, error) {
	config.setDefaults()
	sc, err := config.SaramaConfig()
	if err != nil {
		return nil, err
	}
	return newPublisherWithSarama(config, sc, logger)
}

func newPublisherWithSarama(config Config, sc *sarama.Config, logger watermill.LoggerAdapter) (*Publisher, error) {
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	producer, err := sarama.NewSyncProducer(config.Brokers, sc)
	if err != nil {
		return nil, fmt.Errorf("kafka: cannot create the producer for brokers %v: %w", config.Brokers, err)
	}
	return &Publisher{
		config:    config,
		marshaler: NewMarshaler(config.KeyMetadata),
		producer:  producer,
		logger:    logger.With(watermill.LogFields{"provider": "kafka"}),
	}, nil
}

// NewMarshaler returns watermill-kafka's marshaler with the message key taken from the metadata
// entry keyMetadata. The same value unmarshals consumed messages.
func NewMarshaler(keyMetadata string) wkafka.MarshalerUnmarshaler {
	return wkafka.NewWithPartitioningMarshaler(func(_ string, msg *message.Message) (string, error) {
		return msg.Metadata.Get(keyMetadata), nil
	})
}

// Publish sends msgs to topic and returns once all of them are acknowledged by the broker. When
// some fail, it returns a *PublishError listing them (the others were acknowledged); classify it
// with Retriable.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	kafkaMsgs := make([]*sarama.ProducerMessage, len(msgs))
	for i, msg := range msgs {
		km, err := p.marshaler.Marshal(topic, msg)
		if err != nil {
			return fmt.Errorf("kafka: cannot marshal message %s for topic %q: %w: %w", msg.UUID, topic, ErrInvalidMessage, err)
		}
		// Remember which Watermill message each Kafka message is, to name failures.
		km.Metadata = msg.UUID
		kafkaMsgs[i] = km
	}

	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		return ErrPublisherClosed
	}

	p.logger.Trace("Sending messages to Kafka", watermill.LogFields{"topic": topic, "count": len(msgs)})
	err := p.producer.SendMessages(kafkaMsgs)
	if err == nil {
		return nil
	}
	var perrs sarama.ProducerErrors
	if !errors.As(err, &perrs) || len(perrs) == 0 {
		return fmt.Errorf("kafka: cannot produce %d messages to topic %q: %w", len(msgs), topic, err)
	}
	pubErr := &PublishError{Topic: topic, Total: len(msgs), Failed: make([]MessageError, len(perrs))}
	for i, pe := range perrs {
		id, _ := pe.Msg.Metadata.(string)
		pubErr.Failed[i] = MessageError{UUID: id, Err: pe.Err}
	}
	return pubErr
}

// Close flushes and closes the producer. Publish calls in progress finish first; later ones
// return ErrPublisherClosed. Close is idempotent.
func (p *Publisher) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	if err := p.producer.Close(); err != nil {
		return fmt.Errorf("kafka: cannot close the producer: %w", err)
	}
	return nil
}
