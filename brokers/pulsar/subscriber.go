package pulsar

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	apulsar "github.com/apache/pulsar-client-go/pulsar"
)

// ErrSubscriberClosed is returned by Subscribe and SubscribeInitialize after Close.
var ErrSubscriberClosed = errors.New("pulsar: subscriber is closed")

// Subscriber is a Watermill message.Subscriber for Apache Pulsar. Every Subscribe call
// opens one consumer on the configured subscription; its channel delivers one message at a
// time and sends the next only after the previous one was acked or nacked.
type Subscriber struct {
	config SubscriberConfig
	logger watermill.LoggerAdapter
	client apulsar.Client
	// failures is the last connection failure the client logged, for errors.
	failures *connFailures

	mu      sync.Mutex
	closed  bool
	closing chan struct{}
	wg      sync.WaitGroup // one per Subscribe, from its start to its consumer's close
}

var (
	_ message.Subscriber           = (*Subscriber)(nil)
	_ message.SubscribeInitializer = (*Subscriber)(nil)
)

// NewSubscriber validates config and connects a Pulsar client.
func NewSubscriber(config SubscriberConfig, logger watermill.LoggerAdapter) (*Subscriber, error) {
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	config.setDefaults()
	if err := config.Validate(); err != nil {
		return nil, fmt.Errorf("pulsar: invalid subscriber config: %w", err)
	}
	failures := &connFailures{}
	client, err := apulsar.NewClient(config.clientOptions(&clientLogger{logger: logger, failures: failures}))
	if err != nil {
		return nil, config.brokerErr("create client for subscriber", err, nil)
	}
	return &Subscriber{
		config: config,
		logger: logger.With(watermill.LogFields{
			"component": "outboxkit.pulsar.subscriber", "subscription": config.SubscriptionName,
		}),
		client:   client,
		failures: failures,
		closing:  make(chan struct{}),
	}, nil
}

// begin registers a Subscribe or SubscribeInitialize call, failing once Close started.
func (s *Subscriber) begin() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrSubscriberClosed
	}
	s.wg.Add(1)
	return nil
}

func (s *Subscriber) consumerOptions(topic string) (apulsar.ConsumerOptions, error) {
	full, err := s.config.FullTopicName(topic)
	if err != nil {
		return apulsar.ConsumerOptions{}, fmt.Errorf("pulsar: subscribe: %w", err)
	}
	subType, _ := s.config.SubscriptionType.pulsarType()
	position := apulsar.SubscriptionPositionEarliest
	if s.config.InitialPosition == PositionLatest {
		position = apulsar.SubscriptionPositionLatest
	}
	opts := apulsar.ConsumerOptions{
		Topic:                          full,
		SubscriptionName:               s.config.SubscriptionName,
		Type:                           subType,
		SubscriptionInitialPosition:    position,
		NackRedeliveryDelay:            s.config.NackRedeliveryDelay,
		ReceiverQueueSize:              s.config.ReceiverQueueSize,
		Name:                           s.config.ConsumerName,
		EnableBatchIndexAcknowledgment: true,
	}
	if dl := s.config.DeadLetter; dl != nil {
		opts.DLQ = &apulsar.DLQPolicy{MaxDeliveries: dl.MaxDeliveries, InitialSubscriptionName: dl.InitialSubscription}
		if dl.Topic != "" {
			// Validated by SubscriberConfig.Validate.
			opts.DLQ.DeadLetterTopic, _ = s.config.FullTopicName(dl.Topic)
		}
	}
	return opts, nil
}

// SubscribeInitialize creates the durable subscription on topic without consuming, so
// messages published afterwards wait for the first Subscribe.
func (s *Subscriber) SubscribeInitialize(topic string) error {
	if err := s.begin(); err != nil {
		return err
	}
	defer s.wg.Done()
	opts, err := s.consumerOptions(topic)
	if err != nil {
		return err
	}
	consumer, err := s.client.Subscribe(opts)
	if err != nil {
		return s.config.brokerErr(fmt.Sprintf("initialize subscription %s on %s", opts.SubscriptionName, opts.Topic), err, s.failures)
	}
	consumer.Close()
	return nil
}

// Subscribe opens a consumer on topic and returns its messages. The channel is closed when
// ctx is done or the Subscriber is closed; an unacked message is then redelivered by the
// broker. Ack and Nack map to Pulsar's ack and nack (redelivery after NackRedeliveryDelay).
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	if err := s.begin(); err != nil {
		return nil, err
	}
	opts, err := s.consumerOptions(topic)
	if err != nil {
		s.wg.Done()
		return nil, err
	}
	consumer, err := s.client.Subscribe(opts)
	if err != nil {
		s.wg.Done()
		return nil, s.config.brokerErr(fmt.Sprintf("subscribe %s on %s", opts.SubscriptionName, opts.Topic), err, s.failures)
	}
	out := make(chan *message.Message)
	logger := s.logger.With(watermill.LogFields{"topic": opts.Topic})
	logger.Debug("Subscribed", nil)
	go func() {
		defer s.wg.Done()
		defer close(out)
		defer consumer.Close()
		s.consume(ctx, consumer, out, logger)
	}()
	return out, nil
}

func (s *Subscriber) consume(ctx context.Context, consumer apulsar.Consumer, out chan<- *message.Message, logger watermill.LoggerAdapter) {
	for {
		var received apulsar.ConsumerMessage
		select {
		case received = <-consumer.Chan():
		case <-s.closing:
			return
		case <-ctx.Done():
			return
		}
		if !s.deliver(ctx, consumer, received.Message, out, logger) {
			return
		}
	}
}

// deliver sends one message and waits for its Ack or Nack; false means stop consuming.
func (s *Subscriber) deliver(ctx context.Context, consumer apulsar.Consumer, pm apulsar.Message, out chan<- *message.Message, logger watermill.LoggerAdapter) bool {
	msg := toWatermillMessage(pm)
	msgCtx, cancel := context.WithCancel(ctx)
	defer cancel() // the message's context ends with its Ack, Nack or the subscription
	msg.SetContext(msgCtx)

	select {
	case out <- msg:
	case <-s.closing:
		return false
	case <-ctx.Done():
		return false
	}

	select {
	case <-msg.Acked():
		s.ack(consumer, pm, msg, logger)
		return true
	case <-msg.Nacked():
		consumer.Nack(pm)
		return true
	case <-s.closing:
	case <-ctx.Done():
	}
	// Stopping: an Ack that raced with it still counts, to spare a redelivery.
	select {
	case <-msg.Acked():
		s.ack(consumer, pm, msg, logger)
	default:
	}
	return false
}

func (s *Subscriber) ack(consumer apulsar.Consumer, pm apulsar.Message, msg *message.Message, logger watermill.LoggerAdapter) {
	if err := consumer.Ack(pm); err != nil {
		// The message will be redelivered: at-least-once, not lost.
		logger.Error("Ack failed, the message will be redelivered", err,
			watermill.LogFields{"message_uuid": msg.UUID, "pulsar_message_id": pm.ID().String()})
	}
}

// toWatermillMessage restores the UUID from UUIDProperty (or, for messages not published
// by this package, uses the Pulsar message ID) and the other properties as metadata.
func toWatermillMessage(pm apulsar.Message) *message.Message {
	props := pm.Properties()
	uuid := props[UUIDProperty]
	if uuid == "" {
		uuid = pm.ID().String()
	}
	msg := message.NewMessage(uuid, pm.Payload())
	for k, v := range props {
		if k != UUIDProperty {
			msg.Metadata.Set(k, v)
		}
	}
	return msg
}

// Close stops every subscription, closing their channels and consumers, then the client.
// It waits for the consume goroutines, so none outlives it. Calling Close again is a no-op.
func (s *Subscriber) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.closing)
	s.mu.Unlock()

	s.wg.Wait()
	s.client.Close()
	return nil
}
