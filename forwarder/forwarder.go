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

	"github.com/outboxkit/outboxkit/forwarder/internal/ack"
	"github.com/outboxkit/outboxkit/forwarder/internal/deadletter"
	"github.com/outboxkit/outboxkit/forwarder/internal/lease"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/forwarder/internal/walslot"
	"github.com/outboxkit/outboxkit/outbox"
)

// Metadata keys the forwarder adds to dead-lettered messages, beside Watermill's poison-queue
// keys (middleware.ReasonForPoisonedKey, middleware.PoisonedTopicKey).
const (
	MetadataAttempts       = deadletter.MetadataAttempts
	MetadataPayloadDropped = deadletter.MetadataPayloadDropped
)

// Forwarder relays events from one outbox table to a publisher. Create it with [New] and run it
// with [Forwarder.Run].
type Forwarder struct {
	cfg Config
	// core is the value the pieces are built from (New).
	core  relay.Core
	store *relay.Store
	// publisher is Config.Publisher with an outcome per message (OutcomePublisherOf).
	publisher OutcomePublisher
	inflight  *relay.Inflight
	metrics   *relay.Metrics
	log       *slog.Logger
	// source feeds deliverer, chosen by New from Config.Source and Config.Delivery.
	source    relay.Source
	deliverer deliverer
	// acker is the one acknowledger (internal/ack).
	acker *ack.Acknowledger
	// leasesTaken tells the polling workers that partitions were taken between heartbeats of
	// their own: an idle worker polls them at once instead of at the end of its backoff.
	leasesTaken chan struct{}
	// leases keeps the leases: heartbeats, rebalancing, quick steps (internal/lease).
	leases *lease.Keeper
	// retry decides the fate of a failed attempt on every path.
	retry relay.RetryPolicy
	// progress says when publishing makes no progress (progress.go).
	progress *relay.Progress
	// stopRun ends Run; set by Run before the workers start. halted is the error halt stopped
	// it with; halting lets one halt through, and none once Run has stopped its source.
	stopRun context.CancelFunc
	halting sync.Once
	halted  error
}

// New validates config and returns a Forwarder. It touches neither the database nor the broker.
func New(config Config) (*Forwarder, error) {
	unitsConfigured := config.TransactionalUnits != 0
	config.setDefaults()
	if err := config.Validate(); err != nil {
		return nil, err
	}
	table, err := outbox.NewTable(config.Dialect, config.Table)
	if err != nil {
		return nil, err
	}
	m, err := relay.NewMetrics(config.Metrics, table.Events())
	if err != nil {
		return nil, fmt.Errorf("forwarder: %w", err)
	}
	f := &Forwarder{
		cfg: config,
		store: &relay.Store{Table: table, Dialect: config.Dialect, Group: config.LeaseGroup, Tenants: config.Tenants,
			IdleTimeout: max(time.Second, config.LeaseTTL/2),
			Plans:       relay.Replanner{MinRows: min(relay.LargeBatch, config.BatchSize), MinBytes: config.MaxBatchBytes / 2}},
		metrics:     m,
		inflight:    relay.NewInflight(config.Workers),
		leasesTaken: make(chan struct{}, 1),
		log:         config.Logger.With("component", "outboxkit.forwarder", "relay", config.RelayID, "table", table.Events()),
	}
	f.retry = retryPolicyOf(config)
	f.progress = relay.NewProgress(f.metrics, f.log, config.PublishStallAfter)
	f.core = relay.Core{DB: config.DB, RelayID: config.RelayID, Workers: config.Workers, BatchSize: config.BatchSize,
		MaxBatchBytes: config.MaxBatchBytes, LeaseTTL: config.LeaseTTL, Retention: config.Retention,
		DeadLetterTopic: config.DeadLetterTopic, Store: f.store, Inflight: f.inflight, Metrics: f.metrics, Log: f.log,
		Progress: f.progress, Retry: f.retry}
	f.acker = ack.New(f.core)
	f.publisher = OutcomePublisherOf(config.Publisher, config.IsRetriable, f.log)
	// The wiring: the only place (beside validation) that reads Delivery and Source.
	f.deliverer = newDeliverer(f, unitsConfigured)
	if f.source, err = newSource(f); err != nil {
		return nil, err
	}
	f.leases = lease.New(f.core, sharePolicy(f, config.TransactionalUnits), config.HeartbeatInterval, config.MinPollInterval, f.leasesTaken)
	return f, nil
}

// startAttempts bounds how often Run retries reaching the database before giving up.
const startAttempts = 5

// Run relays events until ctx is cancelled, then finishes the in-flight batches, releases its
// leases and returns nil, also when ctx is cancelled while it starts. It returns an error if the
// database cannot be reached at start (after a few bounded retries, each logged, or when ctx
// ends while it waits for the database). With ExactlyOnce it returns ErrUnitCountMismatch, at
// start or, after finishing its in-flight batches and releasing its leases, once the lease
// group's unit count is no longer the relay's (see docs/exactly-once.md).
func (f *Forwarder) Run(ctx context.Context) error {
	held, err := f.start(ctx)
	if errors.Is(err, errStoppedWhileStarting) {
		// Stopped as asked: not a failure. The start may have taken leases.
		f.releaseLeases(ctx)
		return nil
	}
	if err != nil {
		return err
	}
	f.log.Info("forwarder started", append([]any{"workers", f.cfg.Workers, "lease_group", f.cfg.LeaseGroup,
		"source", f.cfg.Source}, f.deliverer.LogAttrs()...)...)

	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	f.stopRun = stopRun
	var wg sync.WaitGroup
	heartbeats := func(ctx context.Context) { f.leases.Loop(ctx, held) }
	loops := []func(context.Context){heartbeats, f.statsLoop, f.progress.Loop}
	if f.cfg.Retention > 0 {
		loops = append(loops, f.pruneLoop)
	}
	// The heartbeat outlives the workers: a batch still in flight when ctx is cancelled must not
	// see its leases expire and be taken over (its acknowledgement would be refused, and the
	// new owner would publish it again).
	loopCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	for _, loop := range loops {
		wg.Go(func() { loop(loopCtx) })
	}
	f.source.Run(runCtx)
	f.halting.Do(func() {}) // a later halt does nothing; an earlier one's halted is visible
	stopLoops()
	wg.Wait()
	f.deliverer.Stop()

	f.releaseLeases(ctx)
	f.log.Info("forwarder stopped")
	if f.halted != nil {
		return fmt.Errorf("forwarder: stopped on table %s: %w", f.store.Table, f.halted)
	}
	return nil
}

// halt ends Run on an error that waiting cannot mend, logging it once; before Run starts its
// workers, and after it has stopped them, it does nothing (the caller returns the error).
func (f *Forwarder) halt(err error) {
	if f.stopRun == nil {
		return
	}
	f.halting.Do(func() {
		f.halted = err
		f.log.Error("stopping the relay: its settings no longer match its lease group", "error", err)
		f.stopRun()
	})
}

// releaseLeases gives up every lease of the relay on shutdown, so that the other relays take its
// partitions at once instead of after LeaseTTL.
func (f *Forwarder) releaseLeases(ctx context.Context) {
	releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := f.store.ReleaseAll(releaseCtx, f.cfg.DB, f.cfg.RelayID); err != nil {
		f.log.Warn("could not release leases on shutdown; they expire on their own", "error", err)
	}
}

// errStoppedWhileStarting is start's error when ctx ended before the start finished and nothing
// else failed (Run returns nil for it). When ctx ends while the start waits for an unreachable
// database, the error is the database's.
var errStoppedWhileStarting = errors.New("forwarder: stopped while starting")

// start creates the group's lease rows and takes a first share of partitions, retrying a
// database that is not reachable yet a bounded number of times. On SQLite, while another relay
// runs on the database, it waits (logging why) until that relay stops or its heartbeat expires.
func (f *Forwarder) start(ctx context.Context) (relay.Holding, error) {
	// notReady is the last error of an attempt that failed on its own, not because ctx ended
	// during it: once the database has failed, a stop is reported as that failure.
	var err, notReady error
	wait := 500 * time.Millisecond
	for attempt := 1; attempt <= startAttempts; attempt++ {
		if err = f.store.EnsureLeaseRows(ctx, f.cfg.DB); err == nil {
			err = f.deliverer.Start(ctx)
		}
		if err == nil {
			err = f.source.Start(ctx)
		}
		if errors.Is(err, outbox.ErrNoInstallation) || errors.Is(err, outbox.ErrInstallationBinding) || errors.Is(err, ErrUnitCountMismatch) ||
			errors.Is(err, outbox.ErrWALSlotLost) || errors.Is(err, walslot.ErrOtherSlotRegistered) {
			return relay.Holding{}, fmt.Errorf("forwarder: start on table %s: %w", f.store.Table, err) // waiting cannot help
		}
		if isMissingTable(err) {
			return relay.Holding{}, fmt.Errorf("forwarder: start on table %s: %w: %w", f.store.Table, ErrNotMigrated, err) // waiting cannot help
		}
		if err == nil {
			var held relay.Holding
			if held, err = f.leases.Heartbeat(ctx); err == nil {
				f.metrics.OwnedPartitions.Set(float64(held.Owned))
				return held, nil
			}
			var other relay.ErrOtherRelay
			if errors.As(err, &other) {
				f.log.Warn("waiting: another relay runs on this SQLite database (SQLite supports one relay per database)",
					"other_relay", other.Other, "retry_in", f.cfg.HeartbeatInterval)
				if !relay.Sleep(ctx, f.cfg.HeartbeatInterval) {
					return relay.Holding{}, fmt.Errorf("%w (%w) while waiting for relay %q to stop", errStoppedWhileStarting, ctx.Err(), other.Other)
				}
				attempt--
				continue
			}
		}
		stoppedInAttempt := errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
		if ctx.Err() != nil && stoppedInAttempt && notReady == nil {
			return relay.Holding{}, fmt.Errorf("%w: %w", errStoppedWhileStarting, err)
		}
		if !stoppedInAttempt || notReady == nil {
			notReady = err
		}
		if ctx.Err() != nil {
			return relay.Holding{}, fmt.Errorf("forwarder: start: %w; the database was not ready: %w", ctx.Err(), notReady)
		}
		f.log.Warn("database not ready, retrying", "attempt", attempt, "of", startAttempts, "error", err)
		if attempt < startAttempts && !relay.Sleep(ctx, wait) {
			return relay.Holding{}, fmt.Errorf("forwarder: start: %w; the database was not ready: %w", ctx.Err(), notReady)
		}
		wait *= 2
	}
	return relay.Holding{}, fmt.Errorf("forwarder: start on table %s failed after %d attempts (did you run outbox.Migrate?): %w",
		f.store.Table, startAttempts, err)
}

func (f *Forwarder) statsLoop(ctx context.Context) {
	for {
		stats, err := f.store.Stats(ctx, f.cfg.DB)
		if err != nil && ctx.Err() == nil {
			f.log.Warn("reading outbox stats failed", "error", err)
		}
		f.metrics.Pending.Reset()
		f.metrics.OldestAge.Reset()
		f.metrics.Dead.Reset()
		// The tenants this relay serves ("" when all) always have their series, at 0 when
		// nothing waits: "nothing waits" is not "no data".
		tenants := f.cfg.Tenants
		if len(tenants) == 0 {
			tenants = []string{""}
		}
		for _, tenant := range tenants {
			f.metrics.Pending.WithLabelValues(tenant).Set(0)
			f.metrics.Dead.WithLabelValues(tenant).Set(0)
			f.metrics.OldestAge.WithLabelValues(tenant).Set(0)
		}
		for _, st := range stats {
			f.metrics.Pending.WithLabelValues(st.Tenant).Set(float64(st.Pending))
			f.metrics.Dead.WithLabelValues(st.Tenant).Set(float64(st.Dead))
			if !st.Oldest.IsZero() {
				f.metrics.OldestAge.WithLabelValues(st.Tenant).Set(time.Since(st.Oldest).Seconds())
			}
		}
		f.updateBlockedGauges(ctx)
		if !relay.Sleep(ctx, f.cfg.StatsInterval) {
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
			n, err := f.store.Prune(ctx, f.cfg.DB, cutoff, pruneBatch)
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
		if !relay.Sleep(ctx, f.cfg.PruneInterval) {
			return
		}
	}
}
