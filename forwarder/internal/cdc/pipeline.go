package cdc

import (
	"context"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/pgrepl"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

// The delivering side of the stream: each batch is split by partition among Workers goroutines
// (a key always goes to the same one, which handles its parts in stream order, so per-key
// order holds), which admit, publish and acknowledge their parts in parallel. A worker has one
// part at a time; what the stream brings for it meanwhile is appended, in stream order, to the
// part it gets next (up to BatchSize rows / MaxBatchBytes per part), so the busier the stream
// the larger the parts, and a commit never waits behind a part queued before it arrived. The
// slot position of a batch is confirmed once the parts holding its rows, and those of every
// earlier batch, are done. A worker has one part at a time, so a busy key's rows gather into
// large parts instead of many small ones queued behind each other (docs/cdc.md, "Queued parts").
//
// The retry path (retryPass, every RetryInterval) runs in a goroutine of its own, beside the
// workers, so that it never stops the stream (docs/cdc.md); it needs no exclusion from the
// workers, since the table already gives it. Why a key is never published by both at once,
// nor out of order:
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
// The workers' and the retry path's acknowledgements are fenced by the lease epochs.

// part is what a worker publishes at once: its rows of one or more consecutive batches.
type part struct {
	batches []uint64      // the numbers of the batches it holds rows of, ascending
	leases  []relay.Lease // the reading of the leases when its first batch was taken
	b       batch         // records and xids; bytes counts the payloads
}

// partDone reports a finished part.
type partDone struct {
	worker  int
	batches []uint64
	err     error
}

// pendingBatch is a batch whose parts are not all done yet.
type pendingBatch struct {
	number  uint64
	parts   int
	confirm pgrepl.LSN
	walEnd  pgrepl.LSN
}

// leaseCacheTTL bounds how long the pipeline trusts its reading of the leases; the
// acknowledgement's fence makes a stale reading safe, this only limits wasted publishes.
// Once a reading is half that old, a batch asks for a new one in the background, so that under
// a steady stream the loop never waits for the read and keeps handing batches over; after an
// idle spell the first batch reads them itself.
const leaseCacheTTL = 100 * time.Millisecond

// leaseReading is the pipeline's reading of the leases, and when the read began.
type leaseReading struct {
	leases []relay.Lease
	at     time.Time
}

// retryLoop runs retryPass every RetryInterval, beside the stream, until ctx ends or a pass
// fails (reported on errs).
func (s *Source) retryLoop(ctx context.Context, errs chan<- error) {
	t := time.NewTicker(s.cfg.RetryInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := s.retryPass(ctx); err != nil {
			if ctx.Err() == nil {
				errs <- err
			}
			return
		}
	}
}

// splitByWorker splits a batch's records by partition % workers, keeping their order.
func splitByWorker(b batch, workers int) []batch {
	parts := make([]batch, workers)
	for i, r := range b.records {
		w := r.Partition % workers
		parts[w].records = append(parts[w].records, r)
		parts[w].xids = append(parts[w].xids, b.xids[i])
	}
	return parts
}
