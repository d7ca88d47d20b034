package pulsar

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	apulsar "github.com/apache/pulsar-client-go/pulsar"
)

// ErrPublisherClosed is returned by Publish after Close.
var ErrPublisherClosed = errors.New("pulsar: publisher is closed")

// Publisher is a Watermill message.Publisher for Apache Pulsar. It keeps one producer per
// topic, created on first use. Publish returns only after the broker acknowledged every
// message it was given.
type Publisher struct {
	config PublisherConfig
	logger watermill.LoggerAdapter
	client apulsar.Client

	// closeMu is held for reading by every Publish and for writing by Close, so Close waits
	// for in-flight publishes (bounded by SendTimeout) and later publishes see closed.
	closeMu sync.RWMutex
	closed  bool

	mu        sync.Mutex
	producers map[string]*producerSlot
}

// producerSlot lets concurrent first publishes to one topic wait for a single creation.
type producerSlot struct {
	ready    chan struct{}
	producer apulsar.Producer
	err      error
}

var _ message.Publisher = (*Publisher)(nil)

// NewPublisher validates config and connects a Pulsar client. Producers are created lazily.
func NewPublisher(config PublisherConfig, logger watermill.LoggerAdapter) (*Publisher, error) {
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	config.setDefaults()
	if err := config.Validate(); err != nil {
		return nil, fmt.Errorf("pulsar: invalid publisher config: %w", err)
	}
	client, err := apulsar.NewClient(config.clientOptions(&clientLogger{logger: logger}))
	if err != nil {
		return nil, fmt.Errorf("pulsar: create client for publisher: %w", err)
	}
	return &Publisher{
		config:    config,
		logger:    logger.With(watermill.LogFields{"component": "pulsar_publisher"}),
		client:    client,
		producers: map[string]*producerSlot{},
	}, nil
}

// Publish sends msgs to topic and returns after the broker acknowledged every one of them.
// All messages are queued with SendAsync and the batch is flushed at once, so many messages
// cost one round trip. Every failure is returned (joined), naming the message UUID.
// Messages go out in the given order; the metadata entry named by KeyMetadata becomes the
// Pulsar key and ordering key.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	p.closeMu.RLock()
	defer p.closeMu.RUnlock()
	if p.closed {
		return ErrPublisherClosed
	}
	if len(msgs) == 0 {
		return nil
	}
	for i, msg := range msgs {
		if msg == nil {
			return fmt.Errorf("pulsar: publish to %s: message %d of %d is nil", topic, i, len(msgs))
		}
	}
	producer, err := p.producer(topic)
	if err != nil {
		return err
	}

	// Results arrive on a buffered channel so a callback never blocks, even one that fires
	// after Publish gave up waiting.
	results := make(chan error, len(msgs))
	for _, msg := range msgs {
		ctx := msg.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		producer.SendAsync(ctx, p.toProducerMessage(msg), func(_ apulsar.MessageID, _ *apulsar.ProducerMessage, err error) {
			if err != nil {
				err = fmt.Errorf("pulsar: publish message %s to %s: %w", msg.UUID, producer.Topic(), err)
			}
			results <- err
		})
	}
	if !p.config.DisableBatching {
		// Sends the current batch now instead of after BatchingMaxPublishDelay. A flush
		// error concerns the same messages, whose callbacks report it individually.
		ctx, cancel := context.WithTimeout(context.Background(), p.config.SendTimeout)
		if err := producer.FlushWithCtx(ctx); err != nil {
			p.logger.Debug("Flush reported an error; per-message results follow",
				watermill.LogFields{"topic": producer.Topic(), "err": err.Error()})
		}
		cancel()
	}

	// pulsar-client-go fails every pending message after SendTimeout; the extra margin only
	// guards against a callback that never comes, so Publish cannot hang.
	deadline := time.NewTimer(p.config.SendTimeout + p.config.OperationTimeout)
	defer deadline.Stop()
	var errs []error
	for received := 0; received < len(msgs); received++ {
		select {
		case err := <-results:
			if err != nil {
				errs = append(errs, err)
			}
		case <-deadline.C:
			errs = append(errs, fmt.Errorf("pulsar: publish to %s: %d of %d messages not acknowledged within %s",
				producer.Topic(), len(msgs)-received, len(msgs), p.config.SendTimeout+p.config.OperationTimeout))
			return errors.Join(errs...)
		}
	}
	return errors.Join(errs...)
}

func (p *Publisher) toProducerMessage(msg *message.Message) *apulsar.ProducerMessage {
	props := make(map[string]string, len(msg.Metadata)+1)
	for k, v := range msg.Metadata {
		props[k] = v
	}
	props[UUIDProperty] = msg.UUID
	payload := msg.Payload
	if payload == nil {
		payload = []byte{}
	}
	pm := &apulsar.ProducerMessage{Payload: payload, Properties: props}
	if key := msg.Metadata.Get(p.config.KeyMetadata); key != "" {
		pm.Key = key
		pm.OrderingKey = key
	}
	return pm
}

// Connect creates (and caches) the producer of topic now rather than at the first Publish, so
// that an unreachable broker or refused credentials show at start: pulsar-client-go connects
// lazily. It is bounded by OperationTimeout.
func (p *Publisher) Connect(topic string) error {
	p.closeMu.RLock()
	defer p.closeMu.RUnlock()
	if p.closed {
		return ErrPublisherClosed
	}
	_, err := p.producer(topic)
	return err
}

// producer returns the cached producer of topic, creating it on first use.
func (p *Publisher) producer(topic string) (apulsar.Producer, error) {
	full, err := p.config.FullTopicName(topic)
	if err != nil {
		return nil, fmt.Errorf("pulsar: publish: %w", err)
	}
	p.mu.Lock()
	slot, ok := p.producers[full]
	if ok {
		p.mu.Unlock()
		<-slot.ready
		return slot.producer, slot.err
	}
	slot = &producerSlot{ready: make(chan struct{})}
	p.producers[full] = slot
	p.mu.Unlock()

	slot.producer, slot.err = p.createProducer(full)
	if slot.err != nil {
		p.mu.Lock()
		delete(p.producers, full) // the next Publish tries again
		p.mu.Unlock()
	}
	close(slot.ready)
	return slot.producer, slot.err
}

func (p *Publisher) createProducer(topic string) (apulsar.Producer, error) {
	compression, _ := p.config.Compression.pulsarType()
	opts := apulsar.ProducerOptions{
		Topic:                   topic,
		SendTimeout:             p.config.SendTimeout,
		MaxPendingMessages:      p.config.MaxPendingMessages,
		DisableBatching:         p.config.DisableBatching,
		BatchingMaxPublishDelay: p.config.BatchingMaxPublishDelay,
		BatchingMaxMessages:     p.config.BatchingMaxMessages,
		BatchingMaxSize:         p.config.BatchingMaxSize,
		CompressionType:         compression,
	}
	if !p.config.MixedKeyBatches {
		opts.BatcherBuilderType = apulsar.KeyBasedBatchBuilder
	}
	producer, err := p.client.CreateProducer(opts)
	if err != nil {
		return nil, fmt.Errorf("pulsar: create producer for %s: %w", topic, err)
	}
	p.logger.Debug("Created producer", watermill.LogFields{"topic": topic, "producer": producer.Name()})
	return producer, nil
}

// Close flushes and closes every producer, then the client. Publish afterwards returns
// ErrPublisherClosed. Calling Close again is a no-op.
func (p *Publisher) Close() error {
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true

	p.mu.Lock()
	producers := p.producers
	p.producers = nil
	p.mu.Unlock()
	for topic, slot := range producers {
		<-slot.ready
		if slot.producer == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.config.SendTimeout)
		// Every Publish has returned by now (closeMu), so nothing of ours is pending: a
		// flush error here cannot mean a lost message and is only logged.
		if err := slot.producer.FlushWithCtx(ctx); err != nil && !errors.Is(err, apulsar.ErrProducerClosed) {
			p.logger.Info("Flush on close failed", watermill.LogFields{"topic": topic, "err": err.Error()})
		}
		cancel()
		slot.producer.Close()
	}
	p.client.Close()
	return nil
}
