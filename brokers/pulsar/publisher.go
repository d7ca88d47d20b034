package pulsar

import (
	"context"
	"errors"
	"fmt"
	"strings"
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
	// newProducer is client.CreateProducer (a seam for tests that inject creation failures).
	newProducer func(apulsar.ProducerOptions) (apulsar.Producer, error)
	// failures is the last connection failure the client logged, for errors.
	failures *connFailures

	// closeMu is held for reading by every Publish and for writing by Close, so Close waits
	// for in-flight publishes (bounded by SendTimeout) and later publishes see closed.
	closeMu sync.RWMutex
	closed  bool

	mu        sync.Mutex
	producers map[string]*producerSlot
	// schemas caches the client's schema of each schema PublishEachWithSchema is handed.
	schemas clientSchemas

	// retiring counts the producers being closed in the background by retire; Close waits
	// for them.
	retiring sync.WaitGroup
}

// producerSlot lets concurrent first publishes to one topic wait for a single creation.
type producerSlot struct {
	ready    chan struct{}
	producer apulsar.Producer
	err      error

	// sendMu is held for reading while a call hands messages over (SendAsync, Flush) and for
	// writing by retire before it closes the producer: pulsar-client-go closes the
	// producer's channels on Close, and a concurrent SendAsync or Flush would send on a
	// closed channel.
	sendMu sync.RWMutex
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
	failures := &connFailures{}
	client, err := apulsar.NewClient(config.clientOptions(&clientLogger{logger: logger, failures: failures}))
	if err != nil {
		return nil, config.brokerErr("create client for publisher", err, nil)
	}
	return &Publisher{
		config:      config,
		failures:    failures,
		logger:      logger.With(watermill.LogFields{"component": "outboxkit.pulsar.publisher"}),
		client:      client,
		newProducer: client.CreateProducer,
		producers:   map[string]*producerSlot{},
	}, nil
}

// Publish sends msgs to topic and returns after the broker acknowledged every one of them.
// It is PublishEach without a context (SendTimeout still bounds it): every failure is
// returned, joined, each naming the message UUID and the topic. Messages go out in the
// given order; the metadata entry named by KeyMetadata becomes the Pulsar key and ordering key.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	return errors.Join(p.PublishEach(context.Background(), topic, msgs)...)
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
	full, err := p.config.FullTopicName(topic)
	if err != nil {
		return fmt.Errorf("pulsar: connect: %w", err)
	}
	_, err = p.producer(context.Background(), full)
	return err
}

// producer returns the slot of the cached producer of the full topic name, creating the
// producer on first use (see createProducer for ctx). The caller holds closeMu for reading.
func (p *Publisher) producer(ctx context.Context, full string) (*producerSlot, error) {
	p.mu.Lock()
	slot, ok := p.producers[full]
	if ok {
		p.mu.Unlock()
		<-slot.ready
		return slot, slot.err
	}
	slot = &producerSlot{ready: make(chan struct{})}
	p.producers[full] = slot
	p.mu.Unlock()

	slot.producer, slot.err = p.createProducer(ctx, full)
	if slot.err != nil {
		p.mu.Lock()
		delete(p.producers, full) // the next Publish tries again
		p.mu.Unlock()
	}
	close(slot.ready)
	return slot, slot.err
}

// retire removes the producer of slot from the cache, so the next call creates a new one,
// and closes it in the background (bounded by OperationTimeout; Close waits for it).
// Closing fails every message still pending in it at once, in its queue order
// (failPendingMessages), so no message of a call that gave up waiting is sent later. The
// caller holds closeMu for reading.
func (p *Publisher) retire(full string, slot *producerSlot) {
	p.mu.Lock()
	if p.producers[full] != slot {
		p.mu.Unlock()
		return // already retired
	}
	delete(p.producers, full)
	p.mu.Unlock()
	p.logger.Info("Replacing the producer: a publish gave up waiting for acknowledgements",
		watermill.LogFields{"topic": full, "producer": slot.producer.Name()})
	p.retiring.Add(1)
	go func() {
		defer p.retiring.Done()
		slot.sendMu.Lock() // no SendAsync or Flush in progress on it
		defer slot.sendMu.Unlock()
		slot.producer.Close()
	}()
}

// createAttempts bounds the creations of one producer that a call tries when the pooled
// connection closes under them; createRetryDelay is the pause before the second one (doubled
// before each further one).
const (
	createAttempts   = 3
	createRetryDelay = 100 * time.Millisecond
)

// createProducer creates the producer of topic. A creation that fails because the pooled
// connection it was sent on closed meanwhile (pulsar-client-go's "connection closed", seen
// when the broker or the client drops the connection while a retired producer is closed) is
// tried again, up to createAttempts in all and while ctx is not done: the client's pool
// replaces a closed connection, so the next creation goes over a fresh one. Any other error
// is returned at once (pulsar-client-go already retried connecting within OperationTimeout).
func (p *Publisher) createProducer(ctx context.Context, topic string) (apulsar.Producer, error) {
	opts := p.producerOptions(topic)
	delay := createRetryDelay
	for attempt := 1; ; attempt++ {
		producer, err := p.newProducer(opts)
		if err == nil {
			p.logger.Debug("Created producer", watermill.LogFields{"topic": topic, "producer": producer.Name()})
			return producer, nil
		}
		retry := isConnectionClosed(err) && attempt < createAttempts && ctx.Err() == nil
		err = p.config.brokerErr("create producer for "+topic, err, p.failures)
		if !retry {
			return nil, err
		}
		p.logger.Info("Creating the producer failed on a closed connection; trying again on a fresh one",
			watermill.LogFields{"topic": topic, "attempt": attempt, "error": err.Error()})
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil, err
		case <-timer.C:
		}
		delay *= 2
	}
}

// isConnectionClosed reports whether err is pulsar-client-go's error for a request whose
// connection closed before the answer (internal.ErrConnectionClosed, which is not exported:
// only its text identifies it).
func isConnectionClosed(err error) bool {
	return strings.HasSuffix(err.Error(), "connection closed")
}

// producerOptions are the options of the producer of topic.
func (p *Publisher) producerOptions(topic string) apulsar.ProducerOptions {
	compression, _ := p.config.Compression.pulsarType()
	opts := apulsar.ProducerOptions{
		Topic: topic,
		// pulsar-client-go's own send timeout is off: it fails the oldest pending messages
		// one by one while later ones may still be acknowledged, which would leave gaps in
		// a key. PublishEach enforces SendTimeout itself and retires the producer instead
		// (see outcome.go).
		SendTimeout:             -1,
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
	return opts
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
	p.retiring.Wait()
	for topic, slot := range producers {
		<-slot.ready
		if slot.producer == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), p.config.SendTimeout)
		// Every Publish has returned by now (closeMu), so nothing of ours is pending: a
		// flush error here cannot mean a lost message and is only logged.
		if err := slot.producer.FlushWithCtx(ctx); err != nil && !errors.Is(err, apulsar.ErrProducerClosed) {
			p.logger.Info("Flush on close failed", watermill.LogFields{"topic": topic, "error": err.Error()})
		}
		cancel()
		slot.producer.Close()
	}
	p.client.Close()
	return nil
}
