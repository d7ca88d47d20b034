package relay

import (
	"context"
	"database/sql"
	"time"
)

// The pieces of the forwarder meet through these four interfaces: a Source hands records of
// its leased partitions to a Deliverer, which publishes them, settles the failures and
// acknowledges the outcome through the Acknowledger; the polling source claims its records
// through a Claimer. The forwarder's wiring builds one source and one deliverer from the
// configuration.

// Source feeds a Deliverer with records of the leased partitions until ctx ends: the polling
// claim (internal/polling) or a PostgreSQL logical replication slot (the cdc source).
type Source interface {
	// Start prepares the source before the first lease is taken.
	Start(ctx context.Context) error
	// Run hands records to the deliverer until ctx ends.
	Run(ctx context.Context)
}

// Deliverer is a delivery mode (at-least-once, exactly-once): it publishes the records a source
// hands it and acknowledges the outcome through the one fenced acknowledgement. What one
// source alone needs of the delivery mode is handed to that source by the wiring: the polling
// claims' shape (polling.Shaper), the cdc source's fencing scope (cdc.Scope).
type Deliverer interface {
	// Start prepares the deliverer before the first lease is taken.
	Start(ctx context.Context) error
	// Ready prepares a worker's leases for publishing and returns those whose records may be
	// published now. An error is logged by the deliverer; the leases returned are usable anyway.
	Ready(ctx context.Context, worker int, leases []Lease) ([]Lease, error)
	// Deliver publishes records under leases, settles the failures and acknowledges the outcome.
	Deliver(ctx context.Context, worker int, leases []Lease, records []Record) (Outcome, error)
	// Stop releases what the deliverer holds once no delivery runs.
	Stop()
	// LogAttrs are the deliverer's attributes for the forwarder's start-up log line.
	LogAttrs() []any
}

// Claimer is the store as the polling source reads it (*Store): a worker's live leases, the
// release of the partitions' due scheduled events and the wait until the next is due, and the
// pending rows of partitions.
type Claimer interface {
	LiveLeases(ctx context.Context, q Querier, owner string, worker, workers int) ([]Lease, error)
	ReleaseDue(ctx context.Context, db *sql.DB, partitions []int, limit int) error
	NextDue(ctx context.Context, q Querier, partitions []int, horizon time.Duration) (time.Duration, bool, error)
	Claim(ctx context.Context, q Querier, partitions []int, limit int, maxBytes int64) ([]Record, error)
}

// Acknowledger ends every delivery: it deletes (or marks) the acknowledged records and writes
// the settlements of the failed ones, fenced by the leases' epochs, and returns what it wrote
// and the rows left to the new owners of partitions lost meanwhile (internal/ack).
type Acknowledger interface {
	Acknowledge(ctx context.Context, worker int, leases []Lease, acked []Record, settled []Settlement) (Outcome, map[int]int, error)
}
