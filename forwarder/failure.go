package forwarder

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
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

// maxDeadLetterReason bounds the reason carried by a reduced dead letter, so that an error
// text, however long, cannot make it too large.
const maxDeadLetterReason = 1024

// settle counts a failed attempt and decides its fate: a retry with backoff, or, after the last
// attempt (unless UnlimitedRetries) or on a permanent error, a dead letter, published here,
// before the acknowledgement transaction, so that no transaction is open during broker I/O. A
// dead letter that cannot be published yet is retried like any failure; one the broker refuses
// for good (see deadLetter) leaves the row dead in the table with the reason, so that nothing
// is retried forever.
func (f *Forwarder) settle(ctx context.Context, r record, publishErr error) settlement {
	attempts := r.attempts + 1
	f.metrics.failed.WithLabelValues(r.event.Topic, r.event.TenantID).Inc()
	reason := publishErr.Error()
	retriable := f.cfg.IsRetriable(publishErr)
	if f.retry.dead(attempts, publishErr) {
		reduced, final, dlqErr := f.deadLetter(ctx, r, reason, attempts)
		switch {
		case dlqErr == nil:
			if reduced {
				reason += " (the dead letter went without the event's payload and headers: the broker refused it whole)"
			}
			f.metrics.deadLettered.WithLabelValues(r.event.Topic, r.event.TenantID).Inc()
			f.log.Warn("event dead-lettered", "event_id", r.event.ID, "topic", r.event.Topic,
				"aggregate_id", r.event.AggregateID, "attempts", attempts, "retriable", retriable, "reduced", reduced, "reason", reason)
			return settlement{record: r, attempts: attempts, next: time.Now(), dead: true, reason: reason}
		case final:
			return f.deadLetterRefused(r, attempts, reason, dlqErr)
		}
		reason = fmt.Sprintf("%s (dead-lettering to %s failed: %v)", reason, f.cfg.DeadLetterTopic, dlqErr)
	}
	return f.retryLater(r, attempts, reason)
}

// deadLetter publishes r's dead letter to the dead-letter topic, whole first. A dead letter the
// broker refuses (a permanent error, or any error on its last chance: retryPolicy.finalDeadLetterError) is
// sent again reduced to the ids and the reason (deadLetterMessage); the payload and headers stay
// in the outbox row for a replay. It reports whether the dead letter went reduced, and, on
// error, whether the error is final: the reduced dead letter was refused too, permanently or on
// its last chance, so that no later attempt can be expected to publish it.
func (f *Forwarder) deadLetter(ctx context.Context, r record, reason string, attempts int) (reduced, final bool, err error) {
	err = publishAlone(ctx, f.publisher, f.cfg.DeadLetterTopic, f.deadLetterMessage(ctx, r, reason, attempts, false))
	if err == nil {
		return false, false, nil
	}
	if !f.retry.finalDeadLetterError(attempts, err) {
		return false, false, err
	}
	err2 := publishAlone(ctx, f.publisher, f.cfg.DeadLetterTopic, f.deadLetterMessage(ctx, r, reason, attempts, true))
	if err2 == nil {
		return true, false, nil
	}
	return true, f.retry.finalDeadLetterError(attempts, err2), errors.Join(err, err2)
}

// deadLetterRefused is the settlement of an event that can be neither published nor
// dead-lettered: dead in the table, with a reason saying that the dead-letter topic does not
// have it, counted and logged at error level (an operator lists it with `outboxkit
// dead-letters list`, and replays or discards it).
func (f *Forwarder) deadLetterRefused(r record, attempts int, reason string, dlqErr error) settlement {
	f.metrics.deadLetterRefused.WithLabelValues(r.event.Topic, r.event.TenantID).Inc()
	f.log.Error("event dead in the table only: the broker refused its dead letter, even reduced to the ids and the reason",
		"event_id", r.event.ID, "topic", r.event.Topic, "aggregate_id", r.event.AggregateID, "attempts", attempts,
		"dead_letter_topic", f.cfg.DeadLetterTopic, "reason", reason, "dead_letter_error", dlqErr)
	reason = fmt.Sprintf("the dead letter could not be published to %s (%v); the event is dead in this table only: %s",
		f.cfg.DeadLetterTopic, truncateUTF8(dlqErr.Error(), maxDeadLetterReason), reason)
	return settlement{record: r, attempts: attempts, next: time.Now(), dead: true, reason: reason}
}

// deadLetterMessage is the dead letter of r, carrying ctx, with Watermill's poison-queue headers
// (the reason, the original topic) and the attempts. A whole one is the event's message. A
// reduced one, for a broker that refused the whole one, keeps only the ids (event id, type,
// aggregate, tenant, created at: the message key stays the same), the reason (truncated), the
// attempts, and markers of what was dropped (MetadataPayloadDropped, the payload's size;
// MetadataHeadersDropped, the number of the event's own headers). The at-least-once and the
// exactly-once paths both build their dead letters here.
func (f *Forwarder) deadLetterMessage(ctx context.Context, r record, reason string, attempts int, reduced bool) *message.Message {
	var msg *message.Message
	if !reduced {
		msg = r.event.ToMessage()
	} else {
		ids := r.event
		ids.Payload, ids.Headers = nil, nil
		msg = ids.ToMessage()
		reason = truncateUTF8(reason, maxDeadLetterReason)
		msg.Metadata.Set(MetadataPayloadDropped, strconv.Itoa(len(r.event.Payload)))
		msg.Metadata.Set(MetadataHeadersDropped, strconv.Itoa(len(r.event.Headers)))
	}
	msg.SetContext(ctx)
	msg.Metadata.Set(middleware.ReasonForPoisonedKey, reason)
	msg.Metadata.Set(middleware.PoisonedTopicKey, r.event.Topic)
	msg.Metadata.Set(MetadataAttempts, strconv.Itoa(attempts))
	return msg
}

// retryLater is the settlement of a failed attempt retried after the backoff.
func (f *Forwarder) retryLater(r record, attempts int, reason string) settlement {
	next := time.Now().Add(f.retry.backoff(attempts))
	f.log.Info("publish failed, will retry", "event_id", r.event.ID, "topic", r.event.Topic,
		"aggregate_id", r.event.AggregateID, "attempts", attempts, "next_attempt", next, "error", reason)
	return settlement{record: r, attempts: attempts, next: next, reason: reason}
}
