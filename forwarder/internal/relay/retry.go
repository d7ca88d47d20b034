package relay

import (
	"math"
	"math/rand/v2"
	"time"
)

// RetryPolicy is the one rule for a failed attempt, on every delivery path: whether the event is
// dead now, when it is tried again, and when a refused dead letter is final. It is built once
// from the Config (retryPolicyOf).
type RetryPolicy struct {
	MaxAttempts int
	Unlimited   bool
	Retriable   func(error) bool
	// Unavailable reports a failure that says nothing about the event (the publisher's
	// OutageClassifier); nil: none does.
	Unavailable func(error) bool
	Initial     time.Duration
	MaxInterval time.Duration
	Multiplier  float64
	Jitter      float64
}

// Dead reports whether an event whose attempt number attempts failed with err is dead-lettered
// now: on a permanent error, or after its last attempt (MaxAttempts, unless UnlimitedRetries).
func (p RetryPolicy) Dead(attempts int, err error) bool {
	return !p.Retriable(err) || (!p.Unlimited && attempts >= p.MaxAttempts)
}

// Unblamed reports whether a failure with err is not the event's: the publisher could not try
// it at all (its schema registry did not answer). Such an event spends no attempt and is not
// settled: it stays pending, untouched, with its key's later events behind it, and the delivery
// fails, so that the source backs off and the stall warning counts it.
func (p RetryPolicy) Unblamed(err error) bool { return p.Unavailable != nil && p.Unavailable(err) }

// Spent reports whether an event whose publish failed attempts times has used its last attempt
// (MaxAttempts, unless Unlimited). Such an event is never published again: a dead letter that
// failed after its last attempt is sent alone in the next rounds (each counted as an attempt,
// up to LastDeadLetterChance), so that MaxAttempts bounds the event's publishes on every path.
func (p RetryPolicy) Spent(attempts int) bool { return !p.Unlimited && attempts >= p.MaxAttempts }

// Published is how many of attempts published the event: the attempts past its last one
// (Spent) were its dead letter's alone. A dead letter and a dead row carry this count.
func (p RetryPolicy) Published(attempts int) int {
	if p.Spent(attempts) {
		return p.MaxAttempts
	}
	return attempts
}

// PastBudget reports whether the event has failed more often than its retry budget allows: its
// dead letter was refused before (or it is retried without limit), so its next dead letter goes
// reduced from the start.
func (p RetryPolicy) PastBudget(attempts int) bool { return attempts > p.MaxAttempts }

// LastDeadLetterChance reports whether a dead letter that fails with a retriable error at
// this attempt has had its chances: its event has failed MaxAttempts times more than the retry
// budget, so the failure is taken as final. This holds with UnlimitedRetries too, which is
// about the event's delivery, not its dead letter: a broker that keeps refusing a dead letter
// with an error it calls retriable (inside a Kafka transaction a refused record is reported so)
// must not hold the event, and its key, forever.
func (p RetryPolicy) LastDeadLetterChance(attempts int) bool { return attempts >= 2*p.MaxAttempts }

// FinalDeadLetterError reports whether a dead letter that failed with err at this attempt is
// refused for good: a permanent error, or its last chance.
func (p RetryPolicy) FinalDeadLetterError(attempts int, err error) bool {
	return !p.Retriable(err) || p.LastDeadLetterChance(attempts)
}

// Backoff is InitialInterval * Multiplier^(attempts-1), capped at MaxInterval, spread by
// ±RandomizationFactor so retries of many events do not arrive together.
func (p RetryPolicy) Backoff(attempts int) time.Duration {
	d := float64(p.Initial) * math.Pow(p.Multiplier, float64(attempts-1))
	d = math.Min(d, float64(p.MaxInterval))
	d *= 1 + p.Jitter*(2*rand.Float64()-1)
	return time.Duration(d)
}
