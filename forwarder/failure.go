package forwarder

import (
	"context"
	"errors"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/deadletter"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

// settle counts a failed attempt and decides its fate: a retry with backoff, or, after the last
// attempt (unless UnlimitedRetries) or on a permanent error, a dead letter, published here,
// before the acknowledgement transaction, so that no transaction is open during broker I/O. The
// dead letter follows the dead-letter sequence (deadletter.Next): whole, then reduced when the
// broker refuses it whole; one refused even reduced leaves the row dead in the table with the
// reason, so that nothing is retried forever; one that cannot be published yet is retried like
// any failure.
func (f *Forwarder) settle(ctx context.Context, r relay.Record, publishErr error) relay.Settlement {
	attempts := r.Attempts + 1
	f.metrics.Failed.WithLabelValues(r.Event.Topic, r.Event.TenantID).Inc()
	reason := publishErr.Error()
	if !f.retry.Dead(attempts, publishErr) {
		return f.retryLater(r, attempts, reason)
	}
	reduced := false
	var refusals error // the dead letter's errors so far
	for {
		err := publishAlone(ctx, f.publisher, f.cfg.DeadLetterTopic, deadletter.Message(ctx, r.Event, reason, attempts, reduced))
		if err != nil {
			refusals = errors.Join(refusals, err)
		}
		switch deadletter.Next(reduced, err, err != nil && f.retry.FinalDeadLetterError(attempts, err)) {
		case deadletter.Sent:
			if reduced {
				reason = deadletter.ReducedReason(reason)
			}
			f.metrics.DeadLettered.WithLabelValues(r.Event.Topic, r.Event.TenantID).Inc()
			f.log.Warn("event dead-lettered", "event_id", r.Event.ID, "topic", r.Event.Topic, "aggregate_id", r.Event.AggregateID,
				"attempts", attempts, "retriable", f.cfg.IsRetriable(publishErr), "reduced", reduced, "reason", reason)
			return relay.Settlement{Record: r, Attempts: attempts, Next: time.Now(), Dead: true, Reason: reason}
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
func (f *Forwarder) deadLetterRefused(r relay.Record, attempts int, reason string, dlqErr error) relay.Settlement {
	f.metrics.DeadLetterRefused.WithLabelValues(r.Event.Topic, r.Event.TenantID).Inc()
	f.log.Error("event dead in the table only: the broker refused its dead letter, even reduced to the ids and the reason",
		"event_id", r.Event.ID, "topic", r.Event.Topic, "aggregate_id", r.Event.AggregateID, "attempts", attempts,
		"dead_letter_topic", f.cfg.DeadLetterTopic, "reason", reason, "dead_letter_error", dlqErr)
	return relay.Settlement{Record: r, Attempts: attempts, Next: time.Now(), Dead: true,
		Reason: deadletter.RefusedReason(reason, f.cfg.DeadLetterTopic, dlqErr)}
}

// retryLater is the settlement of a failed attempt retried after the backoff.
func (f *Forwarder) retryLater(r relay.Record, attempts int, reason string) relay.Settlement {
	next := time.Now().Add(f.retry.Backoff(attempts))
	f.log.Info("publish failed, will retry", "event_id", r.Event.ID, "topic", r.Event.Topic,
		"aggregate_id", r.Event.AggregateID, "attempts", attempts, "next_attempt", next, "error", reason)
	return relay.Settlement{Record: r, Attempts: attempts, Next: next, Reason: reason}
}
