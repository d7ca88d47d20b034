package forwarder

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// cdcBatch is what the stream reader hands to the delivering loop: the records of committed
// transactions in commit order and the slot position that may be confirmed once they are all
// settled (0: none, the batch ends inside a transaction).
type cdcBatch struct {
	records []record
	// xids are the ids of the records' transactions, record by record.
	xids    []uint32
	bytes   int64
	confirm pglogrepl.LSN
	walEnd  pglogrepl.LSN
	// commitTime is the commit time of the batch's last transaction (zero for an idle batch).
	commitTime time.Time
}

// cdcReader owns the replication connection: it decodes the stream into batches and reports
// the confirmed position (set by the delivering loop) to the server every StatusInterval and
// whenever the server asks.
type cdcReader struct {
	conn           *pgconn.PgConn
	decoder        *cdcDecoder
	batchSize      int
	maxBytes       int64
	statusInterval time.Duration
	tenants        map[string]bool
	xid            uint32 // of the transaction being decoded
	// confirmed is the position the delivering loop settled everything before.
	confirmed atomic.Uint64
}

// flushWait bounds how long a partial batch waits for the delivering loop to take it before the
// reader looks again (the loop takes a batch whenever it is free).
const flushWait = 2 * time.Millisecond

// run reads until ctx ends or the stream fails, sending batches to out. A batch is handed over
// as soon as the delivering loop is free, or when it is full (then the reader waits for the
// loop), so that a busy loop gets large batches and an idle one gets each transaction at once.
func (r *cdcReader) run(ctx context.Context, out chan<- cdcBatch) error {
	var (
		cur        cdcBatch
		walEnd     pglogrepl.LSN
		offered    pglogrepl.LSN
		nextStatus = time.Now().Add(r.statusInterval)
	)
	hand := func(block bool) error {
		cur.walEnd = walEnd
		if block {
			select {
			case out <- cur:
			case <-ctx.Done():
				return ctx.Err()
			}
		} else {
			select {
			case out <- cur:
			default:
				return nil
			}
		}
		cur = cdcBatch{}
		return nil
	}
	for {
		if time.Now().After(nextStatus) {
			if err := r.sendStatus(ctx); err != nil {
				return err
			}
			nextStatus = time.Now().Add(r.statusInterval)
		}
		deadline := nextStatus
		if len(cur.records) > 0 || cur.confirm != 0 {
			if err := hand(false); err != nil {
				return err
			}
			if len(cur.records) > 0 || cur.confirm != 0 {
				deadline = time.Now().Add(flushWait)
			}
		}
		rctx, cancel := context.WithDeadline(ctx, deadline)
		msg, err := r.conn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if pgconn.Timeout(err) && ctx.Err() == nil {
				continue
			}
			return fmt.Errorf("cdc: receive from the replication stream: %w", err)
		}
		switch msg := msg.(type) {
		case *pgproto3.CopyData:
			if len(msg.Data) == 0 {
				continue
			}
			switch msg.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(msg.Data[1:])
				if err != nil {
					return fmt.Errorf("cdc: parse keepalive: %w", err)
				}
				walEnd = max(walEnd, ka.ServerWALEnd)
				// Nothing in hand: everything sent before this keepalive is in earlier batches,
				// so once they are settled the slot may move up to here (an idle outbox).
				if len(cur.records) == 0 && ka.ServerWALEnd > offered {
					cur.confirm, offered = ka.ServerWALEnd, ka.ServerWALEnd
				}
				if ka.ReplyRequested {
					nextStatus = time.Time{}
				}
			case pglogrepl.XLogDataByteID:
				xld, err := pglogrepl.ParseXLogData(msg.Data[1:])
				if err != nil {
					return fmt.Errorf("cdc: parse XLogData: %w", err)
				}
				walEnd = max(walEnd, xld.ServerWALEnd)
				full, err := r.decode(&cur, xld.WALData)
				if err != nil {
					return err
				}
				if full {
					if err := hand(true); err != nil {
						return err
					}
				}
			}
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("cdc: replication stream: %w", pgconn.ErrorResponseToPgError(msg))
		case *pgproto3.CopyDone:
			return fmt.Errorf("cdc: the server ended the replication stream")
		}
	}
}

// decode adds one pgoutput message to cur and says whether cur is full.
func (r *cdcReader) decode(cur *cdcBatch, data []byte) (full bool, err error) {
	msg, err := pglogrepl.ParseV2(data, false)
	if err != nil {
		return false, fmt.Errorf("cdc: parse pgoutput message: %w", err)
	}
	switch m := msg.(type) {
	case *pglogrepl.RelationMessageV2:
		return false, r.decoder.relation(m)
	case *pglogrepl.InsertMessageV2:
		rec, ours, err := r.decoder.insert(m)
		if err != nil || !ours {
			return false, err
		}
		if len(r.tenants) > 0 && !r.tenants[rec.event.TenantID] {
			return false, nil
		}
		cur.records = append(cur.records, rec)
		cur.xids = append(cur.xids, r.xid)
		cur.bytes += int64(len(rec.event.Payload))
		// A batch ending inside a transaction confirms nothing new.
		cur.confirm = 0
		return len(cur.records) >= r.batchSize || cur.bytes >= r.maxBytes, nil
	case *pglogrepl.BeginMessage:
		r.xid = m.Xid
	case *pglogrepl.CommitMessage:
		cur.confirm = m.TransactionEndLSN
		cur.commitTime = m.CommitTime
	}
	return false, nil
}

// sendStatus reports the confirmed position to the server.
func (r *cdcReader) sendStatus(ctx context.Context) error {
	pos := pglogrepl.LSN(r.confirmed.Load())
	if pos == 0 {
		return nil
	}
	if err := pglogrepl.SendStandbyStatusUpdate(ctx, r.conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: pos}); err != nil {
		return fmt.Errorf("cdc: send the confirmed position %s: %w", pos, err)
	}
	return nil
}
