package forwarder

import (
	"context"
	"sync"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// source feeds the pipeline with records of the leased partitions until ctx ends: the polling
// claim (pollingSource) or a PostgreSQL logical replication slot (cdcSource, cdc.go). New picks
// it from Config.Source.
type source interface {
	// start prepares the source before the first lease is taken.
	start(ctx context.Context) error
	run(ctx context.Context)
}

// newSource returns the source of the configured Config.Source.
func newSource(f *Forwarder, table outbox.Table) (source, error) {
	f.ackInOneStatement = f.store.SQL().AcksInOneStatement()
	if f.cfg.Source == SourceCDC {
		if err := f.setupCDC(table); err != nil {
			return nil, err
		}
		return cdcSource{f}, nil
	}
	return pollingSource{f}, nil
}

// cdcSource streams the table's inserts from a replication slot (cdc*.go).
type cdcSource struct{ f *Forwarder }

func (s cdcSource) run(ctx context.Context) { s.f.cdcLoop(ctx) }

// pollingSource runs Workers claim loops, each over its own share of the leased partitions,
// woken by Config.Wakeups.
type pollingSource struct{ f *Forwarder }

func (pollingSource) start(context.Context) error { return nil }

func (s pollingSource) run(ctx context.Context) {
	f := s.f
	wakes := make([]chan struct{}, f.cfg.Workers)
	for i := range wakes {
		wakes[i] = make(chan struct{}, 1)
	}
	var workers sync.WaitGroup
	if f.cfg.Wakeups != nil {
		workers.Go(func() { fanOut(ctx, f.cfg.Wakeups, wakes) }) // ends with ctx, as the workers do
	}
	workers.Go(func() { fanOut(ctx, f.leasesTaken, wakes) })
	for i := range f.cfg.Workers {
		workers.Go(func() { f.workerLoop(ctx, i, wakes[i]) })
	}
	workers.Wait()
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
	f.inflight.Read(worker)
	leases, err := f.store.LiveLeases(ctx, db, f.cfg.RelayID, worker, f.cfg.Workers)
	leases = f.inflight.Hold(worker, leases)
	defer f.inflight.End(leases)
	if err != nil || len(leases) == 0 {
		return 0, err
	}
	// The pipeline readies the leases before anything is claimed (exactly-once opens their units,
	// so a takeover finishes the cleanup first and no batch waits for a producer) and says whose
	// rows may be published now; its failures are logged, and the next batch tries again.
	ready, _ := f.pipeline.ready(ctx, worker, leases)
	if len(ready) == 0 {
		return 0, nil
	}
	partitions := make([]int, 0, len(ready))
	for _, l := range ready {
		partitions = append(partitions, l.Partition)
	}
	limit, maxBytes := f.pipeline.claimLimits(ready)
	records, err := f.store.Claim(ctx, db, partitions, limit, maxBytes)
	if err != nil || len(records) == 0 {
		return 0, err
	}
	records = f.pipeline.trimClaim(records)
	f.metrics.BatchSize.Observe(float64(len(records)))
	token := f.progress.begin()
	o, err := f.pipeline.deliver(ctx, worker, leases, records)
	f.delivered(token, o, err)
	return len(records), err
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
