package deadletter

import (
	"context"
	"errors"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

// Settler decides the fate of a failed attempt, on every delivery path, by the relay's retry
// policy: a retry later, or dead with its dead letter (the at-least-once path sends it alone;
// exactly-once sends it in its transaction and uses RetryLater and Refused).
type Settler struct {
	core relay.Core
	// publishAlone publishes one message in a call of its own (the at-least-once path's
	// dead letters; nil on the exactly-once path, which settles through RetryLater and Refused).
	publishAlone func(ctx context.Context, topic string, msg *message.Message) error
}

// NewSettler returns the settler of core, publishing dead letters with publishAlone.
func NewSettler(core relay.Core, publishAlone func(ctx context.Context, topic string, msg *message.Message) error) *Settler {
	return &Settler{core: core, publishAlone: publishAlone}
}

// Settle counts a failed attempt and decides its fate: a retry with backoff, or, after the last
// attempt (unless UnlimitedRetries) or on a permanent error, a dead letter (deadLetter).
func (s *Settler) Settle(ctx context.Context, r relay.Record, publishErr error) relay.Settlement {
	attempts, reason, dead := s.Failed(r, publishErr)
	if !dead {
		return s.RetryLater(r, attempts, reason)
	}
	return s.deadLetter(ctx, r, attempts, reason, s.core.Retry.Retriable(publishErr))
}

// Failed counts a failed attempt of r's event, with publishErr, and returns its attempts (this
// one included), its reason, and whether it is dead now (relay.RetryPolicy.Dead): a retry
// later (RetryLater) otherwise. Both delivery modes start a failure's settlement here.
func (s *Settler) Failed(r relay.Record, publishErr error) (attempts int, reason string, dead bool) {
	attempts = r.Attempts + 1
	s.core.Metrics.Failed.WithLabelValues(r.Event.Topic, r.Event.TenantID).Inc()
	return attempts, publishErr.Error(), s.core.Retry.Dead(attempts, publishErr)
}

// SettleSpent sends the dead letter of a record whose event has used its last attempt
// (relay.RetryPolicy.Spent: its dead letter failed after it, so it is pending still), without
// publishing the event: the round is an attempt of the dead letter alone, so that max_attempts
// bounds the event's publishes (publishing the event too would allow up to 2 × max_attempts
// of them). The callers take spent records out of the batch with SplitSpent.
func (s *Settler) SettleSpent(ctx context.Context, r relay.Record) relay.Settlement {
	return s.deadLetter(ctx, r, r.Attempts+1, SpentReason(s.core.Retry.MaxAttempts), true)
}

// deadLetter publishes the dead letter of r, failed at attempt attempts with reason (retriable
// says how the event's error was classified, for the log), before the acknowledgement
// transaction, so that no transaction is open during broker I/O. The dead letter follows the
// dead-letter sequence (Next): whole, then reduced when the broker refuses it whole; one
// refused even reduced leaves the row dead in the table with the reason, so that nothing is
// retried forever; one that cannot be published yet is retried alone in a later round
// (SettleSpent, once the event's attempts are spent). The dead letter and the dead row carry
// the event's publishes (relay.RetryPolicy.Published), never more than max_attempts.
func (s *Settler) deadLetter(ctx context.Context, r relay.Record, attempts int, reason string, retriable bool) relay.Settlement {
	published := s.core.Retry.Published(attempts)
	reduced := false
	var refusals error // the dead letter's errors so far
	for {
		err := s.publishAlone(ctx, s.core.DeadLetterTopic, Message(ctx, r.Event, reason, published, reduced))
		if err != nil {
			refusals = errors.Join(refusals, err)
		}
		switch Next(reduced, err, err != nil && s.core.Retry.FinalDeadLetterError(attempts, err)) {
		case Sent:
			return s.DeadLettered(r, published, reason, reduced, retriable)
		case SendReduced:
			reduced = true
		case Refused:
			return s.Refused(r, published, reason, refusals)
		default:
			return s.RetryLater(r, attempts, RetryReason(reason, s.core.DeadLetterTopic, refusals))
		}
	}
}

// DeadLettered is the settlement of an event whose dead letter the broker took, alone or in a
// transaction, reduced or whole: dead, with its publishes as its attempts and a reason that
// says when the dead letter went reduced (SentReason), counted and logged (retriable says how
// the event's error was classified).
func (s *Settler) DeadLettered(r relay.Record, published int, reason string, reduced, retriable bool) relay.Settlement {
	reason = SentReason(reason, reduced)
	s.core.Metrics.DeadLettered.WithLabelValues(r.Event.Topic, r.Event.TenantID).Inc()
	s.core.Log.Warn("event dead-lettered", "event_id", r.Event.ID, "topic", r.Event.Topic, "aggregate_id", r.Event.AggregateID,
		"attempts", published, "retriable", retriable, "reduced", reduced, "reason", reason)
	return relay.Settlement{Record: r, Attempts: published, Next: time.Now(), Dead: true, Reason: reason}
}

// Refused is the settlement of an event that can be neither published nor
// dead-lettered: dead in the table, with a reason saying that the dead-letter topic does not
// have it, counted and logged at error level (an operator lists it with `outboxkit
// dead-letters list`, and replays or discards it).
func (s *Settler) Refused(r relay.Record, attempts int, reason string, dlqErr error) relay.Settlement {
	s.core.Metrics.DeadLetterRefused.WithLabelValues(r.Event.Topic, r.Event.TenantID).Inc()
	s.core.Log.Error("event dead in the table only: the broker refused its dead letter, even reduced to the ids and the reason",
		"event_id", r.Event.ID, "topic", r.Event.Topic, "aggregate_id", r.Event.AggregateID, "attempts", attempts,
		"dead_letter_topic", s.core.DeadLetterTopic, "reason", reason, "dead_letter_error", dlqErr)
	return relay.Settlement{Record: r, Attempts: attempts, Next: time.Now(), Dead: true,
		Reason: RefusedReason(reason, s.core.DeadLetterTopic, dlqErr)}
}

// RetryLater is the settlement of a failed attempt retried after the backoff.
func (s *Settler) RetryLater(r relay.Record, attempts int, reason string) relay.Settlement {
	next := time.Now().Add(s.core.Retry.Backoff(attempts))
	s.core.Log.Info("publish failed, will retry", "event_id", r.Event.ID, "topic", r.Event.Topic,
		"aggregate_id", r.Event.AggregateID, "attempts", attempts, "next_attempt", next, "error", reason)
	return relay.Settlement{Record: r, Attempts: attempts, Next: next, Reason: reason}
}
