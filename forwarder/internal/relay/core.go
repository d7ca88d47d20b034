package relay

import (
	"database/sql"
	"log/slog"
	"time"
)

// AckTimeout bounds the acknowledgement transaction of one batch.
const AckTimeout = 30 * time.Second

// Core is the small value the forwarder's wiring hands every piece: the settings they share,
// the store, the metrics, the logger, the retry policy and the in-flight tracking.
type Core struct {
	DB      *sql.DB
	RelayID string
	// Workers is the number of delivery workers; BatchSize and MaxBatchBytes bound one batch.
	Workers       int
	BatchSize     int
	MaxBatchBytes int64
	// LeaseTTL bounds a publish: past it, another relay may own the rows anyway.
	LeaseTTL time.Duration
	// Retention keeps acknowledged rows marked published instead of deleting them.
	Retention time.Duration
	// DeadLetterTopic receives the dead letters.
	DeadLetterTopic string

	Store    *Store
	Inflight *Inflight
	Metrics  *Metrics
	Log      *slog.Logger
	Progress *Progress
	Retry    RetryPolicy
}
