package forwarder

import (
	"context"

	"github.com/outboxkit/outboxkit/forwarder/internal/polling"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// newSource returns the source of the configured Config.Source.
func newSource(f *Forwarder, table outbox.Table) (relay.Source, error) {
	if f.cfg.Source == SourceCDC {
		if err := f.setupCDC(table); err != nil {
			return nil, err
		}
		return cdcSource{f}, nil
	}
	return polling.New(f.core, f.pipeline, polling.Config{MinPollInterval: f.cfg.MinPollInterval,
		MaxPollInterval: f.cfg.MaxPollInterval, Wakeups: f.cfg.Wakeups, LeasesTaken: f.leasesTaken}), nil
}

// cdcSource streams the table's inserts from a replication slot (cdc*.go).
type cdcSource struct{ f *Forwarder }

func (s cdcSource) Run(ctx context.Context) { s.f.cdcLoop(ctx) }
