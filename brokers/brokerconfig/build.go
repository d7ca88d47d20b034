package brokerconfig

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/outboxkit/outboxkit/brokers/cloudevents"
	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/brokers/schema"
)

// Brokers holds what Build made from a Config: one Publisher, a way to make Subscribers, and
// for kfake the in-process cluster. Close releases all of it.
type Brokers struct {
	broker    string
	publisher message.Publisher
	newSub    func(group string) (message.Subscriber, error)
	addrs     []string
	cluster   *kfake.Cluster

	mu     sync.Mutex
	subs   []message.Subscriber
	closed bool
}

// Build validates cfg and builds the publisher of the chosen broker (and, for kfake, starts the
// in-process cluster); with format cloudevents the publisher is wrapped by brokers/cloudevents'
// decorator, which keeps the broker publisher's PublishEach and Connect, and with a
// schema_registry url by brokers/schema's (the Confluent wire format; with cloudevents it sets
// content-type and ce_dataschema, which the cloudevents decorator keeps). The caller must Close
// the result. A nil logger discards logs.
func Build(ctx context.Context, cfg Config, logger watermill.LoggerAdapter) (*Brokers, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("broker config: %w", err)
	}
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("broker config: %w", err)
	}
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	b, err := buildBroker(ctx, cfg, logger)
	if err != nil {
		return nil, err
	}
	if cfg.Format == FormatCloudEvents {
		pub, err := cloudevents.NewPublisher(b.publisher, cfg.CloudEvents)
		if err != nil {
			_ = b.Close()
			return nil, fmt.Errorf("broker config: format cloudevents: %w", err)
		}
		b.publisher = pub
	}
	if cfg.SchemaRegistry.On() {
		opts := []schema.PublisherOption{schema.ServerErrorBound(cfg.SchemaRegistry.ServerErrorBound)}
		if cfg.Format == FormatCloudEvents {
			opts = append(opts, schema.CloudEventsAttributes(cfg.SchemaRegistry.URL))
		}
		enc, err := schema.NewEncoderFromConfig(cfg.SchemaRegistry)
		if err == nil {
			b.publisher, err = schema.NewPublisher(b.publisher, enc, opts...)
		}
		if err != nil {
			_ = b.Close()
			return nil, fmt.Errorf("broker config: %w", err)
		}
	}
	return b, nil
}

// buildBroker builds the Brokers of the chosen broker, with its own publisher.
func buildBroker(ctx context.Context, cfg Config, logger watermill.LoggerAdapter) (*Brokers, error) {
	switch cfg.Broker {
	case BrokerKafka:
		return buildKafka(cfg.Kafka, nil, logger)
	case BrokerKFake:
		cluster, err := kfake.NewCluster(
			kfake.NumBrokers(1),
			kfake.AllowAutoTopicCreation(),
			kfake.DefaultNumPartitions(cfg.KFake.Partitions),
		)
		if err != nil {
			return nil, fmt.Errorf("broker kfake: cannot start the in-process cluster: %w", err)
		}
		kcfg := cfg.Kafka
		kcfg.Brokers = cluster.ListenAddrs()
		b, err := buildKafka(kcfg, cluster, logger)
		if err != nil {
			cluster.Close()
			return nil, err
		}
		return b, nil
	case BrokerPulsar:
		return buildPulsar(ctx, cfg.Pulsar, logger)
	case BrokerNATS:
		return buildNATS(cfg.NATS, logger)
	case BrokerRabbitMQ:
		return buildRabbitMQ(cfg.RabbitMQ, logger)
	}
	return nil, fmt.Errorf("broker config: broker %q cannot be built", cfg.Broker) // unreachable after Validate
}

func buildKafka(kcfg kafka.Config, cluster *kfake.Cluster, logger watermill.LoggerAdapter) (*Brokers, error) {
	pub, err := kafka.NewPublisher(kcfg, logger)
	if err != nil {
		return nil, fmt.Errorf("broker kafka: %w", err)
	}
	name := BrokerKafka
	if cluster != nil {
		name = BrokerKFake
	}
	return &Brokers{
		broker:    name,
		publisher: pub,
		addrs:     kcfg.Brokers,
		cluster:   cluster,
		newSub: func(group string) (message.Subscriber, error) {
			c := kcfg
			if group != "" {
				c.ConsumerGroup = group
			}
			sub, err := kafka.NewSubscriber(c, logger)
			if err != nil {
				return nil, fmt.Errorf("broker %s: %w", name, err)
			}
			return sub, nil
		},
	}, nil
}

// Broker returns the name of the broker in use: kafka, pulsar, nats, rabbitmq or kfake.
func (b *Brokers) Broker() string { return b.broker }

// Publisher returns the publisher (with format cloudevents, the CloudEvents decorator around
// the broker's publisher). It stays owned by Brokers: Close closes it.
func (b *Brokers) Publisher() message.Publisher { return b.publisher }

// Addrs returns the Kafka bootstrap addresses in use (for kfake, those of the in-process
// cluster, so other clients can reach it); nil for Pulsar.
func (b *Brokers) Addrs() []string { return append([]string(nil), b.addrs...) }

// NewSubscriber returns a new subscriber in consumer group (Kafka) or subscription (Pulsar)
// group, durable consumer (NATS) group or queue group (RabbitMQ) group; an empty group uses the
// configured kafka.consumer_group / pulsar.subscription_name / nats.consumer_group /
// rabbitmq.consumer_group.
// Close closes it too, if the caller has not already.
func (b *Brokers) NewSubscriber(group string) (message.Subscriber, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, errors.New("broker config: brokers already closed")
	}
	sub, err := b.newSub(group)
	if err != nil {
		return nil, err
	}
	b.subs = append(b.subs, sub)
	return sub, nil
}

// Close closes the subscribers made by NewSubscriber, the publisher and, for kfake, the
// in-process cluster, and returns their errors joined. It is idempotent.
func (b *Brokers) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	var errs []error
	for _, s := range b.subs {
		if err := s.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close subscriber: %w", err))
		}
	}
	if b.publisher != nil {
		if err := b.publisher.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close publisher: %w", err))
		}
	}
	if b.cluster != nil {
		b.cluster.Close()
	}
	return errors.Join(errs...)
}
