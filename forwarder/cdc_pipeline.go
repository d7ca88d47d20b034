package forwarder

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
)

// The delivering side of the stream: each batch is split by partition among Workers goroutines
// (a key always goes to the same one, which handles its parts in stream order, so per-key
// order holds), which admit, publish and acknowledge their parts in parallel and in a pipeline.
// The slot position of a batch is confirmed once the parts of that batch and of every earlier
// one are done. Every RetryInterval the pipeline is drained and the retry path runs alone, so
// that it never publishes a key the stream publishes too.

// cdcPart is a worker's part of a stream batch.
type cdcPart struct {
	batch  uint64
	leases []lease
	b      cdcBatch
}

// cdcDone reports a finished part.
type cdcDone struct {
	batch uint64
	err   error
}

// pendingBatch is a batch whose parts are not all done yet.
type pendingBatch struct {
	number  uint64
	parts   int
	confirm pglogrepl.LSN
	walEnd  pglogrepl.LSN
}

// leaseCacheTTL bounds how long the pipeline trusts its reading of the leases; the
// acknowledgement's fence makes a stale reading safe, this only limits wasted publishes.
const leaseCacheTTL = 100 * time.Millisecond

// streamLoop runs the pipeline until ctx ends or a part or the stream fails.
func (f *Forwarder) streamLoop(ctx context.Context, reader *cdcReader, batches <-chan cdcBatch, readErr chan error) error {
	workers := f.cfg.Workers
	queues := make([]chan cdcPart, workers)
	done := make(chan cdcDone, 4*workers+8)
	wctx, stopWorkers := context.WithCancel(context.WithoutCancel(ctx))
	exited := make(chan struct{}, workers)
	var failed atomic.Bool // after a failed part, the queued ones are skipped: the stream restarts
	for w := range queues {
		queues[w] = make(chan cdcPart, 2)
		go func() {
			defer func() { exited <- struct{}{} }()
			for part := range queues[w] {
				err := errPartSkipped
				if !failed.Load() {
					if err = f.streamBatch(wctx, w, part.leases, part.b); err != nil {
						failed.Store(true)
					}
				}
				done <- cdcDone{part.batch, err}
			}
		}()
	}
	var (
		pending   []*pendingBatch
		next      uint64
		confirmed pglogrepl.LSN
		firstErr  error
		leases    []lease
		leasesAt  time.Time
	)
	defer func() {
		for _, q := range queues {
			close(q)
		}
		for range queues {
			<-exited
		}
		stopWorkers()
	}()
	// advance confirms the batches that are complete, in order.
	advance := func() {
		for len(pending) > 0 && pending[0].parts == 0 && firstErr == nil {
			p := pending[0]
			pending = pending[1:]
			if p.confirm > confirmed {
				confirmed = p.confirm
				reader.confirmed.Store(uint64(confirmed))
			}
			if p.walEnd > confirmed {
				f.cdc.metrics.lagBytes.Set(float64(p.walEnd - confirmed))
			} else {
				f.cdc.metrics.lagBytes.Set(0)
			}
		}
	}
	// settle records a finished part.
	settle := func(d cdcDone) {
		if d.err != nil && (firstErr == nil || errors.Is(firstErr, errPartSkipped)) {
			firstErr = d.err
		}
		for _, p := range pending {
			if p.number == d.batch {
				p.parts--
			}
		}
		advance()
	}
	// drain waits for every part in flight.
	drain := func() {
		for len(pending) > 0 && firstErr == nil {
			settle(<-done)
		}
	}
	retry := time.NewTicker(f.cfg.CDC.RetryInterval)
	defer retry.Stop()
	for firstErr == nil {
		// At most one batch in flight per worker: while they are busy, the reader keeps
		// accumulating, so a steady trickle of commits goes out in batches, not one by one.
		in := batches
		if len(pending) >= workers {
			in = nil
		}
		select {
		case <-ctx.Done():
			drain()
			return ctx.Err()
		case err := <-readErr:
			readErr <- err // for the session's stop
			drain()
			return err
		case d := <-done:
			settle(d)
		case <-retry.C:
			drain()
			if firstErr == nil {
				firstErr = f.retryPass(ctx)
			}
		case b := <-in:
			switch {
			case len(b.records) > 0 && !b.commitTime.IsZero():
				f.cdc.metrics.lagSeconds.Set(max(0, time.Since(b.commitTime).Seconds()))
			case len(b.records) == 0:
				f.cdc.metrics.lagSeconds.Set(0)
			}
			if len(b.records) > 0 && time.Since(leasesAt) > leaseCacheTTL {
				var err error
				if leases, err = f.allLeases(ctx); err != nil {
					drain()
					return err
				}
				leasesAt = time.Now()
			}
			p := &pendingBatch{number: next, confirm: b.confirm, walEnd: b.walEnd}
			next++
			parts := splitByWorker(b, workers)
			pending = append(pending, p)
			for w, part := range parts {
				if len(part.records) == 0 {
					continue
				}
				p.parts++
				if !f.sendPart(ctx, queues[w], cdcPart{batch: p.number, leases: leases, b: part}, done, settle) {
					drain()
					return ctx.Err()
				}
			}
			advance() // a batch without parts (an idle confirm) completes here
		}
	}
	drain()
	return firstErr
}

// errPartSkipped is the outcome of the parts queued after a failed one.
var errPartSkipped = errors.New("cdc: skipped after an earlier part failed")

// sendPart queues a part, settling finished parts while the queue is full.
func (f *Forwarder) sendPart(ctx context.Context, q chan<- cdcPart, part cdcPart, done <-chan cdcDone, settle func(cdcDone)) bool {
	for {
		select {
		case q <- part:
			return true
		case d := <-done:
			settle(d)
		case <-ctx.Done():
			return false
		}
	}
}

// splitByWorker splits a batch's records by partition % workers, keeping their order.
func splitByWorker(b cdcBatch, workers int) []cdcBatch {
	parts := make([]cdcBatch, workers)
	for i, r := range b.records {
		w := r.partition % workers
		parts[w].records = append(parts[w].records, r)
		parts[w].xids = append(parts[w].xids, b.xids[i])
	}
	return parts
}
