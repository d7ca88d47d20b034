// Package atleastonce is the at-least-once delivery mode: it publishes a batch through a
// publisher with an outcome per message, settles the failures (a retry later, or a dead letter)
// and acknowledges the outcome through the one acknowledger. A crash or a lease takeover between
// the broker's acknowledgement and the row's deletion publishes an event again.
package atleastonce

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/forwarder/internal/deadletter"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/keyorder"
)

// Publisher publishes many messages of one topic at once with an outcome per message
// (forwarder.OutcomePublisher; a plain publisher is wrapped in internal/waves by the wiring).
type Publisher interface {
	PublishEach(ctx context.Context, topic string, msgs []*message.Message) []error
}

// Deliverer is the at-least-once relay.Deliverer.
type Deliverer struct {
	core    relay.Core
	pub     Publisher
	acker   relay.Acknowledger
	settler *deadletter.Settler
}

// New returns the at-least-once deliverer over core, publishing through pub and acknowledging
// through acker.
func New(core relay.Core, pub Publisher, acker relay.Acknowledger) *Deliverer {
	return &Deliverer{core: core, pub: pub, acker: acker, settler: deadletter.NewSettler(core, func(ctx context.Context, topic string, msg *message.Message) error {
		return PublishAlone(ctx, pub, topic, msg)
	})}
}

// Start does nothing: at-least-once needs nothing before the first lease.
func (*Deliverer) Start(context.Context) error { return nil }

// Ready returns the leases as they are: every one may be published now.
func (*Deliverer) Ready(_ context.Context, _ int, leases []relay.Lease) ([]relay.Lease, error) {
	return leases, nil
}

// Scope is the leases of the records' partitions.
func (*Deliverer) Scope(leases []relay.Lease, records []relay.Record) []relay.Lease {
	return relay.LeasesOf(leases, records, 0)
}

// Deliver publishes the records of the given leases, settles the failures (retry, park or
// dead-letter), sends the dead letters alone of the records whose attempts are spent
// (deadletter.SplitSpent: the event is not published again, and its key's later records wait)
// and acknowledges the outcome in one short transaction fenced by the leases'
// epochs, and returns it.
func (d *Deliverer) Deliver(ctx context.Context, worker int, leases []relay.Lease, records []relay.Record) (relay.Outcome, error) {
	publishCtx, cancelPublish := context.WithTimeout(context.WithoutCancel(ctx), d.core.LeaseTTL)
	spent, records := deadletter.SplitSpent(d.core.Retry, records)
	started := time.Now()
	acked, failed := Publish(publishCtx, d.pub, d.core.Metrics, d.core.Log, records)
	d.core.Metrics.PublishSeconds.Observe(time.Since(started).Seconds())
	settled := make([]relay.Settlement, 0, len(failed)+len(spent))
	var unavailable []relay.Failure
	for _, fl := range failed {
		if d.core.Retry.Unblamed(fl.Err) {
			unavailable = append(unavailable, fl)
			continue
		}
		settled = append(settled, d.settler.Settle(publishCtx, fl.Record, fl.Err))
	}
	for _, r := range spent {
		settled = append(settled, d.settler.SettleSpent(publishCtx, r))
	}
	cancelPublish()

	o, _, err := d.acker.Acknowledge(ctx, worker, leases, acked, settled)
	if err == nil && len(unavailable) > 0 {
		err = relay.NotTried(d.core.Metrics, unavailable)
	}
	return o, err
}

// Stop does nothing: at-least-once holds nothing between deliveries.
func (*Deliverer) Stop() {}

// LogAttrs names the delivery.
func (*Deliverer) LogAttrs() []any { return []any{"delivery", "at_least_once"} }

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
// Records of one topic (the common batch) are published as they are, on this goroutine, with
// no copy into a group.
func eachTopic(records []relay.Record, publishTopic func(topic string, records []relay.Record) ([]relay.Record, []relay.Failure)) (acked []relay.Record, failed []relay.Failure) {
	if oneTopic(records) {
		return publishTopic(records[0].Event.Topic, records)
	}
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

// oneTopic reports whether records (at least one) all go to one topic.
func oneTopic(records []relay.Record) bool {
	if len(records) == 0 {
		return false
	}
	for _, r := range records[1:] {
		if r.Event.Topic != records[0].Event.Topic {
			return false
		}
	}
	return true
}

// inOrder reports whether segment is every index of a batch of n records, in order: the whole
// batch is one round, published as it is.
func inOrder(segment []int, n int) bool {
	if len(segment) != n {
		return false
	}
	for j, i := range segment {
		if i != j {
			return false
		}
	}
	return true
}

// Publish publishes a batch through a publisher with an outcome per message: one PublishEach call per topic,
// topics in parallel, every event of a key in the same call, so the events of a hot key are
// pipelined instead of sent one broker round trip each. The publisher's failures are gapless per
// key, which keeps order: the first failed event of a key is a failure (retried or
// dead-lettered), its later events stay pending, parked behind it; only failed events are sent
// again. The events of a key that go to several topics are cut into segments at each change of
// topic (keyorder.Segments), published one segment after the other, since gaplessness holds
// within one call only.
func Publish(ctx context.Context, pub Publisher, m *relay.Metrics, log *slog.Logger, records []relay.Record) (acked []relay.Record, failed []relay.Failure) {
	keys := make([]int64, len(records))
	for i, r := range records {
		keys[i] = r.KeyHash
	}
	plan := keyorder.Segments(keys, func(prev, next int) bool { return records[prev].Event.Topic != records[next].Event.Topic })
	plan.Run(func(segment []int) bool {
		todo := records
		if !inOrder(segment, len(records)) {
			todo = make([]relay.Record, len(segment))
			for j, i := range segment {
				todo[j] = records[i]
			}
		}
		a, fl := eachTopic(todo, func(topic string, records []relay.Record) ([]relay.Record, []relay.Failure) {
			return publishEach(ctx, pub, m, log, topic, records)
		})
		if acked == nil {
			acked = a // no copy; clipped by publishEach, so a later append copies
		} else {
			acked = append(acked, a...)
		}
		for _, x := range fl {
			plan.Stop(x.Record.KeyHash)
			failed = append(failed, x)
		}
		return true
	}, func(int) {}) // a record held back behind its key's failure stays pending, untouched
	return acked, failed
}

// publishEach publishes the records of one topic in one PublishEach call and sorts the outcomes:
// the first failure of each key is returned as failed, the key's later records are held back.
// A permanent error is taken as the message's own (the OutcomePublisher contract; the waves
// adapter confirms it alone before it reports it), so it is dead-lettered.
func publishEach(ctx context.Context, pub Publisher, m *relay.Metrics, log *slog.Logger, topic string, records []relay.Record) (acked []relay.Record, failed []relay.Failure) {
	msgs := relay.Messages(ctx, records)
	errs := pub.PublishEach(ctx, topic, msgs)
	if len(errs) != len(msgs) {
		err := fmt.Errorf("forwarder: publisher %T returned %d outcomes for %d messages", pub, len(errs), len(msgs))
		errs = make([]error, len(msgs))
		for i := range errs {
			errs[i] = err
		}
	}
	if allNil(errs) {
		// Every message was acknowledged: the records as they are, clipped so that an append
		// to them copies instead of writing into the caller's batch.
		return slices.Clip(records), nil
	}
	acked = make([]relay.Record, 0, len(records))
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

// allNil reports whether every error of errs is nil.
func allNil(errs []error) bool {
	for _, err := range errs {
		if err != nil {
			return false
		}
	}
	return true
}

// PublishAlone publishes one message in a call of its own.
func PublishAlone(ctx context.Context, pub Publisher, topic string, msg *message.Message) error {
	if errs := pub.PublishEach(ctx, topic, []*message.Message{msg}); len(errs) == 1 {
		return errs[0]
	}
	return fmt.Errorf("forwarder: publisher %T did not return one outcome for one message", pub)
}
