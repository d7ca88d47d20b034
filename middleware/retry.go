package middleware

import (
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	wmmiddleware "github.com/ThreeDotsLabs/watermill/message/router/middleware"
)

// Defaults of RetryPoisonConfig.
const (
	DefaultMaxRetries          = 3
	DefaultInitialInterval     = 100 * time.Millisecond
	DefaultMaxInterval         = 10 * time.Second
	DefaultMultiplier          = 2.0
	DefaultRandomizationFactor = 0.5
)

// RetryPoisonConfig configures RetryThenPoison.
type RetryPoisonConfig struct {
	// Publisher publishes poisoned messages. Required.
	Publisher message.Publisher
	// PoisonTopic receives the messages that failed every attempt, with Watermill's poison
	// metadata (wmmiddleware.ReasonForPoisonedKey, PoisonedTopicKey, PoisonedHandlerKey,
	// PoisonedSubscriberKey) added to the original payload and metadata. Required.
	PoisonTopic string

	// MaxRetries is the number of retries after the first attempt, so a failing message is
	// handled MaxRetries+1 times before it is poisoned. Default DefaultMaxRetries (0 means the
	// default; use Watermill's PoisonQueue alone for no retries).
	MaxRetries int
	// InitialInterval is the wait before the first retry. Default DefaultInitialInterval.
	InitialInterval time.Duration
	// MaxInterval caps the exponential backoff. Default DefaultMaxInterval.
	MaxInterval time.Duration
	// Multiplier scales the interval after each retry, at least 1. Default DefaultMultiplier.
	Multiplier float64
	// RandomizationFactor spreads each wait over [interval*(1-f), interval*(1+f)] so that many
	// consumers failing together do not retry in lockstep; in [0, 1]. Default
	// DefaultRandomizationFactor; set DisableJitter for exact intervals.
	RandomizationFactor float64
	// DisableJitter makes the intervals exact (RandomizationFactor 0).
	DisableJitter bool
	// MaxElapsedTime stops retrying once this much time has passed since the first attempt.
	// Default 0: no limit besides MaxRetries.
	MaxElapsedTime time.Duration

	// ShouldRetry decides whether an error is worth retrying; errors it rejects go to the poison
	// topic at once. Errors marked with Permanent are never retried. Default: retry every error.
	ShouldRetry func(err error) bool
	// ShouldPoison decides whether an error that exhausted its retries goes to the poison topic.
	// An error it rejects is returned to the Router, which nacks the message, so the broker
	// redelivers it (and the retries start again): use it only for errors that will pass, such
	// as a database that is down. Default: poison every error.
	ShouldPoison func(err error) bool

	// DisableRecoverer removes the innermost Watermill Recoverer, which turns a panicking handler
	// into an error that is retried and then poisoned like any other.
	DisableRecoverer bool

	// Logger logs every retry. Default: no logging.
	Logger watermill.LoggerAdapter
}

func (c *RetryPoisonConfig) setDefaults() {
	if c.MaxRetries == 0 {
		c.MaxRetries = DefaultMaxRetries
	}
	if c.InitialInterval == 0 {
		c.InitialInterval = DefaultInitialInterval
	}
	if c.MaxInterval == 0 {
		c.MaxInterval = DefaultMaxInterval
		if c.MaxInterval < c.InitialInterval {
			c.MaxInterval = c.InitialInterval
		}
	}
	if c.Multiplier == 0 {
		c.Multiplier = DefaultMultiplier
	}
	if c.DisableJitter {
		c.RandomizationFactor = 0
	} else if c.RandomizationFactor == 0 {
		c.RandomizationFactor = DefaultRandomizationFactor
	}
	if c.Logger == nil {
		c.Logger = watermill.NopLogger{}
	}
}

// Validate reports the first invalid field, by name.
func (c RetryPoisonConfig) Validate() error {
	switch {
	case c.Publisher == nil:
		return errors.New("RetryPoisonConfig.Publisher is nil")
	case c.PoisonTopic == "":
		return errors.New("RetryPoisonConfig.PoisonTopic is empty")
	case c.MaxRetries < 0:
		return fmt.Errorf("RetryPoisonConfig.MaxRetries is %d, want >= 0", c.MaxRetries)
	case c.InitialInterval < 0:
		return fmt.Errorf("RetryPoisonConfig.InitialInterval is %s, want >= 0", c.InitialInterval)
	case c.MaxInterval != 0 && c.MaxInterval < c.InitialInterval:
		return fmt.Errorf("RetryPoisonConfig.MaxInterval %s is less than InitialInterval %s", c.MaxInterval, c.InitialInterval)
	case c.Multiplier != 0 && c.Multiplier < 1:
		return fmt.Errorf("RetryPoisonConfig.Multiplier is %g, want >= 1", c.Multiplier)
	case c.RandomizationFactor < 0 || c.RandomizationFactor > 1:
		return fmt.Errorf("RetryPoisonConfig.RandomizationFactor is %g, want between 0 and 1", c.RandomizationFactor)
	case c.MaxElapsedTime < 0:
		return fmt.Errorf("RetryPoisonConfig.MaxElapsedTime is %s, want >= 0", c.MaxElapsedTime)
	}
	return nil
}

// permanentError marks an error as not worth retrying.
type permanentError struct{ err error }

func (e permanentError) Error() string { return e.err.Error() }
func (e permanentError) Unwrap() error { return e.err }

// Permanent marks err as permanent: RetryThenPoison sends it to the poison topic without
// retrying. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return permanentError{err: err}
}

// IsPermanent reports whether err, or an error it wraps, was marked with Permanent.
func IsPermanent(err error) bool {
	var p permanentError
	return errors.As(err, &p)
}

// RetryThenPoison returns one middleware that retries a failing handler with exponential backoff
// and jitter and then publishes the message to the poison topic and acknowledges it. It is built
// from Watermill's own middleware, nested as PoisonQueue(Retry(Recoverer(handler))).
//
// It is a single middleware on purpose. The Router runs the middleware added first as the
// outermost one, so adding Retry before PoisonQueue lets PoisonQueue swallow the first error and
// Retry never runs (Watermill issues #580 and #645). Add RetryThenPoison to the Router or to one
// handler; middleware added before it (correlation id, logging, metrics) sees the final outcome,
// middleware added after it runs on every attempt. Under [Tracing] (added before it), the
// delivery's span records each retry, the number of attempts and a poisoning, with its reason.
func RetryThenPoison(config RetryPoisonConfig) (message.HandlerMiddleware, error) {
	config.setDefaults()
	if err := config.Validate(); err != nil {
		return nil, fmt.Errorf("invalid retry/poison config: %w", err)
	}
	shouldPoison := config.ShouldPoison
	if shouldPoison == nil {
		shouldPoison = func(error) bool { return true }
	}
	poison, err := wmmiddleware.PoisonQueueWithFilter(config.Publisher, config.PoisonTopic, shouldPoison)
	if err != nil {
		return nil, fmt.Errorf("poison queue on topic %q: %w", config.PoisonTopic, err)
	}
	shouldRetry := config.ShouldRetry
	retry := wmmiddleware.Retry{
		MaxRetries:          config.MaxRetries,
		InitialInterval:     config.InitialInterval,
		MaxInterval:         config.MaxInterval,
		Multiplier:          config.Multiplier,
		RandomizationFactor: config.RandomizationFactor,
		MaxElapsedTime:      config.MaxElapsedTime,
		ShouldRetry: func(p wmmiddleware.RetryParams) bool {
			if IsPermanent(p.Err) {
				return false
			}
			return shouldRetry == nil || shouldRetry(p.Err)
		},
		// Each attempt starts from the delivery's context (Watermill issue #467).
		ResetContextOnRetry: true,
		Logger:              config.Logger,
	}
	recoverer := !config.DisableRecoverer
	return func(h message.HandlerFunc) message.HandlerFunc {
		if recoverer {
			h = wmmiddleware.Recoverer(h)
		}
		return traceRetryThenPoison(poison, retry.Middleware, h, shouldPoison, config.PoisonTopic)
	}, nil
}
