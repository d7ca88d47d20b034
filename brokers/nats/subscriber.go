package nats

import (
	"context"
	"errors"
	"fmt"

	"github.com/ThreeDotsLabs/watermill"
	wmnats "github.com/ThreeDotsLabs/watermill-nats/v2/pkg/nats"
	"github.com/ThreeDotsLabs/watermill/message"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Subscriber is a Watermill message.Subscriber for NATS JetStream: watermill-nats v2's
// subscriber (pkg/nats in JetStream mode) on the streams and subjects of this package. With
// Config.ConsumerGroup it consumes through a durable queue consumer of that name (one per
// topic's stream, created by this package and never deleted by it), shared by every subscriber
// of the group and resumed after a restart; without
// one, through an ephemeral consumer that starts at the stream's first message. Ack is a
// synchronous JetStream ack (the server confirmed it), Nack a NAK (redelivered after
// Config.NakDelay). Messages are handed out one at a time per subscription, in stream order.
type Subscriber struct {
	config  Config
	nc      *natsgo.Conn
	streams *streams
	inner   *wmnats.Subscriber
	js      jetstream.JetStream
}

var _ message.Subscriber = (*Subscriber)(nil)

// NewSubscriber validates config, fills its defaults and connects.
func NewSubscriber(config Config, logger watermill.LoggerAdapter) (*Subscriber, error) {
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	config.SetDefaults()
	if err := config.Validate(); err != nil {
		return nil, fmt.Errorf("nats: %w", err)
	}
	nc, err := config.connect()
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: jetstream: %w", err)
	}
	inner, err := wmnats.NewSubscriberWithNatsConn(nc, config.subscriptionConfig(), logger)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats: %w", err)
	}
	return &Subscriber{config: config, nc: nc, streams: newStreams(config, js), inner: inner, js: js}, nil
}

// subscriptionConfig is watermill-nats' configuration for this one.
func (c Config) subscriptionConfig() wmnats.SubscriberSubscriptionConfig {
	// ManualAck: without it nats.go acknowledges every message once the callback returns, also
	// the ones watermill-nats' subscriber discards unacknowledged while closing; those were lost
	// (Watermill's TestContinueAfterSubscribeClose caught it).
	subOpts := []natsgo.SubOpt{natsgo.ManualAck(), natsgo.DeliverAll(), natsgo.AckExplicit(), natsgo.AckWait(c.AckWait)}
	if c.MaxDeliver > 0 {
		subOpts = append(subOpts, natsgo.MaxDeliver(c.MaxDeliver))
	}
	var delay wmnats.Delay
	if c.NakDelay > 0 {
		delay = wmnats.NewStaticDelay(c.NakDelay)
	}
	group := c.ConsumerGroup
	return wmnats.SubscriberSubscriptionConfig{
		Unmarshaler:      &wmnats.NATSMarshaler{},
		SubscribersCount: c.SubscribersCount,
		AckWaitTimeout:   c.AckWait,
		CloseTimeout:     c.CloseTimeout,
		SubscribeTimeout: c.ConnectTimeout,
		SubjectCalculator: func(queueGroup, topic string) *wmnats.SubjectDetail {
			return &wmnats.SubjectDetail{Primary: c.filterSubject(topic), QueueGroup: queueGroup}
		},
		NakDelay:         delay,
		QueueGroupPrefix: group,
		JetStream: wmnats.JetStreamConfig{
			AutoProvision:    false, // streams are this package's (see streams.ensure)
			SubscribeOptions: subOpts,
			AckAsync:         false,
			DurablePrefix:    group,
			// A consumer name is unique per stream: the group's name is enough.
			DurableCalculator: func(prefix, _ string) string { return prefix },
		},
	}
}

// Subscribe creates the stream of topic if missing (unless Config.DisableStreamCreation) and
// consumes it until ctx is done or the subscriber is closed.
func (s *Subscriber) Subscribe(ctx context.Context, topic string) (<-chan *message.Message, error) {
	if err := s.SubscribeInitialize(topic); err != nil {
		return nil, err
	}
	if s.config.ConsumerGroup != "" {
		if err := s.ensureConsumer(topic); err != nil {
			return nil, err
		}
	}
	return s.inner.Subscribe(ctx, topic)
}

// ensureConsumer creates the durable consumer of the group on the topic's stream if it is
// missing. nats.go deletes a consumer it created itself when its subscription ends, which would
// make every restarted subscriber of a group start over at the stream's first message; a
// consumer created here outlives the subscriptions, which only bind to it. Its settings are the
// ones nats.go checks when binding (subscriptionConfig's options).
func (s *Subscriber) ensureConsumer(topic string) error {
	ctx, cancel := context.WithTimeout(context.Background(), s.config.PublishTimeout)
	defer cancel()
	stream := StreamName(topic)
	_, err := s.js.PushConsumer(ctx, stream, s.config.ConsumerGroup)
	if err == nil {
		return nil
	}
	if !errors.Is(err, jetstream.ErrConsumerNotFound) {
		return fmt.Errorf("nats: consumer %s of stream %s: %w", s.config.ConsumerGroup, stream, err)
	}
	cc := jetstream.ConsumerConfig{
		Durable:        s.config.ConsumerGroup,
		DeliverSubject: natsgo.NewInbox(),
		DeliverGroup:   s.config.ConsumerGroup,
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		AckPolicy:      jetstream.AckExplicitPolicy,
		AckWait:        s.config.AckWait,
		MaxDeliver:     s.config.MaxDeliver,
		FilterSubject:  s.config.filterSubject(topic),
	}
	if cc.MaxDeliver == 0 {
		cc.MaxDeliver = -1
	}
	_, err = s.js.CreatePushConsumer(ctx, stream, cc)
	if err != nil && !errors.Is(err, jetstream.ErrConsumerExists) {
		return fmt.Errorf("nats: create consumer %s of stream %s: %w", s.config.ConsumerGroup, stream, err)
	}
	return nil
}

// SubscribeInitialize creates the stream of topic if missing (unless
// Config.DisableStreamCreation) and checks that it holds the topic's subjects.
func (s *Subscriber) SubscribeInitialize(topic string) error {
	if err := checkTopic(topic); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.config.PublishTimeout)
	defer cancel()
	_, err := s.streams.ensure(ctx, topic)
	return err
}

// Close stops the subscriptions, waits up to Config.CloseTimeout for the handlers and drains
// the connection.
func (s *Subscriber) Close() error {
	return s.inner.Close()
}
