package main

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/brokers/nats"
	"github.com/outboxkit/outboxkit/brokers/rabbitmq"
	"github.com/outboxkit/outboxkit/outbox"
)

// record is one message read back: its event id and payload.
type record struct {
	id    string
	value []byte
}

// source reads back what a relay published, from the start of its topic.
type source interface {
	// poll returns the messages that arrived, waiting a little when there are none; it returns
	// early when ctx ends.
	poll(ctx context.Context) []record
	close()
}

// relayPublisher returns the publisher of a relay child and its error classifier: Kafka for
// every relay but outboxkit-nats and outboxkit-rabbitmq.
func relayPublisher(role string, o options) (message.Publisher, func(error) bool, error) {
	switch role {
	case relayNATS:
		pub, err := nats.NewPublisher(nats.Config{URLs: []string{o.natsURL}}, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("nats publisher: %w", err)
		}
		return pub, nats.Retriable, nil
	case relayRabbitMQ:
		pub, err := rabbitmq.NewPublisher(rabbitmq.Config{URL: o.rabbitMQ}, nil)
		if err != nil {
			return nil, nil, fmt.Errorf("rabbitmq publisher: %w", err)
		}
		return pub, rabbitmq.Retriable, nil
	}
	pub, err := kafka.NewPublisher(kafka.Config{Brokers: o.brokers, Compression: o.compress}, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("kafka publisher: %w", err)
	}
	return pub, kafka.Retriable, nil
}

// newSource returns the reader of the broker relay publishes to.
func newSource(relay string, o options, topic string) (source, error) {
	switch relay {
	case relayNATS:
		return newNATSSource(o.natsURL, topic)
	case relayRabbitMQ:
		return newRabbitMQSource(o.rabbitMQ, topic)
	}
	client, err := newConsumer(o.brokers, topic)
	if err != nil {
		return nil, fmt.Errorf("kafka consumer: %w", err)
	}
	return kafkaSource{client}, nil
}

// natsSource reads the stream of a topic (brokers/nats' layout) with an ordered consumer, once
// the relay's first publish created the stream, through pull requests of up to 1000 messages.
type natsSource struct {
	nc    *natsgo.Conn
	js    jetstream.JetStream
	topic string
	cons  jetstream.Consumer
	batch jetstream.MessageBatch // the pull request being read, nil between two
}

func newNATSSource(server, topic string) (*natsSource, error) {
	nc, err := natsgo.Connect(server)
	if err != nil {
		return nil, fmt.Errorf("nats consumer: %w", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("nats consumer: %w", err)
	}
	return &natsSource{nc: nc, js: js, topic: topic}, nil
}

// poll waits up to 200 ms for a first message, then returns it with the ones already there.
func (s *natsSource) poll(ctx context.Context) []record {
	if s.cons == nil {
		cons, err := s.js.OrderedConsumer(ctx, nats.StreamName(s.topic), jetstream.OrderedConsumerConfig{})
		if err != nil {
			wait(ctx, 50*time.Millisecond) // the stream is not created yet
			return nil
		}
		s.cons = cons
	}
	if s.batch == nil {
		batch, err := s.cons.Fetch(1000, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			wait(ctx, 50*time.Millisecond)
			return nil
		}
		s.batch = batch
	}
	var out []record
	timeout := time.After(200 * time.Millisecond)
	for {
		var m jetstream.Msg
		var ok bool
		if len(out) == 0 {
			select {
			case m, ok = <-s.batch.Messages():
			case <-timeout:
				return out
			case <-ctx.Done():
				return out
			}
		} else {
			select {
			case m, ok = <-s.batch.Messages():
			default:
				return out
			}
		}
		if !ok {
			s.batch = nil // done: the next poll asks for more
			return out
		}
		out = append(out, record{id: m.Headers().Get(outbox.MetadataEventID), value: m.Data()})
	}
}

func (s *natsSource) close() { s.nc.Close() }

// rabbitMQSource consumes the queue of a topic (brokers/rabbitmq's layout with its defaults),
// declaring it first as the publisher does, so nothing published before is missed.
type rabbitMQSource struct {
	conn       *amqp.Connection
	deliveries <-chan amqp.Delivery
}

func newRabbitMQSource(server, topic string) (*rabbitMQSource, error) {
	conn, err := amqp.Dial(server)
	if err != nil {
		return nil, fmt.Errorf("rabbitmq consumer: %w", err)
	}
	ch, err := conn.Channel()
	if err == nil {
		err = declareQueue(ch, topic)
	}
	if err == nil {
		err = ch.Qos(2000, 0, false)
	}
	var deliveries <-chan amqp.Delivery
	if err == nil {
		deliveries, err = ch.Consume(topic, "relaybench", true, false, false, false, nil)
	}
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("rabbitmq consumer of %s: %w", topic, err)
	}
	return &rabbitMQSource{conn: conn, deliveries: deliveries}, nil
}

// declareQueue declares the exchange and queue of topic with brokers/rabbitmq's arguments.
func declareQueue(ch *amqp.Channel, topic string) error {
	cfg := rabbitmq.Config{}
	cfg.SetDefaults()
	if err := ch.ExchangeDeclare(topic, amqp.ExchangeDirect, true, false, false, false, nil); err != nil {
		return err
	}
	args := amqp.Table{"x-queue-type": cfg.QueueType, "x-single-active-consumer": true}
	if _, err := ch.QueueDeclare(topic, true, false, false, false, args); err != nil {
		return err
	}
	return ch.QueueBind(topic, cfg.RoutingKey(topic, ""), topic, false, nil)
}

// poll waits up to 200 ms for a first message, then returns it with the ones already there.
func (s *rabbitMQSource) poll(ctx context.Context) []record {
	var out []record
	timeout := time.After(200 * time.Millisecond)
	for {
		var d amqp.Delivery
		var ok bool
		if len(out) == 0 {
			select {
			case d, ok = <-s.deliveries:
			case <-timeout:
				return out
			case <-ctx.Done():
				return out
			}
		} else {
			select {
			case d, ok = <-s.deliveries:
			default:
				return out
			}
		}
		if !ok {
			return out
		}
		id, _ := d.Headers[outbox.MetadataEventID].(string)
		out = append(out, record{id: id, value: d.Body})
	}
}

func (s *rabbitMQSource) close() { _ = s.conn.Close() }

// redactedURL hides the password of an AMQP URL.
func redactedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

// wait sleeps for d or until ctx ends.
func wait(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
