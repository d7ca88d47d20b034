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

// consumeNATS reads the stream of topic (brokers/nats' layout, one subject per topic) message by
// message in stream order from its first sequence, until ctx is cancelled. It reads by sequence
// rather than through a consumer, so nothing is redelivered by the reader itself: every repeated
// event id is a relay duplicate (one JetStream's duplicate window did not drop). The stream is
// created by the relays' first publish; the reader waits for it, and for the server across its
// restarts: a connection that stays unusable is replaced (a reader stalled on one after a
// restart once reported 896 events lost that the stream held, seq 1..1509 without a gap).
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

// natsReaderPatience is how long reads may keep failing (each bounded by natsReadTimeout) before
// the reader connects again: counted in time, not in reads, since a read that times out takes
// natsReadTimeout (jetstream's own default is 5 s).
const (
	natsReaderPatience = 3 * time.Second
	natsReadTimeout    = time.Second
)

// consumeNATSOnce reads from sequence seq over one connection until ctx is cancelled or the
// connection stays unusable, and returns the next sequence to read.
func consumeNATSOnce(ctx context.Context, url, topic string, rec *recorder, seq uint64) (uint64, error) {
	nc, err := natsgo.Connect(url, natsgo.MaxReconnects(-1), natsgo.ReconnectWait(200*time.Millisecond))
	if err != nil {
		return seq, fmt.Errorf("faultinject: nats connect: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(natsReadTimeout))
	if err != nil {
		return seq, fmt.Errorf("faultinject: jetstream: %w", err)
	}
	var (
		stream       jetstream.Stream
		lastErr      error
		failingSince time.Time
	)
	for ctx.Err() == nil {
		if !failingSince.IsZero() && time.Since(failingSince) >= natsReaderPatience || nc.IsClosed() {
			return seq, fmt.Errorf("faultinject: nats reader: reads failing since %s at sequence %d: %v",
				failingSince.Format("15:04:05.000"), seq, lastErr)
		}
		if stream == nil {
			if stream, lastErr = js.Stream(ctx, nats.StreamName(topic)); lastErr != nil {
				stream = nil
				failingSince = firstFailure(failingSince)
				pause(ctx)
				continue
			}
		}
		m, err := stream.GetMsg(ctx, seq)
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				if info, ierr := stream.Info(ctx); ierr == nil && info.State.LastSeq > seq {
					seq++ // a gap: no message has this sequence; the analysis reports any event lost
					continue
				}
			} else {
				stream = nil // read the stream's info again: the server may have restarted
			}
			lastErr = err
			failingSince = firstFailure(failingSince)
			pause(ctx) // not stored yet, or the server is restarting
			continue
		}
		failingSince = time.Time{}
		headers := make(map[string]string, len(m.Header))
		for k := range m.Header {
			headers[k] = m.Header.Get(k)
		}
		d := decode(headers[outbox.MetadataEventID], headers[outbox.MetadataAggregateID], m.Data, headers)
		d.where = fmt.Sprintf("stream sequence %d", seq)
		rec.add(d)
		seq++
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

// firstFailure returns since, or now when since is zero.
func firstFailure(since time.Time) time.Time {
	if since.IsZero() {
		return time.Now()
	}
	return since
}
