package forwarder

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
)

// settlement is what the acknowledgement writes for a failed record: a retry later, or dead.
type settlement struct {
	record   record
	attempts int
	next     time.Time
	dead     bool
	reason   string
}

// settle counts a failed attempt and decides its fate: a retry with backoff, or, after the last
// attempt (unless UnlimitedRetries) or on a permanent error, a dead letter, published here,
// before the acknowledgement transaction, so that no transaction is open during broker I/O. A
// dead letter that cannot be published is retried like any failure: an event is never marked
// dead before the poison topic has it.
func (f *Forwarder) settle(ctx context.Context, r record, publishErr error) settlement {
	attempts := r.attempts + 1
	f.metrics.failed.WithLabelValues(r.event.Topic, r.event.TenantID).Inc()
	reason := publishErr.Error()
	retriable := f.cfg.IsRetriable(publishErr)
	if !retriable || (!f.cfg.UnlimitedRetries && attempts >= f.cfg.MaxAttempts) {
		dlqErr := f.deadLetter(ctx, r, reason, attempts)
		if dlqErr == nil {
			f.metrics.deadLettered.WithLabelValues(r.event.Topic, r.event.TenantID).Inc()
			f.log.Warn("event dead-lettered", "event_id", r.event.ID, "topic", r.event.Topic,
				"aggregate_id", r.event.AggregateID, "attempts", attempts, "retriable", retriable, "reason", reason)
			return settlement{record: r, attempts: attempts, next: time.Now(), dead: true, reason: reason}
		}
		reason = fmt.Sprintf("%s (dead-lettering to %s failed: %v)", reason, f.cfg.DeadLetterTopic, dlqErr)
	}
	next := time.Now().Add(f.backoff(attempts))
	f.log.Info("publish failed, will retry", "event_id", r.event.ID, "topic", r.event.Topic,
		"aggregate_id", r.event.AggregateID, "attempts", attempts, "next_attempt", next, "error", reason)
	return settlement{record: r, attempts: attempts, next: next, reason: reason}
}

// deadLetter publishes the event to the dead-letter topic with Watermill's poison-queue headers.
// If the broker refuses it permanently (for example, too large), it is sent without its payload,
// which stays in the outbox row for a replay.
func (f *Forwarder) deadLetter(ctx context.Context, r record, reason string, attempts int) error {
	msg := toMessages(ctx, []record{r})[0]
	msg.Metadata.Set(middleware.ReasonForPoisonedKey, reason)
	msg.Metadata.Set(middleware.PoisonedTopicKey, r.event.Topic)
	msg.Metadata.Set(MetadataAttempts, strconv.Itoa(attempts))
	err := f.publishAlone(ctx, f.cfg.DeadLetterTopic, msg)
	if err == nil || f.cfg.IsRetriable(err) {
		return err
	}
	slim := msg.Copy()
	slim.SetContext(ctx)
	slim.Payload = nil
	slim.Metadata.Set(MetadataPayloadDropped, strconv.Itoa(len(msg.Payload)))
	if err2 := f.publishAlone(ctx, f.cfg.DeadLetterTopic, slim); err2 != nil {
		return errors.Join(err, err2)
	}
	return nil
}

// backoff is InitialBackoff * BackoffMultiplier^(attempts-1), capped at MaxBackoff, spread by
// ±BackoffJitter so retries of many events do not arrive together.
func (f *Forwarder) backoff(attempts int) time.Duration {
	d := float64(f.cfg.InitialBackoff) * math.Pow(f.cfg.BackoffMultiplier, float64(attempts-1))
	d = math.Min(d, float64(f.cfg.MaxBackoff))
	d *= 1 + f.cfg.BackoffJitter*(2*rand.Float64()-1)
	return time.Duration(d)
}
