package cdc

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/pgrepl"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

// streamScheduler is the delivering side of one stream session (pipeline.go): it hands the
// stream's batches, split by worker, to Workers goroutines as parts, confirms the slot position
// of the batches whose parts are all done, in order, and keeps a reading of the leases for the
// parts. Its state belongs to the goroutine running streamLoop; the workers only receive parts
// on their queues and report on done.
type streamScheduler struct {
	schedulerDeps
	reader *streamReader
	full   <-chan batch // the reader's full batches (streamReader.full)
	queues []chan part
	done   chan partDone // each worker has at most one part
	exited chan struct{}
	stop   context.CancelFunc // ends the workers' context

	pending   []*pendingBatch // consecutive numbers from pending[0].number
	next      uint64
	confirmed pgrepl.LSN
	firstErr  error
	reading   atomic.Pointer[leaseReading]
	busy      []bool
	inFlight  int
	stopping  bool // set by drain: no waiting part is started any more
	// waiting[w] are worker w's next parts, in stream order; only the last one grows.
	waiting [][]part
}

// schedulerDeps is what the scheduler is handed by its session: the bounds of a part, the
// source's metrics and activity, how to read the leases, and the work of a part.
type schedulerDeps struct {
	// batchSize and maxBytes bound a part (BatchSize rows, MaxBatchBytes).
	batchSize int
	maxBytes  int64
	metrics   *metrics
	activity  *activity
	// readLeases reads the relay's leases, all of the group's (Source.allLeases).
	readLeases func(ctx context.Context) ([]relay.Lease, error)
	// work admits, publishes and acknowledges a part (Source.streamBatch).
	work func(ctx context.Context, worker int, leases []relay.Lease, b batch) error
}

// streamLoop runs the pipeline until ctx ends or a part or the stream fails.
func (s *Source) streamLoop(ctx context.Context, reader *streamReader, batches <-chan batch, readErr chan error) error {
	sched := startScheduler(ctx, reader, s.core.Workers, schedulerDeps{batchSize: s.core.BatchSize, maxBytes: s.core.MaxBatchBytes,
		metrics: s.metrics, activity: &s.activity, readLeases: s.allLeases, work: s.streamBatch})
	defer sched.stopWorkers()
	// Beside the workers: the retry path, the stall check and the background reads of the leases.
	bgErr := make(chan error, 2)
	bgCtx, stopBackground := context.WithCancel(ctx)
	var background sync.WaitGroup
	background.Go(func() { s.retryLoop(bgCtx, bgErr) })
	s.activity.lastDelivered.Store(time.Now().UnixNano())
	background.Go(func() { s.stallLoop(bgCtx) })
	refresh := make(chan struct{}, 1)
	background.Go(func() { sched.refreshLeases(bgCtx, refresh, bgErr) })
	defer func() {
		stopBackground()
		background.Wait() // a retry pass in progress finishes its publish and acknowledgement
	}()
	return sched.loop(ctx, batches, readErr, bgErr, refresh)
}

// loop takes the stream's batches and settles the finished parts until ctx ends or a part, the
// stream or a background task (errs) fails; it waits for the parts in flight before returning.
func (s *streamScheduler) loop(ctx context.Context, batches <-chan batch, readErr chan error, errs <-chan error, refresh chan<- struct{}) error {
	for s.firstErr == nil {
		select {
		case <-ctx.Done():
			s.drain()
			return ctx.Err()
		case err := <-readErr:
			readErr <- err // for the session's stop
			s.drain()
			return err
		case d := <-s.done:
			s.settle(d)
		case err := <-errs:
			s.firstErr = err
		case b := <-s.intake(batches):
			if err := s.take(ctx, b, refresh); err != nil {
				s.drain()
				return err
			}
		}
	}
	s.drain()
	return s.firstErr
}

// startScheduler starts the workers of a session. They outlive ctx until stopWorkers: a part
// that has begun is finished (published and acknowledged) even when the session ends.
func startScheduler(ctx context.Context, reader *streamReader, workers int, deps schedulerDeps) *streamScheduler {
	s := &streamScheduler{schedulerDeps: deps, reader: reader, full: reader.full, queues: make([]chan part, workers),
		done: make(chan partDone, workers), exited: make(chan struct{}, workers), busy: make([]bool, workers),
		waiting: make([][]part, workers)}
	wctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	s.stop = stop
	for w := range s.queues {
		s.queues[w] = make(chan part, 1)
		go func() {
			defer func() { s.exited <- struct{}{} }()
			for p := range s.queues[w] {
				s.done <- partDone{w, p.batches, s.work(wctx, w, p.leases, p.b)}
			}
		}()
	}
	return s
}

// stopWorkers closes the workers' queues and waits until they have exited.
func (s *streamScheduler) stopWorkers() {
	for _, q := range s.queues {
		close(q)
	}
	for range s.queues {
		<-s.exited
	}
	s.stop()
}

// intake is the channel to take the next batch from, or nil while none may be taken. While a
// worker is idle, any batch the reader has (it gets its rows at once); while every worker is
// busy, only a full one (BatchSize rows or MaxBatchBytes, from the reader's full channel); and
// none while a worker has a full part waiting. So a busy stream goes out in parts of up to
// BatchSize rows each, and the reader keeps receiving while the workers publish and
// acknowledge, one batch ahead of them.
//
// Why full batches only while every worker is busy: taking none then would leave the workers
// only the reader's one batch ahead of them, split among them (parts of about BatchSize/2 rows
// in a drain with two workers, each paying a whole admit and acknowledgement statement, the
// reader stopped with its batch full); taking any batch would take a stream slower than the
// loop a message or two at a time, in small parts.
func (s *streamScheduler) intake(batches <-chan batch) <-chan batch {
	for w := range s.waiting {
		if n := len(s.waiting[w]); n > 1 || n == 1 && (len(s.waiting[w][0].b.records) >= s.batchSize ||
			s.waiting[w][0].b.bytes >= s.maxBytes) {
			return nil
		}
	}
	if s.inFlight == len(s.queues) {
		return s.full
	}
	return batches
}

// take splits batch b among the workers' parts and hands them out.
func (s *streamScheduler) take(ctx context.Context, b batch, refresh chan<- struct{}) error {
	m := s.metrics
	if len(b.records) > 0 {
		s.activity.lastDelivered.Store(time.Now().UnixNano())
	}
	switch {
	case len(b.records) > 0 && !b.commitTime.IsZero():
		m.lagSeconds.Set(max(0, time.Since(b.commitTime).Seconds()))
	case len(b.records) == 0:
		m.lagSeconds.Set(0)
	}
	var leases []relay.Lease
	if len(b.records) > 0 {
		var err error
		if leases, err = s.leases(ctx, refresh); err != nil {
			return err
		}
	}
	p := &pendingBatch{number: s.next, confirm: b.confirm, walEnd: b.walEnd}
	s.next++
	s.pending = append(s.pending, p)
	for w, rows := range splitByWorker(b, len(s.queues)) {
		if len(rows.records) > 0 {
			p.parts++
			s.add(w, p.number, leases, rows)
			s.dispatch(w)
		}
	}
	s.advance() // a batch without rows (an idle confirm) completes here
	return nil
}

// leases returns the reading of the leases for a batch: read now when there is none or it is
// older than leaseCacheTTL, and refreshed in the background once it is half that old.
func (s *streamScheduler) leases(ctx context.Context, refresh chan<- struct{}) ([]relay.Lease, error) {
	r := s.reading.Load()
	switch {
	case r == nil || time.Since(r.at) > leaseCacheTTL:
		at := time.Now()
		ls, err := s.readLeases(ctx)
		if err != nil {
			return nil, err
		}
		r = &leaseReading{ls, at}
		s.reading.Store(r)
	case time.Since(r.at) > leaseCacheTTL/2:
		select {
		case refresh <- struct{}{}:
		default: // one is under way
		}
	}
	return r.leases, nil
}

// refreshLeases reads the leases whenever asked on refresh, until ctx ends or a read fails
// (reported on errs).
func (s *streamScheduler) refreshLeases(ctx context.Context, refresh <-chan struct{}, errs chan<- error) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-refresh:
		}
		at := time.Now()
		leases, err := s.readLeases(ctx)
		if err != nil {
			if ctx.Err() == nil {
				errs <- err
			}
			return
		}
		s.reading.Store(&leaseReading{leases, at})
	}
}

// advance confirms the batches that are complete, in order.
func (s *streamScheduler) advance() {
	for len(s.pending) > 0 && s.pending[0].parts == 0 && s.firstErr == nil {
		p := s.pending[0]
		s.pending = s.pending[1:]
		if p.confirm > s.confirmed {
			s.confirmed = p.confirm
			s.reader.confirmed.Store(uint64(s.confirmed))
		}
		if p.walEnd > s.confirmed {
			s.metrics.lagBytes.Set(float64(p.walEnd - s.confirmed))
		} else {
			s.metrics.lagBytes.Set(0)
		}
	}
}

// dispatch hands worker w its next part if it is idle. After a failure nothing more is
// published: the stream restarts from the confirmed position.
func (s *streamScheduler) dispatch(w int) {
	if s.busy[w] || len(s.waiting[w]) == 0 || s.firstErr != nil || s.stopping {
		return
	}
	part := s.waiting[w][0]
	s.waiting[w] = s.waiting[w][1:]
	s.busy[w] = true
	s.inFlight++
	s.activity.partsInFlight.Add(1)
	s.queues[w] <- part // never blocks: the worker is idle
}

// settle records a finished part.
func (s *streamScheduler) settle(d partDone) {
	s.busy[d.worker] = false
	s.inFlight--
	s.activity.partsInFlight.Add(-1)
	if d.err != nil && s.firstErr == nil {
		s.firstErr = d.err
	}
	for _, n := range d.batches {
		if len(s.pending) > 0 && n >= s.pending[0].number && n-s.pending[0].number < uint64(len(s.pending)) {
			s.pending[n-s.pending[0].number].parts--
		}
	}
	s.advance()
	s.dispatch(d.worker)
}

// drain waits for the parts in flight (not for those still waiting: their batches are not
// confirmed, and the stream replays them).
func (s *streamScheduler) drain() {
	s.stopping = true
	for s.inFlight > 0 {
		s.settle(<-s.done)
	}
}

// add appends worker w's rows of batch n to its next part, or starts a new one when they do not
// fit.
func (s *streamScheduler) add(w int, n uint64, leases []relay.Lease, rows batch) {
	for _, r := range rows.records {
		rows.bytes += int64(len(r.Event.Payload))
	}
	q := s.waiting[w]
	if k := len(q) - 1; k >= 0 && len(q[k].b.records)+len(rows.records) <= s.batchSize &&
		q[k].b.bytes+rows.bytes <= s.maxBytes {
		last := &q[k]
		last.b.records = append(last.b.records, rows.records...)
		last.b.xids = append(last.b.xids, rows.xids...)
		last.b.bytes += rows.bytes // the part keeps its first reading of the leases: the older epochs
		if last.batches[len(last.batches)-1] != n {
			last.batches = append(last.batches, n)
		}
		return
	}
	s.waiting[w] = append(q, part{batches: []uint64{n}, leases: leases, b: rows})
}
