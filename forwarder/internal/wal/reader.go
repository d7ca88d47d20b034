package wal

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/pgrepl"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// batch is what the reader hands to the delivering loop: the events of committed transactions
// in stream order (commit order, then message order, then order in the message) and the slot
// position that may be confirmed once they are all published or parked (0: none, the batch
// ends inside a transaction).
type batch struct {
	records []relay.Record
	bytes   int64
	confirm pgrepl.LSN
	// barrier says that with this batch, every event committed before the session's barrier
	// position (drain.go) has been handed over.
	barrier bool
}

// walStream is what the reader needs of a started replication stream (pgrepl.Stream).
type walStream interface {
	Receive(ctx context.Context) (msgs <-chan pgrepl.Message, errs <-chan error)
	Stop()
	SendStatus(ctx context.Context, confirmed pgrepl.LSN) error
	Ping(ctx context.Context, confirmed pgrepl.LSN) error
}

// streamReader turns the stream's messages of one prefix into batches of records and reports
// the confirmed position (set by the delivering loop) to the server every statusInterval and
// whenever the server asks.
type streamReader struct {
	stream         walStream
	prefix         string
	batchSize      int
	maxBytes       int64
	statusInterval time.Duration
	// inTx says a transaction is being decoded; tx holds its records until its commit, since a
	// batch handed over must hold whole transactions only (a key's order is commit order).
	inTx      bool
	txBarrier bool           // the transaction holds this session's barrier
	tx        []relay.Record // copied into the batch at the commit, then reused
	txBytes   int64
	lastBatch int        // the records of the last batch handed over (at most batchSize)
	commit    pgrepl.LSN // the commit position of the transaction being decoded (its Begin says)
	offered   pgrepl.LSN // the highest keepalive position handed on to be confirmed
	sequence  int64      // numbers the session's records (Record.Seq, for logs only)
	// confirmed is the position the delivering loop settled everything before.
	confirmed atomic.Uint64
	// barrierAt is the session's barrier position (0: not read yet); passed says a batch said so.
	barrierAt atomic.Uint64
	passed    bool
}

// run reads until ctx ends or the stream fails, sending batches to out: a batch is handed over
// as soon as the delivering loop takes it, or once it is full (then the reader waits).
func (r *streamReader) run(ctx context.Context, out chan<- batch) error {
	msgs, recvErr := r.stream.Receive(ctx)
	defer r.stream.Stop()
	status := time.NewTicker(r.statusInterval)
	defer status.Stop()
	var cur batch
	for {
		var hand chan<- batch
		if len(cur.records) > 0 || cur.confirm != 0 || cur.barrier {
			hand = out
		}
		in := msgs
		if len(cur.records) >= r.batchSize || cur.bytes >= r.maxBytes {
			in = nil // full: wait until it is taken
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-recvErr:
			return err
		case <-status.C:
			if err := r.sendStatus(ctx); err != nil {
				return err
			}
		case hand <- cur:
			r.lastBatch = min(len(cur.records), r.batchSize)
			cur = batch{}
		case m := <-in:
			if err := r.add(ctx, &cur, m); err != nil {
				return err
			}
		}
	}
}

// add adds one message of the stream to cur.
func (r *streamReader) add(ctx context.Context, cur *batch, msg pgrepl.Message) error {
	switch m := msg.(type) {
	case pgrepl.Keepalive:
		// Nothing in hand: everything sent before it is in earlier batches, so once they are
		// settled the slot may move up to here (an idle outbox).
		if len(cur.records) == 0 && !r.inTx && m.WALEnd > r.offered {
			cur.confirm, r.offered = m.WALEnd, m.WALEnd
		}
		if !r.inTx {
			r.pass(cur, m.WALEnd)
		}
		if m.ReplyRequested {
			return r.sendStatus(ctx)
		}
	case pgrepl.Begin:
		r.inTx, r.commit, r.tx, r.txBytes = true, m.FinalLSN, r.tx[:0], 0
	case pgrepl.LogicalMessage:
		return r.message(m)
	case pgrepl.Commit:
		r.inTx = false
		if cur.records == nil && len(r.tx) > 0 && r.lastBatch > len(r.tx) {
			// Sized like the last batch handed over: a backlog's batch is allocated once
			// instead of grown by copying transaction after transaction.
			cur.records = make([]relay.Record, 0, r.lastBatch)
		}
		cur.records = append(cur.records, r.tx...)
		cur.bytes += r.txBytes
		if cap(r.tx) > r.batchSize {
			r.tx = nil // a large transaction's buffer is not kept
		}
		cur.confirm = m.EndLSN
		r.pass(cur, m.EndLSN)
	}
	return nil
}

// pass marks cur as the batch that passes the barrier once the stream has sent everything
// before pos (a commit's end, or a keepalive outside a transaction) and pos reached it.
func (r *streamReader) pass(cur *batch, pos pgrepl.LSN) {
	if at := r.barrierAt.Load(); !r.passed && at != 0 && uint64(pos) >= at {
		r.passed, cur.barrier = true, true
	}
}

// message adds the events of one transactional logical decoding message of the prefix to its
// transaction; other messages are ignored. A message of the prefix that does not decode stops
// the stream with an error naming its position: the event exists nowhere else.
func (r *streamReader) message(m pgrepl.LogicalMessage) error {
	if !m.Transactional || !r.inTx || m.Prefix != r.prefix {
		return nil
	}
	events, err := outbox.DecodeWALEnvelope(m.Content)
	if err != nil {
		return fmt.Errorf("wal: the message at %s (prefix %s, commit %s): %w", m.LSN, m.Prefix, r.commit, err)
	}
	for _, e := range events {
		hash := outbox.KeyHash(e.TenantID, e.AggregateType, e.AggregateID)
		r.sequence++
		r.tx = append(r.tx, relay.Record{Seq: r.sequence, Event: e, KeyHash: hash, Partition: outbox.PartitionOf(hash),
			CommitLSN: int64(r.commit)})
		r.txBytes += int64(len(e.Payload))
	}
	return nil
}

// sendStatus reports the confirmed position to the server; until the barrier is passed, it asks
// for a keepalive in reply, which passes it on an idle stream.
func (r *streamReader) sendStatus(ctx context.Context) error {
	if !r.passed && r.barrierAt.Load() != 0 {
		return r.stream.Ping(ctx, pgrepl.LSN(r.confirmed.Load()))
	}
	return r.stream.SendStatus(ctx, pgrepl.LSN(r.confirmed.Load()))
}
