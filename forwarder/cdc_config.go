package forwarder

import (
	"errors"
	"fmt"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/pgrepl"
	"github.com/outboxkit/outboxkit/forwarder/internal/sqlstore"
	"github.com/outboxkit/outboxkit/outbox"
)

// Source is where a forwarder reads committed events from.
type Source string

// The sources of events.
const (
	// SourcePolling claims pending rows from the table (every dialect). The default.
	SourcePolling Source = "polling"
	// SourceCDC streams the table's inserts from a PostgreSQL logical replication slot
	// (pgoutput); the table stays the source of truth (docs/cdc.md).
	SourceCDC Source = "cdc"
)

// CDCConfig configures the cdc source.
type CDCConfig struct {
	// DSN is the PostgreSQL connection string of the replication connection (a URL or
	// key=value pairs); "replication=database" is added. Its role needs the REPLICATION
	// attribute (docs/security.md). Required with SourceCDC.
	DSN string
	// StatusInterval is how often the relay reports its confirmed position to PostgreSQL, also
	// while the outbox is idle, so that an idle slot does not pin WAL. Default: 1s. It must be
	// well below the server's wal_sender_timeout (60s by default).
	StatusInterval time.Duration
	// RetryInterval is how often the retry path claims the events the stream left to it (failed
	// events due again, and the later events of their keys). Default: MinPollInterval * 20
	// (200ms).
	RetryInterval time.Duration
	// StallAfter bounds how long the streaming relay stays silent about rows the stream does
	// not deliver: when the stream has delivered none of the table's rows for StallAfter while
	// pending rows not on the retry path are older than StallAfter, it logs a warning, sets
	// outboxkit_cdc_stalled and keeps checking every StallAfter/3 (docs/cdc.md, Stalls). A
	// backlog being streamed is not a stall: the stream delivers rows meanwhile. Shorter
	// reports sooner; a row is reported at most about 4/3 StallAfter after it committed.
	// Default: 30s.
	StallAfter time.Duration
}

// DefaultCDCStallAfter is CDCConfig.StallAfter's default, also the age from which
// `outboxkit status` reports a pending row the stream has not delivered (Admin.Slots).
const DefaultCDCStallAfter = 30 * time.Second

func (c *Config) setCDCDefaults() {
	setDefault(&c.Source, SourcePolling)
	setDefault(&c.CDC.StatusInterval, time.Second)
	setDefault(&c.CDC.RetryInterval, 20*c.MinPollInterval)
	setDefault(&c.CDC.StallAfter, DefaultCDCStallAfter)
	c.setWALDefaults()
}

// validateSource checks Source and, for SourceCDC, the CDC settings.
func (c Config) validateSource() []error {
	switch c.Source {
	case SourcePolling:
		return nil
	case SourceWAL:
		return c.validateWAL()
	case SourceCDC:
	default:
		return []error{fmt.Errorf("Source %q is not one of polling, cdc, wal", c.Source)}
	}
	var errs []error
	if !sqlstore.Replicates(c.Dialect) {
		errs = append(errs, fmt.Errorf("Source cdc needs the postgres dialect, got %q", c.Dialect))
	}
	if c.CDC.DSN == "" {
		errs = append(errs, errors.New("CDC.DSN is required with Source cdc"))
	} else if err := pgrepl.ValidDSN(c.CDC.DSN); err != nil {
		errs = append(errs, fmt.Errorf("CDC.DSN is %w", err))
	}
	if c.CDC.StatusInterval <= 0 || c.CDC.RetryInterval <= 0 || c.CDC.StallAfter <= 0 {
		errs = append(errs, fmt.Errorf("CDC.StatusInterval %v, CDC.RetryInterval %v and CDC.StallAfter %v must be positive",
			c.CDC.StatusInterval, c.CDC.RetryInterval, c.CDC.StallAfter))
	}
	if sqlstore.Replicates(c.Dialect) {
		// The names' lengths do not depend on the installation, read only at start.
		const anyInstallation = "00000000-0000-0000-0000-000000000000"
		table, err := outbox.NewTable(c.Dialect, c.Table)
		if err == nil {
			_, err = table.Slot(anyInstallation, c.LeaseGroup)
		}
		if err == nil {
			_, err = table.Publication(anyInstallation)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}
