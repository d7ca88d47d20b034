// Package forwarder is outboxkit's relay: it claims committed events from the outbox table in
// batches, publishes them through any Watermill message.Publisher, and deletes (or marks) each row
// only after the broker acknowledged it. Failing events are retried with exponential backoff and
// jitter and finally dead-lettered; a failing event holds back only the later events of its own
// key. Several forwarders share the work through key-hash partition leases without breaking
// per-key order. See docs/forwarder.md for the design.
package forwarder

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// Metadata keys the forwarder adds to dead-lettered messages, beside Watermill's poison-queue
// keys (middleware.ReasonForPoisonedKey, middleware.PoisonedTopicKey).
const (
	MetadataAttempts       = "outbox_attempts"
	MetadataPayloadDropped = "outbox_payload_dropped_bytes"
)

// Forwarder relays events from one outbox table to a publisher. Create it with [New] and run it
// with [Forwarder.Run].
type Forwarder struct {
	cfg      Config
	store    *store
	inflight *inflight
	metrics  *metrics
	log      *slog.Logger
	// txp, units and installation serve ExactlyOnce delivery (transactional.go); txp is nil
	// otherwise. installation is the table's identity, read at start.
	txp          TransactionalPublisher
	units        txUnits
	installation string
	// share is how this relay shares the partitions with the others of its lease group.
	share sharePolicy
	cdc   *cdcState // nil unless Source is SourceCDC
}

// New validates config and returns a Forwarder. It touches neither the database nor the broker.
func New(config Config) (*Forwarder, error) {
	config.setDefaults()
	if err := config.Validate(); err != nil {
		return nil, err
	}
	table, err := outbox.NewTable(config.Dialect, config.Table)
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(config.Metrics, table.Events())
	if err != nil {
		return nil, fmt.Errorf("forwarder: %w", err)
	}
	var txp TransactionalPublisher
	units := 0
	if config.Delivery == ExactlyOnce {
		txp = config.Publisher.(TransactionalPublisher) // checked by Validate
		units = config.TransactionalUnits
	}
	f := &Forwarder{
		txp: txp,
		cfg: config,
		store: &store{table: table, dialect: config.Dialect, group: config.LeaseGroup, tenants: config.Tenants,
			idleTimeout: max(time.Second, config.LeaseTTL/2)},
		share:    sharePolicy{units: units},
		metrics:  m,
		inflight: newInflight(config.Workers),
		log:      config.Logger.With("component", "outboxkit.forwarder", "relay", config.RelayID, "table", table.Events()),
	}
	if config.Source == SourceCDC {
		if err := f.setupCDC(table); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// startAttempts bounds how often Run retries reaching the database before giving up.
const startAttempts = 5

// Run relays events until ctx is cancelled, then finishes the in-flight batches, releases its
// leases and returns nil. It returns an error if the database cannot be reached at start
// (after a few bounded retries, each logged).
func (f *Forwarder) Run(ctx context.Context) error {
	if err := f.start(ctx); err != nil {
		return err
	}
	if f.txp != nil {
		f.log.Info("forwarder started", "workers", f.cfg.Workers, "lease_group", f.cfg.LeaseGroup,
			"installation", f.installation, "transactional_id_prefix", f.cfg.TransactionalIDPrefix)
	} else {
		f.log.Info("forwarder started", "workers", f.cfg.Workers, "lease_group", f.cfg.LeaseGroup)
	}

	var wg sync.WaitGroup
	loops := []func(context.Context){f.heartbeatLoop, f.statsLoop}
	if f.cfg.Retention > 0 {
		loops = append(loops, f.pruneLoop)
	}
	wakes := make([]chan struct{}, f.cfg.Workers)
	for i := range wakes {
		wakes[i] = make(chan struct{}, 1)
	}
	if f.cfg.Wakeups != nil {
		loops = append(loops, func(ctx context.Context) { fanOut(ctx, f.cfg.Wakeups, wakes) })
	}
	// The heartbeat outlives the workers: a batch still in flight when ctx is cancelled must not
	// see its leases expire and be taken over (its acknowledgement would be refused, and the
	// new owner would publish it again).
	loopCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	for _, loop := range loops {
		wg.Go(func() { loop(loopCtx) })
	}
	var workers sync.WaitGroup
	if f.cdc != nil {
		workers.Go(func() { f.cdcLoop(ctx) })
	} else {
		for i := range f.cfg.Workers {
			workers.Go(func() { f.workerLoop(ctx, i, wakes[i]) })
		}
	}
	workers.Wait()
	stopLoops()
	wg.Wait()
	if f.txp != nil {
		f.closeAllUnits()
	}

	releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := f.store.releaseAll(releaseCtx, f.cfg.DB, f.cfg.RelayID); err != nil {
		f.log.Warn("could not release leases on shutdown; they expire on their own", "error", err)
	}
	f.log.Info("forwarder stopped")
	return nil
}

// start creates the group's lease rows and takes a first share of partitions, retrying a
// database that is not reachable yet a bounded number of times. On SQLite, while another relay
// runs on the database, it waits (logging why) until that relay stops or its heartbeat expires.
func (f *Forwarder) start(ctx context.Context) error {
	var err error
	wait := 500 * time.Millisecond
	for attempt := 1; attempt <= startAttempts; attempt++ {
		if err = f.store.ensureLeaseRows(ctx, f.cfg.DB); err == nil && f.txp != nil {
			err = f.resolveInstallation(ctx)
		}
		if err == nil {
			var owned int
			if owned, err = f.heartbeat(ctx); err == nil {
				f.metrics.ownedPartitions.Set(float64(owned))
				return nil
			}
			var other errOtherRelay
			if errors.As(err, &other) {
				f.log.Warn("waiting: another relay runs on this SQLite database (SQLite supports one relay per database)",
					"other_relay", other.other, "retry_in", f.cfg.HeartbeatInterval)
				if !sleep(ctx, f.cfg.HeartbeatInterval) {
					return fmt.Errorf("forwarder: start: %w while waiting for relay %q to stop", ctx.Err(), other.other)
				}
				attempt--
				continue
			}
		}
		if ctx.Err() != nil {
			return fmt.Errorf("forwarder: start: %w", ctx.Err())
		}
		f.log.Warn("database not ready, retrying", "attempt", attempt, "of", startAttempts, "error", err)
		if attempt < startAttempts && !sleep(ctx, wait) {
			return fmt.Errorf("forwarder: start: %w", ctx.Err())
		}
		wait *= 2
	}
	return fmt.Errorf("forwarder: start on table %s failed after %d attempts (did you run outbox.Migrate?): %w",
		f.store.table, startAttempts, err)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func fanOut(ctx context.Context, in <-chan struct{}, outs []chan struct{}) {
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-in:
			if !ok {
				return
			}
			for _, out := range outs {
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}
}

// heartbeat renews and rebalances the leases, never releasing a partition under this relay's
// own batch in flight.
func (f *Forwarder) heartbeat(ctx context.Context) (int, error) {
	var releasing []int
	rebalanced := false
	owned, err := f.store.heartbeat(ctx, f.cfg.DB, f.cfg.RelayID, f.cfg.LeaseTTL, f.share, func(surplus []int) []int {
		rebalanced = true
		releasing = f.inflight.rebalance(surplus)
		return releasing
	})
	if !rebalanced {
		f.inflight.rebalance(nil)
	}
	f.inflight.released(releasing)
	return owned, err
}

func (f *Forwarder) heartbeatLoop(ctx context.Context) {
	ticker := time.NewTicker(f.cfg.HeartbeatInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		owned, err := f.heartbeat(ctx)
		if err != nil {
			if ctx.Err() == nil {
				f.log.Warn("lease heartbeat failed", "error", err)
			}
			continue
		}
		f.metrics.ownedPartitions.Set(float64(owned))
	}
}

func (f *Forwarder) statsLoop(ctx context.Context) {
	for {
		stats, err := f.store.stats(ctx, f.cfg.DB)
		if err != nil && ctx.Err() == nil {
			f.log.Warn("reading outbox stats failed", "error", err)
		}
		f.metrics.pending.Reset()
		f.metrics.oldestAge.Reset()
		f.metrics.dead.Reset()
		for _, st := range stats {
			f.metrics.pending.WithLabelValues(st.tenant).Set(float64(st.pending))
			f.metrics.dead.WithLabelValues(st.tenant).Set(float64(st.dead))
			if !st.oldest.IsZero() {
				f.metrics.oldestAge.WithLabelValues(st.tenant).Set(time.Since(st.oldest).Seconds())
			}
		}
		if !sleep(ctx, f.cfg.StatsInterval) {
			return
		}
	}
}

// pruneBatch bounds each retention DELETE so pruning never holds long locks.
const pruneBatch = 1000

func (f *Forwarder) pruneLoop(ctx context.Context) {
	for {
		cutoff := time.Now().Add(-f.cfg.Retention)
		for {
			n, err := f.store.prune(ctx, f.cfg.DB, cutoff, pruneBatch)
			if err != nil {
				if ctx.Err() == nil {
					f.log.Warn("pruning published rows failed", "error", err)
				}
				break
			}
			if n < pruneBatch {
				break
			}
		}
		if !sleep(ctx, f.cfg.PruneInterval) {
			return
		}
	}
}

// workerLoop claims and relays batches, polling adaptively: at once after a full batch;
// MinPollInterval after a partial one, ignoring wake-ups meanwhile so that a steady trickle of
// commits is relayed in batches rather than one claim per commit; and, while idle, backing off
// to MaxPollInterval unless a wake-up comes first.
func (f *Forwarder) workerLoop(ctx context.Context, worker int, wake <-chan struct{}) {
	interval := f.cfg.MinPollInterval
	for ctx.Err() == nil {
		n, err := f.relayBatch(ctx, worker)
		wakeable := false
		switch {
		case err != nil:
			if ctx.Err() == nil {
				f.log.Warn("relaying a batch failed; its rows stay pending", "worker", worker, "error", err)
			}
			interval = min(max(interval*2, 100*time.Millisecond), f.cfg.MaxPollInterval)
		case n >= f.cfg.BatchSize:
			interval = f.cfg.MinPollInterval
			continue
		case n > 0:
			interval = f.cfg.MinPollInterval
		default:
			interval = min(interval*2, f.cfg.MaxPollInterval)
			wakeable = true
		}
		timer := time.NewTimer(interval)
		if wakeable {
			select {
			case <-ctx.Done():
			case <-wake:
			case <-timer.C:
			}
		} else {
			select {
			case <-ctx.Done():
			case <-timer.C:
			}
		}
		timer.Stop()
	}
}

// ackTimeout bounds the acknowledgement transaction of one batch.
const ackTimeout = 30 * time.Second

// relayBatch runs one claim-publish-acknowledge cycle for the worker's partitions and returns the
// number of rows claimed. No database transaction is open while the broker is called: the
// leases and rows are read without locks, and the acknowledgement is one short transaction
// fenced by the lease epochs (see lease.go), which drops the acknowledgements of partitions
// this relay lost meanwhile. A batch that has begun is finished even after Run's context is
// cancelled, so shutdown leaves nothing half done; its publish is bounded by LeaseTTL, after
// which another relay may own the rows anyway.
func (f *Forwarder) relayBatch(ctx context.Context, worker int) (int, error) {
	if ctx.Err() != nil {
		return 0, nil
	}
	db := f.cfg.DB
	f.inflight.read(worker)
	leases, err := f.store.liveLeases(ctx, db, f.cfg.RelayID, worker, f.cfg.Workers)
	leases = f.inflight.hold(worker, leases)
	defer f.inflight.end(leases)
	if err != nil || len(leases) == 0 {
		return 0, err
	}
	if f.txp != nil {
		// Units are opened (and their last checkpoint cleaned up) as soon as they are leased,
		// before anything is claimed: a takeover finishes the cleanup first, and no batch waits
		// for a producer to be initialized.
		_ = f.openLeasedUnits(ctx, worker, leases) // logged; the unit's batch opens it again
	}
	partitions := make([]int, 0, len(leases))
	for _, l := range leases {
		partitions = append(partitions, l.partition)
	}
	if f.txp != nil {
		// Only the partitions of units leased whole can be published: the rows of a unit
		// leased in part wait until the heartbeat has settled its owner.
		partitions = partitions[:0]
		for _, ls := range f.wholeUnitLeases(leases) {
			for _, l := range ls {
				partitions = append(partitions, l.partition)
			}
		}
		if len(partitions) == 0 {
			return 0, nil
		}
	}
	records, err := f.store.claim(ctx, db, partitions, f.cfg.BatchSize, f.cfg.MaxBatchBytes)
	if err != nil || len(records) == 0 {
		return 0, err
	}
	f.metrics.batchSize.Observe(float64(len(records)))
	if f.txp != nil {
		_, err = f.deliverTransactional(ctx, worker, leases, records)
	} else {
		_, err = f.deliver(ctx, worker, leases, records)
	}
	return len(records), err
}

// deliver publishes claimed records of the given leases, settles the failures (retry, park or
// dead-letter) and acknowledges the outcome in one short transaction fenced by the leases'
// epochs, and returns it. Every source of records (the polling claim, the CDC stream) ends here.
func (f *Forwarder) deliver(ctx context.Context, worker int, leases []lease, records []record) (outcome, error) {
	publishCtx, cancelPublish := context.WithTimeout(context.WithoutCancel(ctx), f.cfg.LeaseTTL)
	started := time.Now()
	acked, failed := f.publish(publishCtx, records)
	f.metrics.publishSeconds.Observe(time.Since(started).Seconds())
	settled := make([]settlement, len(failed))
	for i, fl := range failed {
		settled[i] = f.settle(publishCtx, fl.record, fl.err)
	}
	cancelPublish()

	o, _, err := f.acknowledge(ctx, worker, leases, acked, settled)
	return o, err
}
