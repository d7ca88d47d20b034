package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ThreeDotsLabs/watermill"
	wmamqp "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill/message"
	amqp "github.com/rabbitmq/amqp091-go"
)

// UUIDHeader is the header holding the Watermill message UUID: watermill-amqp's own
// (DefaultMarshaler), so its subscribers read these messages too.
const UUIDHeader = wmamqp.DefaultMessageUUIDHeaderKey

// maxFieldName is the longest AMQP field name (a short string).
const maxFieldName = 255

// Publisher is a Watermill message.Publisher for RabbitMQ and the relay's
// forwarder.OutcomePublisher. It declares a topic's exchange and queues on first use (unless
// Config.DisableTopology) and returns from Publish and PublishEach only once the broker
// confirmed, returned or failed every message.
type Publisher struct {
	config    Config
	logger    watermill.LoggerAdapter
	conn      *connector
	pool      *channelPool
	topology  *topology
	marshaler wmamqp.DefaultMarshaler
	// serverLimit is the server's max_message_size once a refusal named it (serverlimit.go),
	// 0 before.
	serverLimit atomic.Int64

	// closeMu is held for reading by every publish call and for writing by Close; closing is
	// closed first, so the calls in flight stop waiting and Close does not wait for their
	// confirmations.
	closeMu   sync.RWMutex
	closed    bool
	closing   chan struct{}
	closeOnce sync.Once
}

var _ message.Publisher = (*Publisher)(nil)

// NewPublisher validates config, fills its defaults and connects (so that an unreachable
// server or refused credentials are known at once). Topics are declared lazily.
func NewPublisher(config Config, logger watermill.LoggerAdapter) (*Publisher, error) {
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	config.SetDefaults()
	if err := config.Validate(); err != nil {
		return nil, fmt.Errorf("rabbitmq: %w", err)
	}
	conn := &connector{config: config}
	ch, err := conn.channel()
	if err != nil {
		return nil, err
	}
	_ = ch.Close()
	return &Publisher{
		config:   config,
		logger:   logger,
		conn:     conn,
		pool:     newChannelPool(conn, config.ChannelPool),
		topology: newTopology(config, conn),
		closing:  make(chan struct{}),
	}, nil
}

// Publish publishes msgs to topic and returns once each was confirmed; the error joins the
// failures of PublishEach. Messages of one key (Config.KeyMetadata) are stored in the given
// order.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	return errors.Join(p.PublishEach(context.Background(), topic, msgs)...)
}

// Connect declares the topology of topic now, so that an unreachable server, refused
// credentials or a conflicting queue declaration stop a relay at start (cmd/outboxkit calls it
// on the dead-letter topic).
func (p *Publisher) Connect(topic string) error {
	if err := checkTopic(topic); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.config.PublishTimeout)
	defer cancel()
	ch, err := p.conn.channel()
	if err != nil {
		return err
	}
	_ = ch.Close()
	return p.topology.ensure(ctx, topic)
}

// Close stops the calls in flight (their messages without a confirmation fail with
// ErrPublisherClosed), waits for them to return and closes the connection. Idempotent.
func (p *Publisher) Close() error {
	p.closeOnce.Do(func() { close(p.closing) })
	p.closeMu.Lock()
	defer p.closeMu.Unlock()
	if p.closed {
		return nil
	}
	p.closed = true
	p.pool.drain()
	p.conn.close()
	return nil
}

// Retriable classifies the publisher's errors (see the package function Retriable). The
// forwarder uses it when its Config.IsRetriable is not set (forwarder.ErrorClassifier).
func (p *Publisher) Retriable(err error) bool { return Retriable(err) }

// publishing converts msg to the AMQP message: watermill-amqp's format (payload as the body,
// metadata as headers, the UUID in UUIDHeader, persistent), with the UUID as message-id, by
// which a basic.return is matched to its message.
func (p *Publisher) publishing(msg *message.Message) (amqp.Publishing, error) {
	if err := p.checkSize(msg.UUID, msg.Payload); err != nil {
		return amqp.Publishing{}, err
	}
	if len(msg.UUID) > maxFieldName {
		return amqp.Publishing{}, fmt.Errorf("rabbitmq: message UUID %.40q... longer than %d bytes: %w", msg.UUID, maxFieldName, ErrInvalidMessage)
	}
	for k, v := range msg.Metadata {
		if k == "" || len(k) > maxFieldName {
			return amqp.Publishing{}, fmt.Errorf("rabbitmq: message %s: metadata entry %.40q is not an AMQP header name "+
				"(1 to %d bytes): %w", msg.UUID, k, maxFieldName, ErrInvalidMessage)
		}
		if k == UUIDHeader && v != msg.UUID {
			return amqp.Publishing{}, fmt.Errorf("rabbitmq: message %s: metadata entry %s is reserved for the message UUID (has %q): %w",
				msg.UUID, k, v, ErrInvalidMessage)
		}
	}
	pub, err := p.marshaler.Marshal(msg)
	if err != nil {
		return amqp.Publishing{}, fmt.Errorf("rabbitmq: message %s: %w: %w", msg.UUID, ErrInvalidMessage, err)
	}
	pub.MessageId = msg.UUID
	return pub, nil
}
