package forwarder

import (
	"context"

	"github.com/outboxkit/outboxkit/forwarder/internal/atleastonce"
	"github.com/outboxkit/outboxkit/forwarder/internal/deadletter"
	"github.com/outboxkit/outboxkit/forwarder/internal/exactlyonce"
	"github.com/outboxkit/outboxkit/forwarder/internal/lease"
	"github.com/outboxkit/outboxkit/forwarder/internal/polling"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// The wiring: the one place that reads Config.Source and Config.Delivery (beside validation)
// and builds the pieces from the core value (relay.Core): the source (internal/polling, or the
// cdc source) hands records to the deliverer (internal/atleastonce or internal/exactlyonce), which
// acknowledges through the one acknowledger (internal/ack). The publisher strategy is chosen
// once too (OutcomePublisherOf, publish.go).

// newPipeline returns the deliverer of the configured delivery. It and New's choice of source
// are the only readers of Config.Delivery and Config.Source outside validation. unitsConfigured
// says Config.TransactionalUnits was set, not defaulted.
func newPipeline(f *Forwarder, unitsConfigured bool) relay.Deliverer {
	if f.cfg.Delivery == ExactlyOnce {
		txp := f.cfg.Publisher.(TransactionalPublisher) // checked by Validate
		return exactlyonce.New(f.core, exactlyonce.Config{Units: f.cfg.TransactionalUnits, UnitsConfigured: unitsConfigured,
			IDPrefix: f.cfg.TransactionalIDPrefix, CheckpointTopic: f.cfg.CheckpointTopic, LeaseGroup: f.cfg.LeaseGroup,
			Halt: f.halt, UnitsSettled: func(units int) { f.leases.SetShare(sharePolicy(f, units)) }},
			txp, f.acker, deadletter.NewSettler(f.core, nil))
	}
	return atleastonce.New(f.core, f.publisher, f.acker)
}

// sharePolicy returns how this relay shares the partitions with the others of its lease group:
// whole transactional units (units of them) with ExactlyOnce delivery, single partitions
// otherwise; the cdc source aims at all of them while this relay streams the slot and none
// otherwise.
func sharePolicy(f *Forwarder, units int) relay.SharePolicy {
	var share relay.SharePolicy = lease.PerPartition{}
	if f.cfg.Delivery == ExactlyOnce {
		share = lease.Units(units)
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
