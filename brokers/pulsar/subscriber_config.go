package pulsar

import (
	"fmt"
	"strings"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
)

// SubscriptionType is the Pulsar subscription type.
type SubscriptionType string

// Subscription types. See docs/pulsar.md for what each one guarantees.
const (
	// SubscriptionKeyShared spreads keys over the consumers; each key goes to one consumer
	// at a time, so per-key order holds while several consumers share the load. Default.
	SubscriptionKeyShared SubscriptionType = "key_shared"
	// SubscriptionShared spreads messages round-robin: most parallel, no order.
	SubscriptionShared SubscriptionType = "shared"
	// SubscriptionFailover delivers everything to one active consumer, others stand by.
	SubscriptionFailover SubscriptionType = "failover"
	// SubscriptionExclusive allows a single consumer; a second Subscribe fails.
	SubscriptionExclusive SubscriptionType = "exclusive"
)

func (t SubscriptionType) pulsarType() (apulsar.SubscriptionType, bool) {
	switch t {
	case SubscriptionKeyShared:
		return apulsar.KeyShared, true
	case SubscriptionShared:
		return apulsar.Shared, true
	case SubscriptionFailover:
		return apulsar.Failover, true
	case SubscriptionExclusive:
		return apulsar.Exclusive, true
	}
	return 0, false
}

// InitialPosition is where a new subscription starts reading.
type InitialPosition string

// Initial positions.
const (
	// PositionEarliest starts at the oldest retained message. Default, so that nothing
	// published before the subscription's first start is missed.
	PositionEarliest InitialPosition = "earliest"
	// PositionLatest starts after the last published message.
	PositionLatest InitialPosition = "latest"
)

// DeadLetterPolicy moves a message to a dead-letter topic after it was delivered
// MaxDeliveries times without being acked.
type DeadLetterPolicy struct {
	// MaxDeliveries is the number of deliveries before the message is dead-lettered. Required (>= 1).
	MaxDeliveries uint32
	// Topic is the dead-letter topic, short name or full URL. Default (Pulsar's):
	// <topic>-<subscription>-DLQ.
	Topic string
	// InitialSubscription, if set, is created on the dead-letter topic together with its
	// producer, so dead letters are retained until someone reads them.
	InitialSubscription string
}

// SubscriberConfig configures a Subscriber.
type SubscriberConfig struct {
	Config

	// SubscriptionName is the durable subscription (the consumer group). Required:
	// subscribers sharing a name share the messages, different names each get all of them.
	SubscriptionName string
	// SubscriptionType is key_shared (default), shared, failover or exclusive.
	SubscriptionType SubscriptionType
	// InitialPosition is where a new subscription starts: earliest (default) or latest.
	InitialPosition InitialPosition
	// NackRedeliveryDelay is how long a nacked message waits before redelivery. Default 1s.
	NackRedeliveryDelay time.Duration
	// ReceiverQueueSize is how many messages the consumer prefetches. 0 keeps
	// pulsar-client-go's default (1000).
	ReceiverQueueSize int
	// ConsumerName is an optional name shown in the broker's stats.
	ConsumerName string
	// DeadLetter, if set, enables Pulsar's dead-letter policy.
	DeadLetter *DeadLetterPolicy
}

func (c *SubscriberConfig) setDefaults() {
	c.Config.setDefaults()
	if c.SubscriptionType == "" {
		c.SubscriptionType = SubscriptionKeyShared
	}
	if c.InitialPosition == "" {
		c.InitialPosition = PositionEarliest
	}
	if c.NackRedeliveryDelay == 0 {
		c.NackRedeliveryDelay = DefaultNackRedeliveryDelay
	}
}

// Validate reports the first invalid field, naming it and its value (except secrets).
func (c SubscriberConfig) Validate() error {
	if err := c.Config.Validate(); err != nil {
		return err
	}
	if strings.TrimSpace(c.SubscriptionName) == "" {
		return fmt.Errorf("SubscriptionName %q is required (it names the consumer group)", c.SubscriptionName)
	}
	if _, ok := c.SubscriptionType.pulsarType(); !ok && c.SubscriptionType != "" {
		return fmt.Errorf("SubscriptionType %q is not one of key_shared, shared, failover, exclusive",
			c.SubscriptionType)
	}
	switch c.InitialPosition {
	case "", PositionEarliest, PositionLatest:
	default:
		return fmt.Errorf("InitialPosition %q is not one of earliest, latest", c.InitialPosition)
	}
	if c.NackRedeliveryDelay < 0 {
		return fmt.Errorf("NackRedeliveryDelay %s must not be negative", c.NackRedeliveryDelay)
	}
	if c.ReceiverQueueSize < 0 {
		return fmt.Errorf("ReceiverQueueSize %d must not be negative", c.ReceiverQueueSize)
	}
	if c.DeadLetter != nil {
		if c.DeadLetter.MaxDeliveries < 1 {
			return fmt.Errorf("DeadLetter.MaxDeliveries %d must be at least 1", c.DeadLetter.MaxDeliveries)
		}
		if c.DeadLetter.Topic != "" {
			if _, err := c.Config.FullTopicName(c.DeadLetter.Topic); err != nil {
				return fmt.Errorf("DeadLetter.Topic: %w", err)
			}
		}
	}
	return nil
}
