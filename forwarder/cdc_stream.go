package forwarder

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/prometheus/client_golang/prometheus"
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
	receiveLag     prometheus.Observer
	xid            uint32        // of the transaction being decoded
	finalLSN       pglogrepl.LSN // the end of the transaction being decoded (its Begin says)
	// confirmed is the position the delivering loop settled everything before.
	confirmed atomic.Uint64
}

// run reads until ctx ends or the stream fails, sending batches to out. A batch is handed over
// as soon as the delivering side takes it, or when it is full (then the reader waits), so that
// a busy pipeline gets large batches and an idle one gets each transaction at once. One
// goroutine receives from the connection (without deadlines, so no timer or watcher per
// message), this one batches and reports the confirmed position; run ends the receiving
// goroutine before it returns.
func (r *cdcReader) run(ctx context.Context, out chan<- cdcBatch) error {
	msgs := make(chan []byte, 256)
	recvErr := make(chan error, 1)
	received := make(chan struct{})
	recvCtx, stopReceiving := context.WithCancel(ctx)
	go func() {
		defer close(received)
		r.receive(recvCtx, msgs, recvErr)
	}()
	defer func() {
		stopReceiving() // when it waits to hand a message over
		// The receiving goroutine may be blocked in ReceiveMessage: a read deadline in the past
		// ends it before the caller uses the connection again (the final status) or closes it,
		// since pgconn is not safe for concurrent use (closing it under the receive was a data
		// race, reported by the race detector). A timeout leaves the connection usable.
		if nc := r.conn.Conn(); nc != nil {
			_ = nc.SetReadDeadline(time.Unix(1, 0))
			<-received
			_ = nc.SetReadDeadline(time.Time{})
		}
	}()
	status := time.NewTicker(r.statusInterval)
	defer status.Stop()
	var (
		cur     cdcBatch
		walEnd  pglogrepl.LSN
		offered pglogrepl.LSN
	)
	for {
		var hand chan<- cdcBatch
		if len(cur.records) > 0 || cur.confirm != 0 {
			hand = out
			cur.walEnd = walEnd
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
			cur = cdcBatch{}
		case data := <-in:
			switch data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
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
					if err := r.sendStatus(ctx); err != nil {
						return err
					}
				}
			case pglogrepl.XLogDataByteID:
				xld, err := pglogrepl.ParseXLogData(data[1:])
				if err != nil {
					return fmt.Errorf("cdc: parse XLogData: %w", err)
				}
				walEnd = max(walEnd, xld.ServerWALEnd)
				if _, err := r.decode(&cur, xld.WALData); err != nil {
					return err
				}
			}
		}
	}
}

// receive passes the stream's CopyData payloads to msgs until the connection fails or closes.
func (r *cdcReader) receive(ctx context.Context, msgs chan<- []byte, recvErr chan<- error) {
	for {
		msg, err := r.conn.ReceiveMessage(context.Background())
		if err != nil {
			recvErr <- fmt.Errorf("cdc: receive from the replication stream: %w", err)
			return
		}
		var data []byte
		switch msg := msg.(type) {
		case *pgproto3.CopyData:
			if len(msg.Data) == 0 {
				continue
			}
			data = append([]byte(nil), msg.Data...) // the connection reuses its buffer
		case *pgproto3.ErrorResponse:
			recvErr <- fmt.Errorf("cdc: replication stream: %w", pgconn.ErrorResponseToPgError(msg))
			return
		case *pgproto3.CopyDone:
			recvErr <- errors.New("cdc: the server ended the replication stream")
			return
		default:
			continue
		}
		select {
		case msgs <- data:
		case <-ctx.Done():
			return
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
		rec.commitLSN = int64(r.finalLSN)
		cur.records = append(cur.records, rec)
		cur.xids = append(cur.xids, r.xid)
		cur.bytes += int64(len(rec.event.Payload))
		// A batch ending inside a transaction confirms nothing new.
		cur.confirm = 0
		return len(cur.records) >= r.batchSize || cur.bytes >= r.maxBytes, nil
	case *pglogrepl.BeginMessage:
		r.xid, r.finalLSN = m.Xid, m.FinalLSN
	case *pglogrepl.CommitMessage:
		cur.confirm = m.TransactionEndLSN
		cur.commitTime = m.CommitTime
		if r.receiveLag != nil {
			r.receiveLag.Observe(max(0, time.Since(m.CommitTime).Seconds()))
		}
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
