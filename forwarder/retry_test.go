package forwarder

import (
	"errors"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

var errPermanent = errors.New("permanent")

func testPolicy(unlimited bool) relay.RetryPolicy {
	return relay.RetryPolicy{MaxAttempts: 3, Unlimited: unlimited, Retriable: func(err error) bool { return !errors.Is(err, errPermanent) },
		Initial: 100 * time.Millisecond, MaxInterval: time.Second, Multiplier: 2, Jitter: 0.2}
}

// TestRetryPolicyDecidesEveryPath: the one rule of a failed attempt, used by the at-least-once
// and the exactly-once paths alike.
func TestRetryPolicyDecidesEveryPath(t *testing.T) {
	retriable := errors.New("timeout")
	for _, tc := range []struct {
		name      string
		unlimited bool
		attempts  int
		err       error
		dead      bool
	}{
		{"a permanent error is dead at once", false, 1, errPermanent, true},
		{"a permanent error is dead with unlimited retries too", true, 1, errPermanent, true},
		{"a retriable error is retried within the budget", false, 2, retriable, false},
		{"a retriable error is dead after the last attempt", false, 3, retriable, true},
		{"unlimited retries never end a retriable error", true, 1000, retriable, false},
	} {
		if got := testPolicy(tc.unlimited).Dead(tc.attempts, tc.err); got != tc.dead {
			t.Errorf("%s: dead(%d, %v) = %v", tc.name, tc.attempts, tc.err, got)
		}
	}
	p := testPolicy(true)
	if p.FinalDeadLetterError(5, retriable) || !p.FinalDeadLetterError(6, retriable) || !p.FinalDeadLetterError(1, errPermanent) {
		t.Error("a refused dead letter must be final on a permanent error or after 2 x MaxAttempts, also with unlimited retries")
	}
	if bounded := testPolicy(false); bounded.Spent(2) || !bounded.Spent(3) || bounded.Published(2) != 2 || bounded.Published(5) != 3 {
		t.Error("an event's attempts must be spent from MaxAttempts on, and its publishes never counted past MaxAttempts")
	}
	if p.Spent(1000) || p.Published(1000) != 1000 {
		t.Error("unlimited retries never spend an event's attempts")
	}
	if p.PastBudget(3) || !p.PastBudget(4) {
		t.Error("pastBudget must hold from MaxAttempts + 1 on")
	}
}

// TestRetryPolicyBackoffGrowsWithinItsBounds: exponential from InitialInterval, capped at
// MaxInterval, spread by at most the jitter either way.
func TestRetryPolicyBackoffGrowsWithinItsBounds(t *testing.T) {
	p := testPolicy(false)
	for attempts, want := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 10: time.Second} {
		for range 100 {
			got := p.Backoff(attempts)
			if got < time.Duration(float64(want)*0.8) || got > time.Duration(float64(want)*1.2) {
				t.Fatalf("backoff(%d) = %v, want %v ± 20 %%", attempts, got, want)
			}
		}
	}
}

// TestRetryPolicyDisableJitterGivesExactWaits: RandomizationFactor 0 is the default's 0.2 unless
// DisableJitter says the waits are exact.
func TestRetryPolicyDisableJitterGivesExactWaits(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want float64
	}{
		{Config{}, 0.2},
		{Config{RandomizationFactor: 0.5}, 0.5},
		{Config{DisableJitter: true, RandomizationFactor: 0.5}, 0},
	} {
		cfg := tc.cfg
		cfg.setDefaults()
		p := retryPolicyOf(cfg)
		if p.Jitter != tc.want {
			t.Errorf("DisableJitter %v, RandomizationFactor %v: jitter %v, want %v", tc.cfg.DisableJitter, tc.cfg.RandomizationFactor, p.Jitter, tc.want)
		}
	}
	cfg := Config{DisableJitter: true, InitialInterval: 300 * time.Millisecond}
	cfg.setDefaults()
	p := retryPolicyOf(cfg)
	for range 50 {
		if got := p.Backoff(2); got != 600*time.Millisecond {
			t.Fatalf("backoff(2) with DisableJitter = %v, want exactly 600ms", got)
		}
	}
}
