// Package cdc is the cdc source (docs/cdc.md). One logical replication slot per lease group
// streams the table's inserts in commit order. Only one relay can stream a slot at a time
// (PostgreSQL refuses a second walsender), and that relay takes every partition of the group
// (the others hold none and stand by), so the lease epochs fence its acknowledgements as with
// polling and no key is ever published by two relays at once. The stream hands batches to the
// deliverer, the same publish, settle and fenced acknowledgement as the polling source; the
// slot position is confirmed only once everything before it is acknowledged or left to the
// retry path.
package cdc

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxkit/outboxkit/forwarder/internal/pgrepl"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// Config is the cdc source's own settings (forwarder.CDCConfig, and the heartbeat interval).
type Config struct {
	// DSN is the replication connection's connection string.
	DSN string
	// StatusInterval, RetryInterval and StallAfter are forwarder.CDCConfig's.
	StatusInterval, RetryInterval, StallAfter time.Duration
	// HeartbeatInterval paces the reconnects, the standby's checks and the wait for the leases.
	HeartbeatInterval time.Duration
	// Registerer (may be nil) registers the cdc metrics.
	Registerer prometheus.Registerer
	// Scope is the delivery mode's fencing scope (required).
	Scope Scope
}

// Scope returns the leases a delivery of records must hold and fence, out of leases (all of the
// relay's): those of the records' partitions at least once, of their whole transactional units
// exactly once. The wiring takes it from the delivery mode.
type Scope func(leases []relay.Lease, records []relay.Record) []relay.Lease

// Heartbeat is what the source needs of the relay's lease keeper (internal/lease): a heartbeat,
// which takes every partition while the source streams (its share policy aims at Target).
type Heartbeat func(ctx context.Context) (relay.Holding, error)

// Source is the cdc source: a relay.Source streaming the table's inserts.
type Source struct {
	core      relay.Core
	deliverer relay.Deliverer
	heartbeat Heartbeat
	cfg       Config
	// slot and publication are named at start, from the table's installation (Start).
	slot, publication string
	vecs              *metricVecs
	metrics           *metrics // vecs' metrics of the slot, from start on
	streaming         atomic.Bool
	activity          activity
	// used says the slot existed while this relay ran: finding it missing later means lost.
	used bool
	// releaseWarn keeps a release of due scheduled events that fails at every retry pass (a
	// table not migrated yet) to one warning a minute.
	releaseWarn relay.EveryMinute
}

// activity is what the stall check (stall.go) reads of the stream's delivering side.
type activity struct {
	// lastDelivered is when the stream last delivered rows of the table (Unix nanoseconds; the
	// stream's start counts): the stall check's clock.
	lastDelivered atomic.Int64
	// partsInFlight counts the stream's parts being published: while there are some, the relay
	// is busy with delivered rows (a slow broker is not a silent stream).
	partsInFlight atomic.Int32
}

// New returns the cdc source over core, handing its records to d and taking the partitions
// through heartbeat; it registers the cdc metrics.
func New(core relay.Core, d relay.Deliverer, heartbeat Heartbeat, cfg Config) (*Source, error) {
	v, err := newMetricVecs(cfg.Registerer, core.Store.Table.Events())
	if err != nil {
		return nil, err
	}
	return &Source{core: core, deliverer: d, heartbeat: heartbeat, cfg: cfg, vecs: v}, nil
}

// Target is the number of partitions the relay aims at (the share policy's, lease.Target): all
// of them while it streams the slot, none while it stands by.
func (s *Source) Target(int) int {
	if s.streaming.Load() {
		return outbox.Partitions
	}
	return 0
}

// errSlotBusy: another walsender streams the slot.
type errSlotBusy struct{ err error }

func (e errSlotBusy) Error() string { return e.err.Error() }

// Run streams the slot while this relay can, standing by (and retrying every heartbeat)
// while another relay streams it, until ctx ends.
func (s *Source) Run(ctx context.Context) {
	standingBy := false
	for ctx.Err() == nil {
		err := s.session(ctx)
		s.streaming.Store(false)
		s.metrics.streaming.Set(0)
		if ctx.Err() != nil {
			return
		}
		var busy errSlotBusy
		if !errors.As(err, &busy) {
			standingBy = false
			s.core.Log.Warn("cdc: the stream stopped; reconnecting", "slot", s.slot, "error", err, "in", s.cfg.HeartbeatInterval)
			relay.Sleep(ctx, s.cfg.HeartbeatInterval)
			continue
		}
		if !standingBy {
			s.core.Log.Info("cdc: another relay streams the slot; standing by", "slot", s.slot)
			standingBy = true
		}
		if s.takeOverStalled(ctx) {
			continue
		}
		relay.Sleep(ctx, s.cfg.HeartbeatInterval)
	}
}

// takeOverStalled terminates the walsender of the slot when no other relay holds a live lease
// of the group: its relay died or stalled (a paused process keeps its walsender until the
// server's wal_sender_timeout), and its leases have expired, so it can no longer acknowledge.
func (s *Source) takeOverStalled(ctx context.Context) bool {
	others, err := s.core.Store.OtherLiveOwners(ctx, s.core.DB, s.core.RelayID)
	if err != nil || others > 0 {
		return false
	}
	done, err := pgrepl.TerminateWalsender(ctx, s.core.DB, s.slot)
	if err != nil {
		s.core.Log.Warn("cdc: cannot terminate the walsender of a relay without live leases", "slot", s.slot, "error", err)
		return false
	}
	if done {
		s.metrics.takeovers.Inc()
		s.core.Log.Warn("cdc: terminated the walsender of a relay whose leases expired, taking the slot over", "slot", s.slot)
	}
	return done
}

// newReader is the reader of a session's stream of target on conn.
func (s *Source) newReader(conn *pgrepl.Conn, target pgrepl.Target) *streamReader {
	reader := &streamReader{stream: pgrepl.NewStream(conn, pgrepl.NewDecoder(target)), batchSize: s.core.BatchSize, full: make(chan batch),
		maxBytes: s.core.MaxBatchBytes, statusInterval: s.cfg.StatusInterval, receiveLag: s.metrics.receiveLag}
	if len(s.core.Store.Tenants) > 0 {
		reader.tenants = map[string]bool{}
		for _, t := range s.core.Store.Tenants {
			reader.tenants[t] = true
		}
	}
	return reader
}

// session opens the replication connection, makes sure the publication and the slot exist,
// streams until ctx ends or the stream fails, and returns why it stopped.
func (s *Source) session(ctx context.Context) error {
	conn, err := pgrepl.Connect(ctx, s.cfg.DSN)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	// Runs last, once the stream's workers have stopped: a relay that streams again later (after
	// standing by, or reconnecting) opens exactly-once units afresh, since another relay may have
	// opened (fenced) them meanwhile.
	defer s.deliverer.Stop()
	target, err := pgrepl.ResolveTable(ctx, s.core.DB, s.core.Store.Table.Events())
	if err != nil {
		return err
	}
	pub, err := s.ensurePublication(ctx, target)
	if err != nil {
		return err
	}
	if err := s.ensureSlot(ctx, conn); err != nil {
		return err
	}
	if err := pgrepl.Start(ctx, conn, s.slot, pub); err != nil {
		if pgrepl.Code(err) == pgrepl.ObjectInUse {
			return errSlotBusy{err}
		}
		return err
	}
	s.used = true
	s.streaming.Store(true)
	s.metrics.streaming.Set(1)

	reader := s.newReader(conn, target)
	batches := make(chan batch)
	readCtx, stopReading := context.WithCancel(ctx)
	readErr := make(chan error, 1)
	go func() { readErr <- reader.run(readCtx, batches) }()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		stopReading()
		err := <-readErr
		// The reader is done with the connection: report the final position on it.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = reader.sendStatus(fctx)
		return err
	}
	defer func() { _ = stop() }()

	leases, err := s.awaitAllLeases(ctx, readErr)
	if err != nil {
		return err
	}
	s.core.Log.Info("cdc: streaming", "slot", s.slot, "partitions", len(leases), "relation", target.String(), "publication", pub)
	// The deliverer readies every lease before anything is read from the table or published;
	// otherwise the session ends (and is started again after HeartbeatInterval). With
	// exactly-once delivery, that opens every unit and finishes the cleanup of its last
	// transaction: a unit opened later, by whichever batch locks it first, would filter only that
	// batch by the cleanup's rows, and a stream part and a retry batch that read their rows
	// before that opening could both hold rows of the unit's last transaction.
	if _, err := s.deliverer.Ready(ctx, 0, leases); err != nil {
		return fmt.Errorf("cdc: ready the leases before streaming: %w", err)
	}
	if err := s.drainIfNeeded(ctx); err != nil {
		return err
	}
	return s.streamLoop(ctx, reader, batches, readErr)
}
