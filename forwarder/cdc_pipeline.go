package forwarder

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
)

// The delivering side of the stream: each batch is split by partition among Workers goroutines
// (a key always goes to the same one, which handles its parts in stream order, so per-key
// order holds), which admit, publish and acknowledge their parts in parallel and in a pipeline.
// The slot position of a batch is confirmed once the parts of that batch and of every earlier
// one are done.
//
// The retry path (retryPass, every RetryInterval) runs in a goroutine of its own, beside the
// workers. It used to run alone, after draining the pipeline, so that it never published a key
// the stream was publishing; but that stalled the whole stream every RetryInterval (measured at
// 1,000 events/s: a drain of 5–9 ms median, up to 40–80 ms, then the claim, five times a
// second), and the exclusion it bought is already given by the table. Why a key is never
// published by both at once, nor out of order:
//
//   - A key is parked while one of its pending rows is marked (next_attempt_at set) or dead.
//     The retry path claims marked rows only; a worker publishes a row only if admit, one
//     statement, found it pending, unmarked, and its key not parked.
//   - So for the two to publish a key K at once, K must have been unparked when the worker's
//     admit read the table and have a marked row when the retry path's claim read it. A
//     marked row leaves the table (acknowledged or dead-lettered: the retry path's own
//     acknowledgement) only after the broker acknowledged it, so a mark the claim sees and the
//     admit did not was set after the admit. Marks are set by: the worker of K's partition
//     (failures and held-back rows of its own part, after that part's publish; rows of parked
//     keys, whose key was parked already), the retry path (rows of keys it already holds
//     marked), the drain of a fresh slot (before streamLoop starts) and Admin.Replay/Discard
//     (keys with a dead row: parked). None of them marks a row of K while a part of K that
//     admit let through is being published, except its own worker after that publish — and
//     that worker admits K's next part only after it, so from then on it leaves K's rows to the
//     retry path.
//   - Order within K: while K is parked, every streamed row of K is marked (admit refuses it)
//     and the retry path claims K's marked rows in seq order, after the failed head of the key
//     is due (claim's rules). K is unparked only when its last marked row is acknowledged;
//     a row of K streamed later is admitted only by a read after that acknowledgement, so it is
//     published after everything the retry path published of K. A row admit cannot see yet
//     (decoded, not visible) is waited for and read again (admitVisible) before its part
//     publishes anything.
//   - The slot position does not depend on the retry path: a streamed row left to it is
//     marked in the table before its part is done, and the table is the source of truth.
//
// The workers' and the retry path's acknowledgements are fenced by the lease epochs as before.

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
// Once a reading is half that old, a batch asks for a new one in the background, so that under
// a steady stream the loop never waits for the read (it did, ten times a second: 0.5 ms
// median, 25–45 ms at the 99th percentile on a loaded machine, with no batch handed over
// meanwhile); after an idle spell the first batch reads them itself.
const leaseCacheTTL = 100 * time.Millisecond

// leaseReading is the pipeline's reading of the leases, and when the read began.
type leaseReading struct {
	leases []lease
	at     time.Time
}

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
		reading   atomic.Pointer[leaseReading]
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
	// Beside the workers: the retry path, and the background reads of the leases.
	bgErr := make(chan error, 2)
	bgCtx, stopBackground := context.WithCancel(ctx)
	var background sync.WaitGroup
	background.Go(func() { f.retryLoop(bgCtx, bgErr) })
	refresh := make(chan struct{}, 1)
	background.Go(func() {
		for {
			select {
			case <-bgCtx.Done():
				return
			case <-refresh:
			}
			at := time.Now()
			leases, err := f.allLeases(bgCtx)
			if err != nil {
				if bgCtx.Err() == nil {
					bgErr <- err
				}
				return
			}
			reading.Store(&leaseReading{leases, at})
		}
	})
	defer func() {
		stopBackground()
		background.Wait() // a retry pass in progress finishes its publish and acknowledgement
	}()
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
		case err := <-bgErr:
			firstErr = err
		case b := <-in:
			switch {
			case len(b.records) > 0 && !b.commitTime.IsZero():
				f.cdc.metrics.lagSeconds.Set(max(0, time.Since(b.commitTime).Seconds()))
			case len(b.records) == 0:
				f.cdc.metrics.lagSeconds.Set(0)
			}
			var leases []lease
			if len(b.records) > 0 {
				r := reading.Load()
				switch {
				case r == nil || time.Since(r.at) > leaseCacheTTL:
					at := time.Now()
					ls, err := f.allLeases(ctx)
					if err != nil {
						drain()
						return err
					}
					r = &leaseReading{ls, at}
					reading.Store(r)
				case time.Since(r.at) > leaseCacheTTL/2:
					select {
					case refresh <- struct{}{}:
					default: // one is under way
					}
				}
				leases = r.leases
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

// retryLoop runs retryPass every RetryInterval, beside the stream, until ctx ends or a pass
// fails (reported on errs).
func (f *Forwarder) retryLoop(ctx context.Context, errs chan<- error) {
	t := time.NewTicker(f.cfg.CDC.RetryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := f.retryPass(ctx); err != nil {
			if ctx.Err() == nil {
				errs <- err
			}
			return
		}
	}
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
