package relay

import (
	"errors"
	"fmt"
	"time"
)

// ErrOutage is wrapped by the error of a delivery some of whose events were not tried because
// the publisher reports an outage (NotTried).
var ErrOutage = errors.New("the publisher reports an outage")

// Outcome is what a delivery did to its records, handed from the deliverer to the
// acknowledgement and on to the source: the records acknowledged (their rows deleted or marked
// published), the failures settled (a retry later, or dead), and the rows left to the new owners
// of partitions lost meanwhile. Records in none of them (the later records of a key that failed,
// held back) stay pending, untouched.
type Outcome struct {
	Acked   []Record
	Settled []Settlement
	Fenced  int
}

// AllAcknowledged reports whether every one of n delivered records was acknowledged.
func (o Outcome) AllAcknowledged(n int) bool { return o.Fenced == 0 && len(o.Acked) == n }

// Settlement is what the acknowledgement writes for a failed record: a retry later, or dead.
type Settlement struct {
	Record   Record
	Attempts int
	Next     time.Time
	Dead     bool
	Reason   string
}

// Failure is a record whose publish failed, with the publisher's error.
type Failure struct {
	Record Record
	Err    error
}

// NotTried counts the failures the publisher reported as an outage (RetryPolicy.Unblamed)
// and returns the delivery's error for them: the events stay pending, untouched, with no
// attempt counted; the error makes the source back off and the stall warning count the
// delivery as failed.
func NotTried(m *Metrics, unavailable []Failure) error {
	for _, fl := range unavailable {
		m.Unavailable.WithLabelValues(fl.Record.Event.Topic, fl.Record.Event.TenantID).Inc()
	}
	return fmt.Errorf("%d events not tried, no attempt counted: %w: %w", len(unavailable), ErrOutage, unavailable[0].Err)
}

// OnlyNotTried reports whether err says only that events were not tried for an outage (NotTried's
// error, possibly wrapped, or several such errors joined) and nothing else failed.
func OnlyNotTried(err error) bool {
	switch e := err.(type) {
	case nil:
		return false
	case interface{ Unwrap() []error }:
		children := e.Unwrap()
		for _, c := range children {
			if c == ErrOutage { // NotTried's own error
				return true
			}
		}
		for _, c := range children {
			if !OnlyNotTried(c) {
				return false
			}
		}
		return len(children) > 0
	case interface{ Unwrap() error }:
		return OnlyNotTried(e.Unwrap())
	}
	return err == ErrOutage
}
