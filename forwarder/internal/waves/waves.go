// Package waves makes a plain Watermill publisher, which reports one error per Publish call, a
// publisher with an outcome per message (forwarder.OutcomePublisher's PublishEach). It is the
// forwarder's one path for such a publisher, chosen once when the forwarder is built.
//
// The messages of a call go out in waves (keyorder.Waves, the module's one implementation of
// them): wave k holds the k-th message of every key, so one Publish call never carries two
// messages of the same key, and the next message of a key is sent only after the broker
// acknowledged the previous one. A producer that loses one message of a call but delivers the
// next can therefore never put a key out of order. If a wave's Publish call fails, its messages
// are published one by one (in parallel: they all have different keys) to isolate the failing
// ones, since a plain publisher does not say which failed; a permanent failure is confirmed once
// more alone, since the producer may have packed innocent messages into a request the broker
// refused whole. A key with a failure is left out of the later waves: its later messages fail
// with ErrHeldBack, unsent.
package waves

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/keyorder"
	"github.com/outboxkit/outboxkit/outbox"
)

// ErrHeldBack is the outcome of a message the waves did not send because an earlier message of
// its key failed in the same call. Publisher.Retriable calls it retriable.
var ErrHeldBack = errors.New("forwarder: not published: an earlier event of its key failed")

// isolateParallelism bounds the concurrent one-message publishes that isolate a failure.
const isolateParallelism = 32

// Publisher is a message.Publisher published through in waves. It is safe for concurrent use
// when the publisher it wraps is.
type Publisher struct {
	pub       message.Publisher
	retriable func(error) bool
	log       *slog.Logger
}

// New returns pub published through in waves. retriable classifies pub's errors (nil: every
// error is retriable); log (nil: discarded) receives the isolation of failed calls at debug level.
func New(pub message.Publisher, retriable func(error) bool, log *slog.Logger) *Publisher {
	if retriable == nil {
		retriable = func(error) bool { return true }
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Publisher{pub: pub, retriable: retriable, log: log}
}

// keyOf is the ordering key of an outbox message: the hash of its tenant, aggregate type and
// aggregate id, as the forwarder's records carry it.
func keyOf(msg *message.Message) int64 {
	if msg == nil {
		return 0
	}
	return outbox.KeyHash(msg.Metadata.Get(outbox.MetadataTenantID), msg.Metadata.Get(outbox.MetadataAggregateType),
		msg.Metadata.Get(outbox.MetadataAggregateID))
}

// PublishEach publishes msgs to topic in waves (keyorder.Waves) and returns one error per
// message: nil when the broker acknowledged it, ErrHeldBack when an earlier message of its key
// failed.
func (p *Publisher) PublishEach(ctx context.Context, topic string, msgs []*message.Message) []error {
	errs := make([]error, len(msgs))
	keys := make([]int64, len(msgs))
	for i, msg := range msgs {
		keys[i] = keyOf(msg)
	}
	plan := keyorder.Waves(keys)
	plan.Run(func(wave []int) bool {
		p.publishWave(ctx, topic, msgs, wave, errs)
		for _, i := range wave {
			if errs[i] != nil {
				plan.Stop(keys[i])
			}
		}
		return true
	}, func(i int) { errs[i] = ErrHeldBack })
	return errs
}

// publishWave publishes the messages of distinct keys at the indexes in one call, or, if that
// call fails, one by one to find the failing ones, writing each one's outcome into errs.
func (p *Publisher) publishWave(ctx context.Context, topic string, msgs []*message.Message, indexes []int, errs []error) {
	wave := make([]*message.Message, len(indexes))
	for j, i := range indexes {
		wave[j] = msgs[i]
	}
	err := p.pub.Publish(topic, wave...)
	if err == nil {
		return
	}
	if len(indexes) == 1 {
		errs[indexes[0]] = err
		return
	}
	p.log.Debug("batch publish failed; publishing its events one by one to isolate the failing ones",
		"topic", topic, "events", len(indexes), "error", err)
	var wg sync.WaitGroup
	sem := make(chan struct{}, isolateParallelism)
	for _, i := range indexes {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = p.pub.Publish(topic, msgs[i]) // each goroutine writes its own index
		})
	}
	wg.Wait()
	// A permanent failure is confirmed alone, one at a time, before it is taken as the message's
	// own (a dead letter follows it).
	for _, i := range indexes {
		if errs[i] != nil && !p.retriable(errs[i]) {
			errs[i] = p.pub.Publish(topic, msgs[i])
		}
	}
}

// Publish publishes msgs through the wrapped publisher as they are, in one call.
func (p *Publisher) Publish(topic string, msgs ...*message.Message) error {
	return p.pub.Publish(topic, msgs...)
}

// Close closes the wrapped publisher.
func (p *Publisher) Close() error { return p.pub.Close() }

// Retriable is the wrapped publisher's classifier; ErrHeldBack is retriable.
func (p *Publisher) Retriable(err error) bool {
	return errors.Is(err, ErrHeldBack) || p.retriable(err)
}
