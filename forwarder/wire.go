package forwarder

import (
	"context"

	"github.com/outboxkit/outboxkit/forwarder/internal/atleastonce"
	"github.com/outboxkit/outboxkit/forwarder/internal/lease"
	"github.com/outboxkit/outboxkit/forwarder/internal/polling"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// The wiring: the one place that reads Config.Source and Config.Delivery (beside validation)
// and builds the pieces from the core value (relay.Core): the source (internal/polling, or the
// cdc source) hands records to the deliverer (internal/atleastonce, or exactly-once), which
// acknowledges through the one acknowledger (internal/ack). The publisher strategy is chosen
// once too (OutcomePublisherOf, publish.go).

// newPipeline returns the pipeline of the configured delivery. It and New's choice of source
// are the only readers of Config.Delivery and Config.Source outside validation.
func newPipeline(f *Forwarder) relay.Deliverer {
	if f.cfg.Delivery == ExactlyOnce {
		f.txp = f.cfg.Publisher.(TransactionalPublisher) // checked by Validate
		return exactlyOnce{f}
	}
	return atleastonce.New(f.core, f.publisher, f.acker)
}

// sharePolicy returns how this relay shares the partitions with the others of its lease group:
// whole transactional units with ExactlyOnce delivery, single partitions otherwise; the cdc
// source aims at all of them while this relay streams the slot and none otherwise.
func sharePolicy(f *Forwarder) relay.SharePolicy {
	var share relay.SharePolicy = lease.PerPartition{}
	if f.cfg.Delivery == ExactlyOnce {
		share = lease.Units(f.cfg.TransactionalUnits)
	}
	if f.cfg.Source == SourceCDC {
		streaming := &f.cdc.streaming
		share = lease.Target{SharePolicy: share, Partitions: func(int) int {
			if streaming.Load() {
				return outbox.Partitions
			}
			return 0
		}}
	}
	return share
}

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
