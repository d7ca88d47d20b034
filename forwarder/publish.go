package forwarder

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/forwarder/internal/deadletter"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/forwarder/internal/waves"
)

// MetadataHeadersDropped is set on a dead letter sent without the event's own headers (the
// broker refused it with them); its value is how many headers were dropped. The headers stay in
// the outbox row for a replay.
const MetadataHeadersDropped = deadletter.MetadataHeadersDropped

// outcomePublisher is the publisher strategy, chosen once: a publisher that reports outcomes
// per message (OutcomePublisher) is used as it is; any other is published through in waves
// (internal/waves), one event per key per call.
func outcomePublisher(c Config, log *slog.Logger) OutcomePublisher {
	if pub, ok := c.Publisher.(OutcomePublisher); ok {
		return pub
	}
	return waves.New(c.Publisher, c.IsRetriable, log)
}

// publish sends the records and returns the acknowledged ones and the failed ones; records of a
// key held back behind an earlier failure of that key are in neither and stay pending.
func (f *Forwarder) publish(ctx context.Context, records []relay.Record) (acked []relay.Record, failed []relay.Failure) {
	return publishOutcomes(ctx, f.publisher, f.metrics, f.log, records)
}

// toMessages turns records into broker messages carrying ctx.
func toMessages(ctx context.Context, records []relay.Record) []*message.Message {
	msgs := make([]*message.Message, len(records))
	for i, r := range records {
		msgs[i] = r.Event.ToMessage()
		msgs[i].SetContext(ctx)
	}
	return msgs
}

// byTopic groups records by topic, keeping their order, and lists the topics in order of first
// appearance.
func byTopic(records []relay.Record) (topics []string, groups map[string][]relay.Record) {
	groups = map[string][]relay.Record{}
	for _, r := range records {
		if _, ok := groups[r.Event.Topic]; !ok {
			topics = append(topics, r.Event.Topic)
		}
		groups[r.Event.Topic] = append(groups[r.Event.Topic], r)
	}
	return topics, groups
}

// eachTopic runs publishTopic for every topic of records in parallel and gathers the results.
func eachTopic(records []relay.Record, publishTopic func(topic string, records []relay.Record) ([]relay.Record, []relay.Failure)) (acked []relay.Record, failed []relay.Failure) {
	topics, groups := byTopic(records)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, topic := range topics {
		wg.Go(func() {
			a, fl := publishTopic(topic, groups[topic])
			mu.Lock()
			acked = append(acked, a...)
			failed = append(failed, fl...)
			mu.Unlock()
		})
	}
	wg.Wait()
	return acked, failed
}

// publishOutcomes publishes a batch through an OutcomePublisher: one PublishEach call per topic,
// topics in parallel, every event of a key in the same call, so the events of a hot key are
// pipelined instead of sent one broker round trip each. The publisher's failures are gapless per
// key, which keeps order: the first failed event of a key is a failure (retried or
// dead-lettered), its later events stay pending, parked behind it; only failed events are sent
// again. The events of a key that go to several topics are cut into segments at each change of
// topic, published one segment after the other, since gaplessness holds within one call only.
func publishOutcomes(ctx context.Context, pub OutcomePublisher, m *relay.Metrics, log *slog.Logger, records []relay.Record) (acked []relay.Record, failed []relay.Failure) {
	type keyState struct {
		topic   string
		segment int
	}
	var segments [][]relay.Record
	keys := make(map[int64]*keyState, len(records))
	for _, r := range records {
		st, ok := keys[r.KeyHash]
		switch {
		case !ok:
			st = &keyState{topic: r.Event.Topic}
			keys[r.KeyHash] = st
		case st.topic != r.Event.Topic:
			st.topic = r.Event.Topic
			st.segment++
		}
		if st.segment == len(segments) {
			segments = append(segments, nil)
		}
		segments[st.segment] = append(segments[st.segment], r)
	}
	parked := map[int64]bool{}
	for _, segment := range segments {
		todo := segment[:0:0]
		for _, r := range segment {
			if !parked[r.KeyHash] {
				todo = append(todo, r)
			}
		}
		a, fl := eachTopic(todo, func(topic string, records []relay.Record) ([]relay.Record, []relay.Failure) {
			return publishEach(ctx, pub, m, log, topic, records)
		})
		acked = append(acked, a...)
		for _, x := range fl {
			parked[x.Record.KeyHash] = true
			failed = append(failed, x)
		}
	}
	return acked, failed
}

// publishEach publishes the records of one topic in one PublishEach call and sorts the outcomes:
// the first failure of each key is returned as failed, the key's later records are held back.
// A permanent error is taken as the message's own (the OutcomePublisher contract; the waves
// adapter confirms it alone before it reports it), so it is dead-lettered.
func publishEach(ctx context.Context, pub OutcomePublisher, m *relay.Metrics, log *slog.Logger, topic string, records []relay.Record) (acked []relay.Record, failed []relay.Failure) {
	msgs := toMessages(ctx, records)
	errs := pub.PublishEach(ctx, topic, msgs)
	if len(errs) != len(msgs) {
		err := fmt.Errorf("forwarder: publisher %T returned %d outcomes for %d messages", pub, len(errs), len(msgs))
		errs = make([]error, len(msgs))
		for i := range errs {
			errs[i] = err
		}
	}
	broken := map[int64]bool{}
	for i, r := range records {
		switch {
		case errs[i] == nil:
			if broken[r.KeyHash] {
				m.GapViolations.Inc()
				log.Error("the publisher acknowledged an event after an earlier event of its key failed in the same call; "+
					"its key may be out of order on the broker", "publisher", fmt.Sprintf("%T", pub), "topic", topic,
					"event_id", r.Event.ID, "aggregate_id", r.Event.AggregateID)
			}
			acked = append(acked, r)
		case broken[r.KeyHash]:
			// Held back behind the key's first failure: stays pending, untouched.
		default:
			broken[r.KeyHash] = true
			failed = append(failed, relay.Failure{Record: r, Err: errs[i]})
		}
	}
	return acked, failed
}

// publishAlone publishes one message in a call of its own.
func publishAlone(ctx context.Context, pub OutcomePublisher, topic string, msg *message.Message) error {
	if errs := pub.PublishEach(ctx, topic, []*message.Message{msg}); len(errs) == 1 {
		return errs[0]
	}
	return fmt.Errorf("forwarder: publisher %T did not return one outcome for one message", pub)
}
