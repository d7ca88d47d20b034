package main

import (
	"context"
	"net/url"
	"time"

	apulsar "github.com/apache/pulsar-client-go/pulsar"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxkit/outboxkit/brokers/nats"
	"github.com/outboxkit/outboxkit/brokers/pulsar"
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

// firstWait is how long a poll of a channel-fed source waits for its first message.
const firstWait = 200 * time.Millisecond

// pollChan waits up to firstWait for a first value of ch, then takes the values already
// there, each turned into a record by rec. open is false once ch is closed.
func pollChan[T any](ctx context.Context, ch <-chan T, rec func(T) record) (out []record, open bool) {
	timeout := time.NewTimer(firstWait)
	defer timeout.Stop()
	for {
		var v T
		var ok bool
		if len(out) == 0 {
			select {
			case v, ok = <-ch:
			case <-timeout.C:
				return out, true
			case <-ctx.Done():
				return out, true
			}
		} else {
			select {
			case v, ok = <-ch:
			default:
				return out, true
			}
		}
		if !ok {
			return out, false
		}
		out = append(out, rec(v))
	}
}

func newKafkaSource(o options, topic string) (source, error) {
	if err := createTopic(o.brokers, topic); err != nil {
		return nil, err
	}
	client, err := newConsumer(o.brokers, topic)
	if err != nil {
		return nil, err
	}
	return kafkaSource{client}, nil
}

// pulsarSource reads a topic (brokers/pulsar's full name of it) from its earliest message with
// an exclusive subscription made before the relay starts, so nothing published is missed.
type pulsarSource struct {
	client   apulsar.Client
	consumer apulsar.Consumer
}

func newPulsarSource(o options, topic string) (source, error) {
	full, err := pulsar.Config{}.FullTopicName(topic)
	if err != nil {
		return nil, err
	}
	client, err := apulsar.NewClient(apulsar.ClientOptions{URL: o.pulsarURL, Logger: pulsar.NewClientLogger(nil)})
	if err != nil {
		return nil, err
	}
	consumer, err := client.Subscribe(apulsar.ConsumerOptions{Topic: full, SubscriptionName: "relaybench",
		Type: apulsar.Exclusive, SubscriptionInitialPosition: apulsar.SubscriptionPositionEarliest,
		ReceiverQueueSize: 2000})
	if err != nil {
		client.Close()
		return nil, err
	}
	return &pulsarSource{client: client, consumer: consumer}, nil
}

func (s *pulsarSource) poll(ctx context.Context) []record {
	out, _ := pollChan(ctx, s.consumer.Chan(), func(m apulsar.ConsumerMessage) record {
		_ = s.consumer.AckID(m.ID()) // acknowledgements are grouped; a lost one costs nothing here
		return record{id: m.Properties()[outbox.MetadataEventID], value: m.Payload()}
	})
	return out
}

// close drops the subscription, so the broker does not keep the topic's messages for it.
func (s *pulsarSource) close() {
	_ = s.consumer.Unsubscribe()
	s.consumer.Close()
	s.client.Close()
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

func newNATSSource(o options, topic string) (source, error) {
	nc, err := natsgo.Connect(o.natsURL)
	if err != nil {
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &natsSource{nc: nc, js: js, topic: topic}, nil
}

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
	out, open := pollChan(ctx, s.batch.Messages(), func(m jetstream.Msg) record {
		return record{id: m.Headers().Get(outbox.MetadataEventID), value: m.Data()}
	})
	if !open {
		s.batch = nil // done: the next poll asks for more
	}
	return out
}

func (s *natsSource) close() { s.nc.Close() }

// rabbitMQSource consumes the queue of a topic (brokers/rabbitmq's layout with its defaults),
// declaring it first as the publisher does, so nothing published before is missed.
type rabbitMQSource struct {
	conn       *amqp.Connection
	deliveries <-chan amqp.Delivery
}

func newRabbitMQSource(o options, topic string) (source, error) {
	conn, err := amqp.Dial(o.rabbitMQ)
	if err != nil {
		return nil, err
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
		return nil, err
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

func (s *rabbitMQSource) poll(ctx context.Context) []record {
	out, _ := pollChan(ctx, s.deliveries, func(d amqp.Delivery) record {
		id, _ := d.Headers[outbox.MetadataEventID].(string)
		return record{id: id, value: d.Body}
	})
	return out
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
