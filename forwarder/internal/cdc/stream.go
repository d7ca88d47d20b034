package cdc

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxkit/outboxkit/forwarder/internal/pgrepl"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

// batch is what the stream reader hands to the delivering loop: the records of committed
// transactions in commit order and the slot position that may be confirmed once they are all
// settled (0: none, the batch ends inside a transaction).
type batch struct {
	records []relay.Record
	// xids are the ids of the records' transactions, record by record.
	xids    []uint32
	bytes   int64
	confirm pgrepl.LSN
	walEnd  pgrepl.LSN
	// commitTime is the commit time of the batch's last transaction (zero for an idle batch).
	commitTime time.Time
}

// walStream is what the reader needs of a started replication stream (pgrepl.Stream): its
// decoded messages, and a way to confirm a position.
type walStream interface {
	Receive(ctx context.Context) (msgs <-chan pgrepl.Message, errs <-chan error)
	Stop()
	SendStatus(ctx context.Context, confirmed pgrepl.LSN) error
}

// streamReader batches the stream's messages and reports the confirmed position (set by the
// delivering loop) to the server every StatusInterval and whenever the server asks.
type streamReader struct {
	stream         walStream
	batchSize      int
	maxBytes       int64
	statusInterval time.Duration
	tenants        map[string]bool
	receiveLag     prometheus.Observer
	xid            uint32     // of the transaction being decoded
	finalLSN       pgrepl.LSN // the end of the transaction being decoded (its Begin says)
	walEnd         pgrepl.LSN // the server's WAL end, as of the last message
	offered        pgrepl.LSN // the highest keepalive position handed on to be confirmed
	// confirmed is the position the delivering loop settled everything before.
	confirmed atomic.Uint64
	// full gets the batch too, besides run's out, once it is full (BatchSize rows or
	// MaxBatchBytes): the delivering loop takes from it while every worker is busy, so that it
	// takes full batches then, not the stream message by message.
	full chan batch
}

// run reads until ctx ends or the stream fails, sending batches to out. A batch is handed over
// as soon as the delivering side takes it, or when it is full (then the reader waits), so that
// a busy pipeline gets large batches and an idle one gets each transaction at once. The
// stream is stopped before run returns.
func (r *streamReader) run(ctx context.Context, out chan<- batch) error {
	msgs, recvErr := r.stream.Receive(ctx)
	defer r.stream.Stop()
	status := time.NewTicker(r.statusInterval)
	defer status.Stop()
	var cur batch
	for {
		var hand, handFull chan<- batch
		if len(cur.records) > 0 || cur.confirm != 0 {
			hand = out
			cur.walEnd = r.walEnd
		}
		in := msgs
		if len(cur.records) >= r.batchSize || cur.bytes >= r.maxBytes {
			in, handFull = nil, r.full // full: wait until it is taken
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
			cur = batch{}
		case handFull <- cur:
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
	r.walEnd = max(r.walEnd, msg.ServerWALEnd())
	switch m := msg.(type) {
	case pgrepl.Keepalive:
		// Nothing in hand: everything sent before this keepalive is in earlier batches, so once
		// they are settled the slot may move up to here (an idle outbox).
		if len(cur.records) == 0 && m.WALEnd > r.offered {
			cur.confirm, r.offered = m.WALEnd, m.WALEnd
		}
		if m.ReplyRequested {
			return r.sendStatus(ctx)
		}
	case pgrepl.Insert:
		if len(r.tenants) > 0 && !r.tenants[m.Row.Event.TenantID] {
			return nil
		}
		cur.records = append(cur.records, relay.Record{Seq: m.Row.Seq, Event: m.Row.Event, KeyHash: m.Row.KeyHash,
			Attempts: m.Row.Attempts, Partition: m.Row.Partition, CommitLSN: int64(r.finalLSN)})
		cur.xids = append(cur.xids, r.xid)
		cur.bytes += int64(len(m.Row.Event.Payload))
		// A batch ending inside a transaction confirms nothing new.
		cur.confirm = 0
	case pgrepl.Begin:
		r.xid, r.finalLSN = m.Xid, m.FinalLSN
	case pgrepl.Commit:
		cur.confirm = m.EndLSN
		cur.commitTime = m.Time
		if r.receiveLag != nil {
			r.receiveLag.Observe(max(0, time.Since(m.Time).Seconds()))
		}
	}
	return nil
}

// sendStatus reports the confirmed position to the server.
func (r *streamReader) sendStatus(ctx context.Context) error {
	return r.stream.SendStatus(ctx, pgrepl.LSN(r.confirmed.Load()))
}
