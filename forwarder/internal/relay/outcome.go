package relay

import (
	"time"
)

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
