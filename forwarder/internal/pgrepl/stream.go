package pgrepl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
)

// Stream receives a started replication stream (Start) and decodes it, in a goroutine of its
// own that receives without deadlines (no timer or watcher per message).
type Stream struct {
	conn     *Conn
	decoder  *Decoder
	cancel   context.CancelFunc
	received chan struct{}
}

// NewStream returns the stream of conn, decoded by decoder.
func NewStream(conn *Conn, decoder *Decoder) *Stream {
	return &Stream{conn: conn, decoder: decoder}
}

// Receive starts receiving: the decoded messages arrive on msgs, in order, until the stream
// fails (its error on errs), ctx ends or Stop. A message waits until it is taken (at most 256
// are buffered), so a reader that stops taking stops the reading. Receive once per Stream.
func (s *Stream) Receive(ctx context.Context) (msgs <-chan Message, errs <-chan error) {
	out := make(chan Message, 256)
	failed := make(chan error, 1)
	s.received = make(chan struct{})
	ctx, s.cancel = context.WithCancel(ctx)
	go func() {
		defer close(s.received)
		if err := s.receive(ctx, out); err != nil {
			failed <- err
		}
	}()
	return out, failed
}

// Stop ends the receiving goroutine and waits for it; the connection stays usable (for the
// final status update, or closing it).
func (s *Stream) Stop() {
	if s.cancel == nil {
		return
	}
	s.cancel() // when it waits to hand a message over
	// The receiving goroutine may be blocked in ReceiveMessage: a read deadline in the past ends
	// it before the caller uses the connection again or closes it, since pgconn is not safe for
	// concurrent use (closing it under the receive was a data race, reported by the race
	// detector). A timeout leaves the connection usable.
	if nc := s.conn.Conn(); nc != nil {
		_ = nc.SetReadDeadline(time.Unix(1, 0))
		<-s.received
		_ = nc.SetReadDeadline(time.Time{})
	}
}

// receive passes the stream's decoded messages to out until the connection fails or closes, a
// message cannot be decoded, or ctx ends (nil).
func (s *Stream) receive(ctx context.Context, out chan<- Message) error {
	for {
		msg, err := s.conn.ReceiveMessage(context.Background())
		if err != nil {
			return fmt.Errorf("cdc: receive from the replication stream: %w", err)
		}
		var data []byte
		switch msg := msg.(type) {
		case *pgproto3.CopyData:
			if len(msg.Data) == 0 {
				continue
			}
			data = append([]byte(nil), msg.Data...) // the connection reuses its buffer
		case *pgproto3.ErrorResponse:
			return fmt.Errorf("cdc: replication stream: %w", pgconn.ErrorResponseToPgError(msg))
		case *pgproto3.CopyDone:
			return errors.New("cdc: the server ended the replication stream")
		default:
			continue
		}
		m, ok, err := s.decoder.Decode(data)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		select {
		case out <- m:
		case <-ctx.Done():
			return nil
		}
	}
}

// SendStatus reports to the server that everything before confirmed is settled: the slot may
// release the WAL before it. A zero position sends nothing.
func (s *Stream) SendStatus(ctx context.Context, confirmed LSN) error {
	return s.sendStatus(ctx, confirmed, false)
}

// Ping is SendStatus asking the server to reply at once with a keepalive, which says how far it
// has sent the stream.
func (s *Stream) Ping(ctx context.Context, confirmed LSN) error {
	return s.sendStatus(ctx, confirmed, true)
}

func (s *Stream) sendStatus(ctx context.Context, confirmed LSN, reply bool) error {
	if confirmed == 0 && !reply {
		return nil
	}
	status := pglogrepl.StandbyStatusUpdate{WALWritePosition: confirmed, ReplyRequested: reply}
	if err := pglogrepl.SendStandbyStatusUpdate(ctx, s.conn, status); err != nil {
		return fmt.Errorf("cdc: send the confirmed position %s: %w", confirmed, err)
	}
	return nil
}
