package forwarder

import (
	"errors"
	"fmt"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/pgrepl"
	"github.com/outboxkit/outboxkit/forwarder/internal/sqlstore"
	"github.com/outboxkit/outboxkit/forwarder/internal/wal"
	"github.com/outboxkit/outboxkit/outbox"
)

// SourceWAL streams the events that outbox.Writer emits as logical decoding messages in
// outbox.ModeWAL (PostgreSQL 14+, configured by WAL; docs/wal.md): no row on the happy path;
// the events of a failing key are parked in the outbox table and relayed from there.
const SourceWAL Source = "wal"

// WALConfig configures the wal source.
type WALConfig struct {
	// DSN is the PostgreSQL connection string of the replication connection (a URL or
	// key=value pairs); "replication=database" is added. Its role needs the REPLICATION
	// attribute. Required with SourceWAL.
	DSN string
	// Slot is the logical replication slot the relay streams (and the name of the empty
	// publication pgoutput needs); the relay creates both when missing. Default:
	// "outboxkit_wal_<table>" (dots as underscores, a hash of the lease group added unless it
	// is "default"; wal.DefaultSlotName).
	Slot string
	// StatusInterval is how often the relay reports its confirmed position to PostgreSQL, also
	// while the outbox is idle. Default: 1s; keep it well below wal_sender_timeout.
	StatusInterval time.Duration
	// RetryInterval is how often the relay publishes the parked events from the table while
	// keys are parked. Default: MinPollInterval * 20 (200ms).
	RetryInterval time.Duration
	// BatchSize and MaxBatchBytes bound a batch of the stream: the events (and their payload
	// bytes) delivered at once, in one Kafka transaction with ExactlyOnce delivery. The stream
	// hands a batch over as soon as the previous one is delivered, so a batch is only as large
	// as what arrived meanwhile: the bounds add no latency at a steady rate; on a backlog they
	// say how much the reader gathers while a batch is published (or its transaction commits).
	// A batch holds whole database transactions, so one larger than the bounds is delivered
	// whole. Defaults: Config.BatchSize and Config.MaxBatchBytes (larger stream batches
	// measured slower on a loaded 2-core machine: docs/cdc.md, "The wal drain").
	BatchSize     int
	MaxBatchBytes int64
}

// WALSlotName is the slot the wal source of table (as configured) in lease group streams by
// default (WALConfig.Slot).
func WALSlotName(table, group string) string { return wal.DefaultSlotName(table, group) }

func (c *Config) setWALDefaults() {
	if c.Source != SourceWAL {
		return
	}
	setDefault(&c.WAL.Slot, wal.DefaultSlotName(c.Table, c.LeaseGroup))
	setDefault(&c.WAL.StatusInterval, time.Second)
	setDefault(&c.WAL.RetryInterval, 20*c.MinPollInterval)
	setDefault(&c.WAL.BatchSize, c.BatchSize)
	setDefault(&c.WAL.MaxBatchBytes, c.MaxBatchBytes)
}

// validateWAL checks the WAL settings and what the wal source does not combine with.
func (c Config) validateWAL() []error {
	var errs []error
	if !sqlstore.Replicates(c.Dialect) {
		errs = append(errs, fmt.Errorf("Source wal needs the postgres dialect, got %q", c.Dialect))
	}
	if c.WAL.DSN == "" {
		errs = append(errs, errors.New("WAL.DSN is required with Source wal"))
	} else if err := pgrepl.ValidDSN(c.WAL.DSN); err != nil {
		errs = append(errs, fmt.Errorf("WAL.DSN is %w", err))
	}
	if err := outbox.ValidateSlotName(c.WAL.Slot); err != nil {
		errs = append(errs, fmt.Errorf("WAL.Slot: %w", err))
	}
	if c.WAL.StatusInterval <= 0 || c.WAL.RetryInterval <= 0 {
		errs = append(errs, fmt.Errorf("WAL.StatusInterval %v and WAL.RetryInterval %v must be positive",
			c.WAL.StatusInterval, c.WAL.RetryInterval))
	}
	if c.WAL.BatchSize <= 0 || c.WAL.MaxBatchBytes <= 0 {
		errs = append(errs, fmt.Errorf("WAL.BatchSize %d and WAL.MaxBatchBytes %d must be positive", c.WAL.BatchSize, c.WAL.MaxBatchBytes))
	}
	if len(c.Tenants) > 0 {
		errs = append(errs, fmt.Errorf("Source wal streams every tenant of the table; Tenants %q is %w", c.Tenants, ErrUnsupported))
	}
	return errs
}
