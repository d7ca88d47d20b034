package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxkit/outboxkit/outbox"
)

// The cdc ceiling relay (-source cdc, beside the ceiling relay) is the simplest relay that could
// stream the same slot to the same broker: it receives the stream as outboxkit-cdc does
// (pgoutput protocol 2, binary, one goroutine receiving), decodes each insert with pglogrepl and
// pgx's type map (cdcdecode.go) into the record the other relays send, produces it with franz-go
// (idempotent, acks=all, lz4)
// and confirms the slot position once every record before it is acknowledged. It reads nothing
// back from the table and deletes nothing: no admit, no acknowledgement in the table, no parked
// keys, no retries, no leases, no metrics (what Trendyol's go-pq-cdc-kafka does, with the other
// relays' producer settings). What is left is the cost of the walsender, the decoding and the
// broker: the limit of this machine for a relay streaming one slot to Kafka, to set beside what
// pg_recvlogical decodes alone.

// relayCDCCeiling is the cdc ceiling relay.
const relayCDCCeiling = "cdc-ceiling"

// runCDCCeiling is the cdc ceiling relay's child process, until ctx ends.
func runCDCCeiling(ctx context.Context, d database, name string, o options) error {
	table, err := outbox.NewTable(d.dialect, name)
	if err != nil {
		return fmt.Errorf("outbox table %q: %w", name, err)
	}
	db, err := sql.Open(d.driver, d.dsn)
	if err != nil {
		return err
	}
	slot, pub, err := cdcNames(ctx, db, table)
	_ = db.Close()
	if err != nil {
		return err
	}
	client, err := ceilingClient(ctx, o)
	if err != nil {
		return err
	}
	defer client.Close()
	cfg, err := pgconn.ParseConfig(d.dsn)
	if err != nil {
		return fmt.Errorf("parse the PostgreSQL DSN: %w", err)
	}
	cfg.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("replication connection: %w", err)
	}
	defer func() { _ = conn.Close(context.Background()) }()
	if err := waitForGo(); err != nil {
		return err
	}
	// Streaming starts after go, as outboxkit-cdc's (which connects in Run): the walsender
	// decoding ahead while the relay waits for go would be a head start.
	if err := pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{
		Mode: pglogrepl.LogicalReplication,
		PluginArgs: []string{"proto_version '2'", "publication_names '" + pub + "'",
			"binary 'true'", "messages 'false'"},
	}); err != nil {
		return fmt.Errorf("start streaming slot %s: %w", slot, err)
	}
	s := &cdcCeilingStream{conn: conn, client: client, decoder: newStockDecoder(), acks: &ackTracker{done: map[uint64]bool{}}}
	err = s.run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// cdcCeilingStream is the state of one streaming session.
type cdcCeilingStream struct {
	conn     *pgconn.PgConn
	client   *kgo.Client
	decoder  ceilingDecoder
	acks     *ackTracker
	produced uint64
	// commits are the ends of the transactions decoded and not confirmed yet, with the number
	// of records produced up to each.
	commits []cdcCeilingCommit
	// confirmed is the position last reported (resent when nothing new is confirmed, so that
	// the server hears from the relay within wal_sender_timeout).
	confirmed pglogrepl.LSN
}

type cdcCeilingCommit struct {
	end      pglogrepl.LSN
	produced uint64
}

// ackTracker knows the lowest record number not acknowledged yet (promises of different
// partitions run in any order).
type ackTracker struct {
	mu   sync.Mutex
	low  uint64
	done map[uint64]bool // acknowledged records above low
	err  error
}

func (t *ackTracker) ack(n uint64, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil && t.err == nil {
		t.err = err
	}
	if n != t.low {
		t.done[n] = true
		return
	}
	t.low++
	for t.done[t.low] {
		delete(t.done, t.low)
		t.low++
	}
}

func (t *ackTracker) state() (uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.low, t.err
}

func (s *cdcCeilingStream) run(ctx context.Context) error {
	msgs := make(chan []byte, 256)
	recvErr := make(chan error, 1)
	received, stop := make(chan struct{}), make(chan struct{})
	defer func() {
		// The receiving goroutine may be blocked in ReceiveMessage: a read deadline in the past
		// ends it before the connection is closed (pgconn is not safe for concurrent use).
		close(stop)
		if nc := s.conn.Conn(); nc != nil {
			_ = nc.SetReadDeadline(time.Unix(1, 0))
		}
		<-received
	}()
	go func() {
		defer close(received)
		for {
			msg, err := s.conn.ReceiveMessage(context.Background())
			if err != nil {
				recvErr <- err
				return
			}
			var data []byte
			switch msg := msg.(type) {
			case *pgproto3.CopyData:
				if len(msg.Data) == 0 {
					continue
				}
				data = append([]byte(nil), msg.Data...)
			case *pgproto3.ErrorResponse:
				recvErr <- pgconn.ErrorResponseToPgError(msg)
				return
			case *pgproto3.CopyDone:
				recvErr <- errors.New("the server ended the stream")
				return
			default:
				continue
			}
			select {
			case msgs <- data:
			case <-stop:
				return
			}
		}
	}()
	status := time.NewTicker(time.Second)
	defer status.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-recvErr:
			return fmt.Errorf("replication stream: %w", err)
		case <-status.C:
			if err := s.confirm(ctx); err != nil {
				return err
			}
		case data := <-msgs:
			if err := s.handle(ctx, data); err != nil {
				return err
			}
		}
	}
}

// handle decodes one CopyData payload: an insert of the outbox table is produced at once.
func (s *cdcCeilingStream) handle(ctx context.Context, data []byte) error {
	m, err := s.decoder.decode(data)
	if err != nil {
		return err
	}
	switch m.kind {
	case ceilingKeepalive:
		if m.replyRequested {
			return s.confirm(ctx)
		}
	case ceilingInsert:
		s.produce(ctx, m.event)
	case ceilingEvents:
		for _, e := range m.events {
			s.produce(ctx, e)
		}
	case ceilingCommit:
		s.commits = append(s.commits, cdcCeilingCommit{end: m.end, produced: s.produced})
	case ceilingSkip:
	}
	return nil
}

// produce produces e, numbered in stream order for the acknowledgement's low-water mark.
func (s *cdcCeilingStream) produce(ctx context.Context, e outbox.Event) {
	n := s.produced
	s.produced++
	s.client.Produce(ctx, toRecord(e), func(_ *kgo.Record, err error) { s.acks.ack(n, err) })
}

// confirm reports the end of the last transaction whose records are all acknowledged.
func (s *cdcCeilingStream) confirm(ctx context.Context) error {
	low, err := s.acks.state()
	if err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	for len(s.commits) > 0 && s.commits[0].produced <= low {
		s.confirmed = s.commits[0].end
		s.commits = s.commits[1:]
	}
	if s.confirmed == 0 {
		return nil
	}
	if err := pglogrepl.SendStandbyStatusUpdate(ctx, s.conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: s.confirmed}); err != nil {
		return fmt.Errorf("send the confirmed position %s: %w", s.confirmed, err)
	}
	return nil
}
