package faultinject

import (
	"context"
	"errors"
	"fmt"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/outboxkit/outboxkit/brokers/nats"
	"github.com/outboxkit/outboxkit/brokers/rabbitmq"
	"github.com/outboxkit/outboxkit/outbox"
)

// consumeNATS reads the stream of topic (brokers/nats' layout, one subject per topic) in stream
// order from its first sequence, until ctx is cancelled, through JetStream's ordered consumer:
// the client's own in-order reader, which recreates its server-side consumer from the last
// sequence it delivered whenever it misses one or the server restarts. It acknowledges nothing
// and delivers each stream sequence once, so every repeated event id is a relay duplicate (one
// JetStream's duplicate window did not drop). Reading message by message with GetMsg instead
// stalled after the server's restarts: the reader was left at one sequence for the whole drain
// and reported about a thousand events lost that the stream held (seq 1..1508 without a gap).
func consumeNATS(ctx context.Context, url, topic string, rec *recorder) error {
	seq := uint64(1)
	for ctx.Err() == nil {
		var err error
		if seq, err = consumeNATSOnce(ctx, url, topic, rec, seq); ctx.Err() == nil && err != nil {
			pause(ctx)
		}
	}
	return nil
}

// consumeNATSOnce reads from sequence seq over one connection until ctx is cancelled or the
// connection closes, and returns the next sequence to read.
func consumeNATSOnce(ctx context.Context, url, topic string, rec *recorder, seq uint64) (uint64, error) {
	nc, err := natsgo.Connect(url, natsgo.MaxReconnects(-1), natsgo.ReconnectWait(200*time.Millisecond))
	if err != nil {
		return seq, fmt.Errorf("faultinject: nats connect: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return seq, fmt.Errorf("faultinject: jetstream: %w", err)
	}
	cons, err := js.OrderedConsumer(ctx, nats.StreamName(topic), jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: seq})
	if err != nil {
		return seq, fmt.Errorf("faultinject: nats ordered consumer at sequence %d: %w", seq, err) // no stream yet
	}
	for ctx.Err() == nil && !nc.IsClosed() {
		m, err := cons.Next(jetstream.FetchMaxWait(time.Second))
		if err != nil {
			continue // nothing new within the wait, or the server is restarting
		}
		meta, err := m.Metadata()
		if err != nil {
			return seq, fmt.Errorf("faultinject: nats message metadata: %w", err)
		}
		headers := make(map[string]string, len(m.Headers()))
		for k := range m.Headers() {
			headers[k] = m.Headers().Get(k)
		}
		d := decode(headers[outbox.MetadataEventID], headers[outbox.MetadataAggregateID], m.Data(), headers)
		d.where = fmt.Sprintf("stream sequence %d", meta.Sequence.Stream)
		rec.add(d)
		seq = meta.Sequence.Stream + 1
	}
	return seq, nil
}

// consumeRabbitMQ consumes the queue of topic (brokers/rabbitmq's layout with its defaults: one
// queue named after the topic), declaring it as the relays do, until ctx is cancelled; it
// reconnects after the broker's restart. A message the broker delivers again (redelivered: its
// acknowledgement was lost with the connection) whose id was already recorded is skipped, so
// every repeated event id is a relay duplicate (a resend whose first copy was stored).
func consumeRabbitMQ(ctx context.Context, url, topic string, rec *recorder) error {
	seen := map[string]bool{}
	for ctx.Err() == nil {
		err := consumeRabbitMQOnce(ctx, url, topic, rec, seen)
		if ctx.Err() == nil && err != nil {
			pause(ctx) // the broker is restarting: connect again
		}
	}
	return nil
}

// consumeRabbitMQOnce consumes over one connection until it is lost or ctx is cancelled.
func consumeRabbitMQOnce(ctx context.Context, url, topic string, rec *recorder, seen map[string]bool) error {
	conn, err := amqp.Dial(url)
	if err != nil {
		return err
	}
	defer conn.Close()
	ch, err := conn.Channel()
	if err != nil {
		return err
	}
	cfg := rabbitmq.Config{}
	cfg.SetDefaults()
	if err := declareRabbitMQ(ch, cfg, topic); err != nil {
		return err
	}
	if err := ch.Qos(100, 0, false); err != nil {
		return err
	}
	deliveries, err := ch.ConsumeWithContext(ctx, topic, "faultinject-check", false, false, false, false, nil)
	if err != nil {
		return err
	}
	for m := range deliveries {
		headers := make(map[string]string, len(m.Headers))
		for k, v := range m.Headers {
			if s, ok := v.(string); ok {
				headers[k] = s
			}
		}
		id := headers[outbox.MetadataEventID]
		if !(m.Redelivered && seen[id]) {
			seen[id] = true
			d := decode(id, headers[outbox.MetadataAggregateID], m.Body, headers)
			d.where = fmt.Sprintf("delivery %d (redelivered %v)", m.DeliveryTag, m.Redelivered)
			rec.add(d)
		}
		if err := m.Ack(false); err != nil {
			return err
		}
	}
	return errors.New("faultinject: rabbitmq deliveries closed")
}

// declareRabbitMQ declares the exchange and queue of topic as brokers/rabbitmq does (the same
// arguments, or the broker refuses the second declaration).
func declareRabbitMQ(ch *amqp.Channel, cfg rabbitmq.Config, topic string) error {
	if err := ch.ExchangeDeclare(topic, amqp.ExchangeDirect, true, false, false, false, nil); err != nil {
		return err
	}
	args := amqp.Table{"x-queue-type": cfg.QueueType, "x-single-active-consumer": true}
	if _, err := ch.QueueDeclare(topic, true, false, false, false, args); err != nil {
		return err
	}
	return ch.QueueBind(topic, cfg.RoutingKey(topic, ""), topic, false, nil)
}

// pause waits a moment before trying again, or until ctx is done.
func pause(ctx context.Context) {
	select {
	case <-ctx.Done():
	case <-time.After(100 * time.Millisecond):
	}
}
