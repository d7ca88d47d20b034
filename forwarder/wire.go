package forwarder

import (
	"context"
	"fmt"

	"github.com/outboxkit/outboxkit/forwarder/internal/atleastonce"
	"github.com/outboxkit/outboxkit/forwarder/internal/cdc"
	"github.com/outboxkit/outboxkit/forwarder/internal/deadletter"
	"github.com/outboxkit/outboxkit/forwarder/internal/exactlyonce"
	"github.com/outboxkit/outboxkit/forwarder/internal/lease"
	"github.com/outboxkit/outboxkit/forwarder/internal/polling"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/forwarder/internal/wal"
	"github.com/outboxkit/outboxkit/forwarder/internal/walslot"
)

// The wiring: the one place that reads Config.Source and Config.Delivery (beside validation)
// and builds the pieces from the core value (relay.Core): the source (internal/polling, or the
// cdc source, internal/cdc) hands records to the deliverer (internal/atleastonce or
// internal/exactlyonce), which acknowledges through the one acknowledger (internal/ack). The
// publisher strategy is chosen once too (OutcomePublisherOf, publish.go).

// deliverer is the configured delivery: the deliverer, and what a source takes of the delivery
// mode beside it.
type deliverer struct {
	relay.Deliverer
	// claims sizes and cuts the polling source's claims; scope is the leases the cdc source
	// holds and fences for a delivery.
	claims polling.Shaper
	scope  cdc.Scope
}

// newDeliverer returns the deliverer of the configured delivery. It and New's choice of source
// are the only readers of Config.Delivery and Config.Source outside validation. unitsConfigured
// says Config.TransactionalUnits was set, not defaulted.
func newDeliverer(f *Forwarder, unitsConfigured bool) deliverer {
	if f.cfg.Delivery == ExactlyOnce {
		txp := f.cfg.Publisher.(TransactionalPublisher) // checked by Validate
		d := exactlyonce.New(f.core, exactlyonce.Config{Units: f.cfg.TransactionalUnits, UnitsConfigured: unitsConfigured,
			IDPrefix: f.cfg.TransactionalIDPrefix, CheckpointTopic: f.cfg.CheckpointTopic, LeaseGroup: f.cfg.LeaseGroup,
			Halt: f.halt, UnitsSettled: func(units int) { f.leases.SetShare(sharePolicy(f, units)) }},
			txp, f.acker, deadletter.NewSettler(f.core, nil))
		return deliverer{Deliverer: d, claims: d, scope: d.Scope}
	}
	d := atleastonce.New(f.core, f.publisher, f.acker)
	return deliverer{Deliverer: d, claims: polling.Batches{Rows: f.cfg.BatchSize, Bytes: f.cfg.MaxBatchBytes}, scope: d.Scope}
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
	if t, ok := f.source.(targeting); ok {
		share = lease.Target{SharePolicy: share, Partitions: t.Target}
	}
	return share
}

// targeting is a source that says how many partitions the relay aims at (lease.Target): the
// cdc and wal sources, every partition while this relay streams the slot and none otherwise.
type targeting interface {
	Target(partitions int) int
}

// newSource returns the source of the configured Config.Source. The cdc source takes the
// partitions through the lease keeper's heartbeat, which New builds after it (the keeper's
// share policy aims at the source's Target).
func newSource(f *Forwarder) (relay.Source, error) {
	if f.cfg.Source == SourceWAL {
		return newWALSource(f)
	}
	if f.cfg.Source == SourceCDC {
		heartbeat := func(ctx context.Context) (relay.Holding, error) { return f.leases.Heartbeat(ctx) }
		src, err := cdc.New(f.core, f.deliverer.Deliverer, heartbeat, cdc.Config{DSN: f.cfg.CDC.DSN,
			StatusInterval: f.cfg.CDC.StatusInterval, RetryInterval: f.cfg.CDC.RetryInterval,
			StallAfter: f.cfg.CDC.StallAfter, HeartbeatInterval: f.cfg.HeartbeatInterval, Registerer: f.cfg.Metrics,
			Scope: f.deliverer.scope})
		if err != nil {
			return nil, fmt.Errorf("forwarder: %w", err)
		}
		return src, nil
	}
	return polling.New(f.core, f.deliverer.Deliverer, polling.Config{MinPollInterval: f.cfg.MinPollInterval,
		MaxPollInterval: f.cfg.MaxPollInterval, Wakeups: f.cfg.Wakeups, LeasesTaken: f.leasesTaken, Claims: f.deliverer.claims}), nil
}

// newWALSource returns the wal source: the streamed events go through an at-least-once
// deliverer whose acknowledger writes nothing (they have no row), or with ExactlyOnce in
// transactions of the stream's own unit, the parked ones through the forwarder's deliverer. With Config.Metrics, it registers the slot's collector there
// (outboxkit_wal_slot_*, which the wal slot alerts read).
func newWALSource(f *Forwarder) (*wal.Source, error) {
	if f.cfg.Metrics != nil {
		if err := f.cfg.Metrics.Register(walslot.NewCollector(f.cfg.DB, f.store.Table, f.cfg.WAL.Slot)); err != nil {
			return nil, fmt.Errorf("forwarder: register the metrics of wal slot %s (table %s): %w", f.cfg.WAL.Slot, f.store.Table, err)
		}
	}
	heartbeat := func(ctx context.Context) (relay.Holding, error) { return f.leases.Heartbeat(ctx) }
	stream := wal.AtLeastOnce(atleastonce.New(f.core, f.publisher, wal.NewStreamAcknowledger(f.core)))
	if table, ok := f.deliverer.Deliverer.(*exactlyonce.Deliverer); ok {
		stream = wal.ExactlyOnce(wal.ExactlyOnceConfig{Publisher: f.cfg.Publisher.(TransactionalPublisher), Table: table,
			CheckpointTopic: f.cfg.CheckpointTopic, Settler: deadletter.NewSettler(f.core, nil)})
	}
	return wal.New(f.core, stream, f.deliverer.Deliverer, heartbeat, wal.Config{DSN: f.cfg.WAL.DSN, Slot: f.cfg.WAL.Slot,
		Publication: f.cfg.WAL.Slot, Prefix: f.store.Table.WALPrefix(), StatusInterval: f.cfg.WAL.StatusInterval,
		RetryInterval: f.cfg.WAL.RetryInterval, HeartbeatInterval: f.cfg.HeartbeatInterval, Scope: f.deliverer.scope,
		BatchSize: f.cfg.WAL.BatchSize, MaxBatchBytes: f.cfg.WAL.MaxBatchBytes, Hooks: f.cfg.walHooks}), nil
}
