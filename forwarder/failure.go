package forwarder

import (
	"context"
	"errors"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/deadletter"
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
// before the acknowledgement transaction, so that no transaction is open during broker I/O. The
// dead letter follows the dead-letter sequence (deadletter.Next): whole, then reduced when the
// broker refuses it whole; one refused even reduced leaves the row dead in the table with the
// reason, so that nothing is retried forever; one that cannot be published yet is retried like
// any failure.
func (f *Forwarder) settle(ctx context.Context, r record, publishErr error) settlement {
	attempts := r.attempts + 1
	f.metrics.failed.WithLabelValues(r.event.Topic, r.event.TenantID).Inc()
	reason := publishErr.Error()
	if !f.retry.dead(attempts, publishErr) {
		return f.retryLater(r, attempts, reason)
	}
	reduced := false
	var refusals error // the dead letter's errors so far
	for {
		err := publishAlone(ctx, f.publisher, f.cfg.DeadLetterTopic, deadletter.Message(ctx, r.event, reason, attempts, reduced))
		if err != nil {
			refusals = errors.Join(refusals, err)
		}
		switch deadletter.Next(reduced, err, err != nil && f.retry.finalDeadLetterError(attempts, err)) {
		case deadletter.Sent:
			if reduced {
				reason = deadletter.ReducedReason(reason)
			}
			f.metrics.deadLettered.WithLabelValues(r.event.Topic, r.event.TenantID).Inc()
			f.log.Warn("event dead-lettered", "event_id", r.event.ID, "topic", r.event.Topic, "aggregate_id", r.event.AggregateID,
				"attempts", attempts, "retriable", f.cfg.IsRetriable(publishErr), "reduced", reduced, "reason", reason)
			return settlement{record: r, attempts: attempts, next: time.Now(), dead: true, reason: reason}
		case deadletter.SendReduced:
			reduced = true
		case deadletter.Refused:
			return f.deadLetterRefused(r, attempts, reason, refusals)
		default:
			return f.retryLater(r, attempts, deadletter.RetryReason(reason, f.cfg.DeadLetterTopic, refusals))
		}
	}
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
	return settlement{record: r, attempts: attempts, next: time.Now(), dead: true,
		reason: deadletter.RefusedReason(reason, f.cfg.DeadLetterTopic, dlqErr)}
}

// retryLater is the settlement of a failed attempt retried after the backoff.
func (f *Forwarder) retryLater(r record, attempts int, reason string) settlement {
	next := time.Now().Add(f.retry.backoff(attempts))
	f.log.Info("publish failed, will retry", "event_id", r.event.ID, "topic", r.event.Topic,
		"aggregate_id", r.event.AggregateID, "attempts", attempts, "next_attempt", next, "error", reason)
	return settlement{record: r, attempts: attempts, next: next, reason: reason}
}
