package forwarder

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/pgrepl"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// The cdc source (docs/cdc.md). One logical replication slot per lease group streams the
// table's inserts in commit order. Only one relay can stream a slot at a time (PostgreSQL
// refuses a second walsender), and that relay takes every partition of the group (the others
// hold none and stand by), so the lease epochs fence its acknowledgements as with polling and
// no key is ever published by two relays at once. The stream hands batches to deliver, the
// same publish, settle and fenced acknowledgement as the polling source; the slot position is
// confirmed only once everything before it is acknowledged or left to the retry path.

// cdcState is a forwarder's cdc source.
type cdcState struct {
	table outbox.Table
	// slot and publication are named at start, from the table's installation (cdcSource.start).
	slot, publication string
	vecs              *cdcMetricVecs
	metrics           *cdcMetrics // vecs' metrics of the slot, from start on
	streaming         atomic.Bool
	// lastDelivered is when the stream last delivered rows of the table (Unix nanoseconds; the
	// stream's start counts): the stall check's clock (cdc_stall.go).
	lastDelivered atomic.Int64
	// partsInFlight counts the stream's parts being published: while there are some, the relay
	// is busy with delivered rows (a slow broker is not a silent stream).
	partsInFlight atomic.Int32
	// used says the slot existed while this relay ran: finding it missing later means lost.
	used bool
}

func (f *Forwarder) setupCDC(table outbox.Table) error {
	v, err := newCDCMetrics(f.cfg.Metrics, table.Events())
	if err != nil {
		return fmt.Errorf("forwarder: %w", err)
	}
	f.cdc = &cdcState{table: table, vecs: v}
	return nil
}

// errSlotBusy: another walsender streams the slot.
type errSlotBusy struct{ err error }

func (e errSlotBusy) Error() string { return e.err.Error() }

// cdcLoop streams the slot while this relay can, standing by (and retrying every heartbeat)
// while another relay streams it, until ctx ends.
func (f *Forwarder) cdcLoop(ctx context.Context) {
	standingBy := false
	for ctx.Err() == nil {
		err := f.cdcSession(ctx)
		f.cdc.streaming.Store(false)
		f.cdc.metrics.streaming.Set(0)
		if ctx.Err() != nil {
			return
		}
		var busy errSlotBusy
		if !errors.As(err, &busy) {
			standingBy = false
			f.log.Warn("cdc: the stream stopped; reconnecting", "slot", f.cdc.slot, "error", err, "in", f.cfg.HeartbeatInterval)
			relay.Sleep(ctx, f.cfg.HeartbeatInterval)
			continue
		}
		if !standingBy {
			f.log.Info("cdc: another relay streams the slot; standing by", "slot", f.cdc.slot)
			standingBy = true
		}
		if f.takeOverStalled(ctx) {
			continue
		}
		relay.Sleep(ctx, f.cfg.HeartbeatInterval)
	}
}

// takeOverStalled terminates the walsender of the slot when no other relay holds a live lease
// of the group: its relay died or stalled (a paused process keeps its walsender until the
// server's wal_sender_timeout), and its leases have expired, so it can no longer acknowledge.
func (f *Forwarder) takeOverStalled(ctx context.Context) bool {
	others, err := f.store.OtherLiveOwners(ctx, f.cfg.DB, f.cfg.RelayID)
	if err != nil || others > 0 {
		return false
	}
	done, err := pgrepl.TerminateWalsender(ctx, f.cfg.DB, f.cdc.slot)
	if err != nil {
		f.log.Warn("cdc: cannot terminate the walsender of a relay without live leases", "slot", f.cdc.slot, "error", err)
		return false
	}
	if done {
		f.cdc.metrics.takeovers.Inc()
		f.log.Warn("cdc: terminated the walsender of a relay whose leases expired, taking the slot over", "slot", f.cdc.slot)
	}
	return done
}

// newCDCReader is the reader of a session's stream of target on conn.
func (f *Forwarder) newCDCReader(conn *pgrepl.Conn, target pgrepl.Target) *cdcReader {
	reader := &cdcReader{stream: pgrepl.NewStream(conn, pgrepl.NewDecoder(target)), batchSize: f.cfg.BatchSize, full: make(chan cdcBatch),
		maxBytes: f.cfg.MaxBatchBytes, statusInterval: f.cfg.CDC.StatusInterval, receiveLag: f.cdc.metrics.receiveLag}
	if len(f.cfg.Tenants) > 0 {
		reader.tenants = map[string]bool{}
		for _, t := range f.cfg.Tenants {
			reader.tenants[t] = true
		}
	}
	return reader
}

// cdcSession opens the replication connection, makes sure the publication and the slot exist,
// streams until ctx ends or the stream fails, and returns why it stopped.
func (f *Forwarder) cdcSession(ctx context.Context) error {
	conn, err := pgrepl.Connect(ctx, f.cfg.CDC.DSN)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	// Runs last, once the stream's workers have stopped: a relay that streams again later (after
	// standing by, or reconnecting) opens exactly-once units afresh, since another relay may have
	// opened (fenced) them meanwhile.
	defer f.pipeline.Stop()
	target, err := pgrepl.ResolveTable(ctx, f.cfg.DB, f.cdc.table.Events())
	if err != nil {
		return err
	}
	pub, err := f.ensurePublication(ctx, target)
	if err != nil {
		return err
	}
	if err := f.ensureSlot(ctx, conn); err != nil {
		return err
	}
	if err := pgrepl.Start(ctx, conn, f.cdc.slot, pub); err != nil {
		if pgrepl.Code(err) == pgrepl.ObjectInUse {
			return errSlotBusy{err}
		}
		return err
	}
	f.cdc.used = true
	f.cdc.streaming.Store(true)
	f.cdc.metrics.streaming.Set(1)

	reader := f.newCDCReader(conn, target)
	batches := make(chan cdcBatch)
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

	leases, err := f.awaitAllLeases(ctx, readErr)
	if err != nil {
		return err
	}
	f.log.Info("cdc: streaming", "slot", f.cdc.slot, "partitions", len(leases), "relation", target.String(), "publication", pub)
	// The pipeline readies every lease before anything is read from the table or published;
	// otherwise the session ends (and is started again after HeartbeatInterval). With
	// exactly-once delivery, that opens every unit and finishes the cleanup of its last
	// transaction: a unit opened later, by whichever batch locks it first, would filter only that
	// batch by the cleanup's rows, and a stream part and a retry batch that read their rows
	// before that opening could both hold rows of the unit's last transaction.
	if _, err := f.pipeline.Ready(ctx, 0, leases); err != nil {
		return fmt.Errorf("cdc: ready the leases before streaming: %w", err)
	}
	if err := f.drainIfNeeded(ctx); err != nil {
		return err
	}
	return f.streamLoop(ctx, reader, batches, readErr)
}
