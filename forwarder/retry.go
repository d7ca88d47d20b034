package forwarder

import "github.com/outboxkit/outboxkit/forwarder/internal/relay"

// retryPolicyOf is the retry policy of c (with its defaults set).
func retryPolicyOf(c Config) relay.RetryPolicy {
	return relay.RetryPolicy{MaxAttempts: c.MaxAttempts, Unlimited: c.UnlimitedRetries, Retriable: c.IsRetriable,
		Unavailable: outageClassifierOf(c.Publisher),
		Initial:     c.InitialInterval, MaxInterval: c.MaxInterval, Multiplier: c.Multiplier, Jitter: c.RandomizationFactor}
}
