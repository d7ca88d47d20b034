// Package polling is the polling source: Workers claim loops, each over its own share of the
// leased partitions (p % Workers == worker), claiming pending rows from the table and handing
// them to the deliverer, woken by database notifications and by partitions newly taken.
package polling

import (
	"context"
	"sync"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

// Config is the polling source's own settings.
type Config struct {
	// MinPollInterval and MaxPollInterval bound the adaptive polling.
	MinPollInterval, MaxPollInterval time.Duration
	// Wakeups (may be nil) and LeasesTaken wake the idle workers.
	Wakeups, LeasesTaken <-chan struct{}
	// Claims sizes and cuts the workers' claims for the deliverer (required): Batches for a
	// deliverer that takes any claim whole, the exactly-once deliverer its own.
	Claims Shaper
}

// Shaper is how a worker's claim is sized and cut for the deliverer.
type Shaper interface {
	// ClaimLimits returns the rows and payload bytes a worker claims at once for the ready
	// leases.
	ClaimLimits(ready []relay.Lease) (int, int64)
	// TrimClaim returns what of a claim (in sequence order) one delivery takes: a
	// sequence-order prefix of each partition's rows, the rest staying pending.
	TrimClaim(records []relay.Record) []relay.Record
}

// Batches claims up to Rows rows and Bytes bytes of payload and delivers the claim whole: the
// Shaper of at-least-once delivery (Config.BatchSize, Config.MaxBatchBytes).
type Batches struct {
	Rows  int
	Bytes int64
}

// ClaimLimits is Rows and Bytes, whatever the leases.
func (b Batches) ClaimLimits([]relay.Lease) (int, int64) { return b.Rows, b.Bytes }

// TrimClaim takes the whole claim.
func (Batches) TrimClaim(records []relay.Record) []relay.Record { return records }

// Source is the polling source.
type Source struct {
	core relay.Core
	// store is core.Store, as the source reads it.
	store   relay.Claimer
	deliver relay.Deliverer
	cfg     Config
	// releaseWarn keeps a release that fails at every batch (a table not migrated yet) to one
	// warning a minute.
	releaseWarn relay.EveryMinute
	// outageWarn keeps the warning of full batches with events waiting for an outage to one a
	// minute.
	outageWarn relay.EveryMinute
	// dueIn is, per worker, how long until the next scheduled event of its partitions is due
	// after a claim that found nothing (0: none scheduled); only the worker's goroutine uses
	// its slot.
	dueIn []time.Duration
	// delivered is, per worker, whether its last batch acknowledged or settled any record.
	delivered []bool
}

// New returns the polling source over core, handing its claims to d.
func New(core relay.Core, d relay.Deliverer, cfg Config) *Source {
	return &Source{core: core, store: core.Store, deliver: d, cfg: cfg, dueIn: make([]time.Duration, core.Workers),
		delivered: make([]bool, core.Workers)}
}

// Start does nothing: the polling source needs nothing before the first lease.
func (*Source) Start(context.Context) error { return nil }

// Run runs the workers until ctx ends.
func (s *Source) Run(ctx context.Context) {
	wakes := make([]chan struct{}, s.core.Workers)
	for i := range wakes {
		wakes[i] = make(chan struct{}, 1)
	}
	var workers sync.WaitGroup
	if s.cfg.Wakeups != nil {
		workers.Go(func() { fanOut(ctx, s.cfg.Wakeups, wakes) }) // ends with ctx, as the workers do
	}
	if s.cfg.LeasesTaken != nil {
		workers.Go(func() { fanOut(ctx, s.cfg.LeasesTaken, wakes) })
	}
	for i := range s.core.Workers {
		workers.Go(func() { s.workerLoop(ctx, i, wakes[i]) })
	}
	workers.Wait()
}

// workerLoop claims and relays batches, polling adaptively: at once after a full batch;
// MinPollInterval after a partial one, ignoring wake-ups meanwhile so that a steady trickle of
// commits is relayed in batches rather than one claim per commit; and, while idle, backing off
// to MaxPollInterval unless a wake-up comes first.
func (s *Source) workerLoop(ctx context.Context, worker int, wake <-chan struct{}) {
	interval := s.cfg.MinPollInterval
	for ctx.Err() == nil {
		n, err := s.relayBatch(ctx, worker)
		wakeable := false
		switch {
		case err != nil && n >= s.core.BatchSize && s.delivered[worker] && relay.OnlyNotTried(err):
			// A full batch that delivered other keys and whose only failure is events not
			// tried for an outage (a schema registry not answering: no attempt counted): more
			// may wait, so the worker goes on at once instead of backing off; the outage's
			// events are tried again with the next batch, once per batch. A batch of nothing
			// but such events backs off below, sparing what is down.
			if ctx.Err() == nil && s.outageWarn.Allow() {
				s.core.Log.Warn("events wait for an outage; the other keys of the worker keep flowing", "worker", worker, "error", err)
			}
			interval = s.cfg.MinPollInterval
			continue
		case err != nil:
			if ctx.Err() == nil {
				s.core.Log.Warn("relaying a batch failed; its rows stay pending", "worker", worker, "error", err)
			}
			interval = min(max(interval*2, 100*time.Millisecond), s.cfg.MaxPollInterval)
		case n >= s.core.BatchSize:
			interval = s.cfg.MinPollInterval
			continue
		case n > 0:
			interval = s.cfg.MinPollInterval
		default:
			interval = min(interval*2, s.cfg.MaxPollInterval)
			wakeable = true
		}
		sleep := interval
		if due := s.dueIn[worker]; wakeable && due > 0 {
			// Idle, with a scheduled event coming due: poll when it is due, not a backoff later.
			sleep = min(sleep, max(due, s.cfg.MinPollInterval))
		}
		timer := time.NewTimer(sleep)
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

// relayBatch runs one claim-publish-acknowledge cycle for the worker's partitions and returns the
// number of rows claimed. No database transaction is open while the broker is called: the
// leases and rows are read without locks, and the acknowledgement is one short transaction
// fenced by the lease epochs (see lease.go), which drops the acknowledgements of partitions
// this relay lost meanwhile. A batch that has begun is finished even after Run's context is
// cancelled, so shutdown leaves nothing half done; its publish is bounded by LeaseTTL, after
// which another relay may own the rows anyway.
func (s *Source) relayBatch(ctx context.Context, worker int) (int, error) {
	if ctx.Err() != nil {
		return 0, nil
	}
	db := s.core.DB
	s.dueIn[worker] = 0
	s.delivered[worker] = false
	s.core.Inflight.Read(worker)
	leases, err := s.store.LiveLeases(ctx, db, s.core.RelayID, worker, s.core.Workers)
	leases = s.core.Inflight.Hold(worker, leases)
	defer s.core.Inflight.End(leases)
	if err != nil || len(leases) == 0 {
		return 0, err
	}
	// The deliverer readies the leases before anything is claimed (exactly-once opens their units,
	// so a takeover finishes the cleanup first and no batch waits for a producer) and says whose
	// rows may be published now; its failures are logged, and the next batch tries again.
	ready, _ := s.deliver.Ready(ctx, worker, leases)
	if len(ready) == 0 {
		return 0, nil
	}
	partitions := make([]int, 0, len(ready))
	for _, l := range ready {
		partitions = append(partitions, l.Partition)
	}
	limit, maxBytes := s.cfg.Claims.ClaimLimits(ready)
	// Due scheduled events join the pending rows first; a failed release holds back only them.
	if err := s.store.ReleaseDue(ctx, db, partitions, limit); err != nil && ctx.Err() == nil && s.releaseWarn.Allow() {
		s.core.Log.Warn("releasing due scheduled events failed; they stay scheduled, the other events flow (run outboxkit migrate if the table has no deliver_at column)",
			"worker", worker, "error", err)
	}
	records, err := s.store.Claim(ctx, db, partitions, limit, maxBytes)
	if err == nil && len(records) == 0 {
		s.dueIn[worker] = s.nextDue(ctx, partitions)
	}
	if err != nil || len(records) == 0 {
		return 0, err
	}
	records = s.cfg.Claims.TrimClaim(records)
	s.core.Metrics.BatchSize.Observe(float64(len(records)))
	token := s.core.Progress.Begin()
	o, err := s.deliver.Deliver(ctx, worker, leases, records)
	s.delivered[worker] = len(o.Acked) > 0 || len(o.Settled) > 0
	s.core.Progress.Delivered(token, o, err)
	return len(records), err
}

// nextDue is how long until the next scheduled event of the partitions is due: at least 1ns
// when one is (due already: as soon as possible), 0 when none is or it cannot be read (the
// backoff then applies as usual).
func (s *Source) nextDue(ctx context.Context, partitions []int) time.Duration {
	due, ok, err := s.store.NextDue(ctx, s.core.DB, partitions, s.cfg.MaxPollInterval)
	if err != nil || !ok {
		return 0
	}
	return max(due, time.Nanosecond)
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
