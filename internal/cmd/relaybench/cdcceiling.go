package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxkit/outboxkit/outbox"
)

// The cdc ceiling relay (-source cdc, beside the ceiling relay) is the simplest relay that could
// stream the same slot to the same broker: it receives the stream as outboxkit-cdc does
// (pgoutput protocol 2, binary, one goroutine receiving), decodes each insert with pgx's codecs
// into the record the other relays send, produces it with franz-go (idempotent, acks=all, lz4)
// and confirms the slot position once every record before it is acknowledged. It reads nothing
// back from the table and deletes nothing: no admit, no acknowledgement in the table, no parked
// keys, no retries, no leases, no metrics (what Trendyol's go-pq-cdc-kafka does, with the other
// relays' producer settings). What is left is the cost of the walsender, the decoding and the
// broker: the limit of this machine for a relay streaming one slot to Kafka, to set beside what
// pg_recvlogical decodes alone.

// relayCDCCeiling is the cdc ceiling relay.
const relayCDCCeiling = "cdc-ceiling"

// cdcCeilingColumns are the columns the cdc ceiling relay decodes, in the order of its scan.
var cdcCeilingColumns = []string{"event_id", "topic", "aggregate_type", "aggregate_id", "event_type", "tenant_id",
	"payload", "headers", "created_at"}

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
	s := &cdcCeilingStream{conn: conn, client: client, table: table.Events(), types: pgtype.NewMap(),
		relations: map[uint32]*cdcCeilingRelation{}, acks: &ackTracker{done: map[uint64]bool{}}}
	err = s.run(ctx)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// cdcCeilingRelation is the column layout of a relation the stream announced.
type cdcCeilingRelation struct {
	ours bool
	pos  []int // of cdcCeilingColumns in the tuple
	oids []uint32
}

// cdcCeilingStream is the state of one streaming session.
type cdcCeilingStream struct {
	conn      *pgconn.PgConn
	client    *kgo.Client
	table     string
	types     *pgtype.Map
	relations map[uint32]*cdcCeilingRelation
	acks      *ackTracker
	produced  uint64
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
			switch data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(data[1:])
				if err != nil {
					return fmt.Errorf("parse keepalive: %w", err)
				}
				if ka.ReplyRequested {
					if err := s.confirm(ctx); err != nil {
						return err
					}
				}
			case pglogrepl.XLogDataByteID:
				xld, err := pglogrepl.ParseXLogData(data[1:])
				if err != nil {
					return fmt.Errorf("parse XLogData: %w", err)
				}
				if err := s.decode(ctx, xld.WALData); err != nil {
					return err
				}
			}
		}
	}
}

// decode handles one pgoutput message: an insert of the outbox table is produced at once.
func (s *cdcCeilingStream) decode(ctx context.Context, data []byte) error {
	msg, err := pglogrepl.ParseV2(data, false)
	if err != nil {
		return fmt.Errorf("parse pgoutput message: %w", err)
	}
	switch m := msg.(type) {
	case *pglogrepl.RelationMessageV2:
		rel := &cdcCeilingRelation{ours: m.RelationName == s.table}
		at := map[string]int{}
		for i, c := range m.Columns {
			at[c.Name] = i
			rel.oids = append(rel.oids, c.DataType)
		}
		for _, c := range cdcCeilingColumns {
			p, ok := at[c]
			if rel.ours && !ok {
				return fmt.Errorf("relation %s has no column %q", m.RelationName, c)
			}
			rel.pos = append(rel.pos, p)
		}
		s.relations[m.RelationID] = rel
	case *pglogrepl.InsertMessageV2:
		rel := s.relations[m.RelationID]
		if rel == nil {
			return fmt.Errorf("insert into relation %d before its relation message", m.RelationID)
		}
		if !rel.ours {
			return nil
		}
		e, err := s.event(rel, m.Tuple)
		if err != nil {
			return err
		}
		n := s.produced
		s.produced++
		s.client.Produce(ctx, toRecord(e), func(_ *kgo.Record, err error) { s.acks.ack(n, err) })
	case *pglogrepl.CommitMessage:
		s.commits = append(s.commits, cdcCeilingCommit{end: m.TransactionEndLSN, produced: s.produced})
	}
	return nil
}

// event decodes an insert's tuple into the event it holds.
func (s *cdcCeilingStream) event(rel *cdcCeilingRelation, tuple *pglogrepl.TupleData) (outbox.Event, error) {
	var (
		e                outbox.Event
		eventID, created any
		headers          []byte
	)
	dest := []any{&eventID, &e.Topic, &e.AggregateType, &e.AggregateID, &e.EventType, &e.TenantID, &e.Payload, &headers, &created}
	for i, pos := range rel.pos {
		if pos >= len(tuple.Columns) {
			return e, fmt.Errorf("insert has %d columns, column %q is at %d", len(tuple.Columns), cdcCeilingColumns[i], pos)
		}
		if err := s.types.Scan(rel.oids[pos], pgtype.BinaryFormatCode, tuple.Columns[pos].Data, dest[i]); err != nil {
			return e, fmt.Errorf("decode column %q: %w", cdcCeilingColumns[i], err)
		}
	}
	id, ok := eventID.([16]byte)
	if !ok {
		return e, fmt.Errorf("event id of type %T", eventID)
	}
	e.ID = uuid.UUID(id)
	if t, ok := created.(time.Time); ok {
		e.CreatedAt = t.UTC()
	}
	if len(headers) > 0 {
		if err := json.Unmarshal(headers, &e.Headers); err != nil {
			return e, fmt.Errorf("headers: %w", err)
		}
	}
	return e, nil
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
