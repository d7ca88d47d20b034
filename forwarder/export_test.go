package forwarder

import (
	"context"
	"errors"
	"log/slog"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/outbox"
)

// WavesPublisher is the waves (publishWaves, the forwarder's path for a plain
// message.Publisher) seen as an OutcomePublisher, for the conformance suite
// (waves_conformance_test.go). Test-only: the forwarder itself calls publishWaves on its
// records; this turns messages into records and the acknowledged, failed and held-back records
// back into one error per message.
type WavesPublisher struct {
	f *Forwarder
}

// ErrHeldBack is the outcome of a message the waves did not send because an earlier message of
// its key failed. WavesPublisher.Retriable calls it retriable.
var ErrHeldBack = errors.New("forwarder: not published: an earlier event of its key failed")

// NewWavesPublisher returns the waves over pub, with pub's classifier (defaultClassifier), as a
// Forwarder without Config.IsRetriable would have.
func NewWavesPublisher(pub message.Publisher) *WavesPublisher {
	cfg := Config{Publisher: pub, IsRetriable: defaultClassifier(pub)}
	return &WavesPublisher{f: &Forwarder{cfg: cfg, log: slog.New(slog.DiscardHandler)}}
}

// PublishEach publishes msgs through publishWaves. A message that is not an outbox event fails
// with EventFromMessage's error and holds its key's later messages back.
func (w *WavesPublisher) PublishEach(ctx context.Context, topic string, msgs []*message.Message) []error {
	errs := make([]error, len(msgs))
	records := make([]record, 0, len(msgs))
	broken := map[int64]bool{}
	for i, msg := range msgs {
		key := outbox.KeyHash(msg.Metadata.Get(outbox.MetadataTenantID), msg.Metadata.Get(outbox.MetadataAggregateType),
			msg.Metadata.Get(outbox.MetadataAggregateID))
		e, err := outbox.EventFromMessage(topic, msg)
		switch {
		case broken[key]:
			errs[i] = ErrHeldBack
		case err != nil:
			errs[i], broken[key] = err, true
		default:
			errs[i] = ErrHeldBack // until publishWaves says otherwise
			records = append(records, record{seq: int64(i), event: e, keyHash: key})
		}
	}
	acked, failed := w.f.publishWaves(ctx, records)
	for _, r := range acked {
		errs[r.seq] = nil
	}
	for _, fl := range failed {
		errs[fl.record.seq] = fl.err
	}
	return errs
}

// Retriable is the forwarder's classifier of pub; ErrHeldBack is retriable.
func (w *WavesPublisher) Retriable(err error) bool {
	return errors.Is(err, ErrHeldBack) || w.f.cfg.IsRetriable(err)
}

// Close closes pub.
func (w *WavesPublisher) Close() error { return w.f.cfg.Publisher.Close() }
