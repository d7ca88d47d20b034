package wal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/bookkeeping"
	"github.com/outboxkit/outboxkit/forwarder/internal/deadletter"
	"github.com/outboxkit/outboxkit/forwarder/internal/exactlyonce"
	"github.com/outboxkit/outboxkit/forwarder/internal/pgrepl"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

// Exactly-once delivery of the stream (docs/wal.md, "Exactly-once"). The stream is one
// transactional unit of its own, "<prefix>/wal" (the table's units are "<prefix>/uNN"): each
// batch is published in one Kafka transaction of that unit, with a checkpoint holding the WAL
// position the batch reaches (bookkeeping.WALPosition: the commit position of its last
// transaction, and the end of that commit). Every event of a transaction that committed at or
// before that position is then published by this or an earlier transaction of the unit, or
// parked in the table. The slot is confirmed only after the commit.
//
// A session opens the unit, which fences every earlier session of it (a zombie relay's commit
// fails) and returns the last committed checkpoint; the stream restarts from the slot's
// confirmed position, which may be older (a relay stopped between a commit and the confirm),
// and drops the events of transactions at or before the checkpoint's commit position: those
// are published or parked already. The stream hands over whole transactions only and a batch
// goes in one transaction, so the commit position is exact: no transaction is ever split
// between two Kafka transactions.
//
// Parking: a key whose event the broker refuses in the unit's transaction has that event and
// its later events written into the table (with the attempt counted), and the rest of the batch
// is committed in the next transaction, with the same checkpoint; the drain relays the parked
// rows through the table's exactly-once deliverer (internal/exactlyonce), whose checkpoints name
// the rows. A parked row must not be published by the drain before the stream's checkpoint
// covering its position is committed: otherwise a relay stopped in between streams the event
// again after the drain deleted its row, and parks it a second time. So a batch holds the
// stream's turn from its parking to its commit, the drain takes the turn around each claim and
// delivery, and a batch that failed after parking keeps it until the session ends. An event of
// an earlier session parked but not covered by a checkpoint is streamed again before the drain
// starts (the session barrier, drain.go), while its row is still in the table: parking it again
// writes nothing.

// errStreamBroken: a batch of this session failed after it may have parked events that no
// committed checkpoint covers; the drain waits for the next session.
var errStreamBroken = errors.New("wal: a batch failed after parking; the parked events wait for the next session")

// ExactlyOnceConfig is what the exactly-once stream needs beside the source.
type ExactlyOnceConfig struct {
	// Publisher publishes the stream's transactions (forwarder.TransactionalPublisher).
	Publisher exactlyonce.Publisher
	// Table is the table's exactly-once deliverer: its prefix and installation, settled at the
	// relay's start, name the stream's unit and its checkpoints.
	Table *exactlyonce.Deliverer
	// CheckpointTopic holds the checkpoints (forwarder.Config.CheckpointTopic).
	CheckpointTopic string
	// Settler counts a refused event's attempt before it is parked.
	Settler *deadletter.Settler
}

// exactlyOnce is the exactly-once Stream.
type exactlyOnce struct {
	cfg ExactlyOnceConfig
	// turn is held by a batch from its parking to its commit and by the drain around each
	// delivery; broken says a batch failed while holding it (errStreamBroken).
	turn   sync.Mutex
	broken bool
	// at is the position of the unit's last committed checkpoint (zero: none).
	at  bookkeeping.WALPosition
	txn int64
}

// ExactlyOnce returns the exactly-once Stream.
func ExactlyOnce(cfg ExactlyOnceConfig) Stream { return &exactlyOnce{cfg: cfg} }

// StreamUnit is the name (Kafka transactional.id) of the wal stream's transactional unit of the
// units' prefix.
func StreamUnit(prefix string) string { return prefix + "/wal" }

func (e *exactlyOnce) unit() string { return StreamUnit(e.cfg.Table.Prefix()) }

// open opens the stream's unit, which fences its earlier sessions, and reads its last
// checkpoint: the position returned may be confirmed at once.
func (e *exactlyOnce) open(ctx context.Context, s *Source, _ []relay.Lease) (pgrepl.LSN, error) {
	e.turn.Lock()
	defer e.turn.Unlock()
	e.broken = false
	if err := e.openUnit(ctx, s); err != nil {
		return 0, err
	}
	if e.at.Commit != 0 {
		s.core.Log.Info("wal: resuming after the stream's last checkpoint", "slot", s.cfg.Slot, "unit", e.unit(),
			"commit", pgrepl.LSN(e.at.Commit), "end", pgrepl.LSN(e.at.End))
	}
	return pgrepl.LSN(e.at.End), nil
}

// openUnit opens the unit and sets at from its last checkpoint, which must be this
// installation's and this slot's.
func (e *exactlyOnce) openUnit(ctx context.Context, s *Source) error {
	unit := e.unit()
	last, err := e.cfg.Publisher.OpenUnit(ctx, unit, e.cfg.CheckpointTopic, 0)
	if err != nil {
		return fmt.Errorf("open transactional unit %s: %w", unit, err)
	}
	s.core.Metrics.UnitsOpened.Inc()
	e.at = bookkeeping.WALPosition{}
	if last == nil {
		return nil
	}
	cp, err := bookkeeping.DecodeCheckpoint(unit, last)
	if err != nil {
		return err
	}
	switch {
	case cp.WAL == nil:
		return fmt.Errorf("the last checkpoint of unit %s holds no WAL position (written by relay %s, txn %d)", unit, cp.Relay, cp.Txn)
	case cp.Installation != e.cfg.Table.Installation():
		return fmt.Errorf("the last checkpoint of unit %s was written by installation %s, this is %s: "+
			"give the installations different transactional_id_prefix values", unit, cp.Installation, e.cfg.Table.Installation())
	case cp.WAL.Slot != s.cfg.Slot:
		return fmt.Errorf("the last checkpoint of unit %s holds a position of slot %s, this relay streams slot %s: "+
			"give the slots' relays different transactional_id_prefix values", unit, cp.WAL.Slot, s.cfg.Slot)
	}
	e.at = *cp.WAL
	return nil
}

func (e *exactlyOnce) drainTurn() (func(), error) {
	e.turn.Lock()
	if e.broken {
		e.turn.Unlock()
		return nil, errStreamBroken
	}
	return e.turn.Unlock, nil
}

func (e *exactlyOnce) stop() { e.cfg.Publisher.CloseUnit(e.unit()) }

// unseen returns the records of transactions after the last checkpoint's commit position.
func (e *exactlyOnce) unseen(s *Source, records []relay.Record) []relay.Record {
	if s.hooks().NoCheckpointSkip {
		return records
	}
	i := 0
	for i < len(records) && uint64(records[i].CommitLSN) <= e.at.Commit {
		i++ // in commit order: the covered ones come first
	}
	return records[i:]
}

// deliver publishes the batch's records in one transaction of the unit with the batch's
// position as its checkpoint, the records of parked keys and of keys refused in it parked.
func (e *exactlyOnce) deliver(ctx context.Context, s *Source, p *parked, leases []relay.Lease, b batch) error {
	records := e.unseen(s, b.records)
	if len(records) == 0 {
		return nil
	}
	e.turn.Lock()
	defer e.turn.Unlock()
	if e.broken {
		return errStreamBroken
	}
	pos := bookkeeping.WALPosition{Slot: s.cfg.Slot, Commit: uint64(records[len(records)-1].CommitLSN), End: uint64(b.confirm)}
	if err := e.commitBatch(ctx, s, p, leases, records, pos); err != nil {
		e.broken = true
		return err
	}
	return nil
}

// maxRounds bounds the transactions tried for one batch: each round parks the keys refused in
// the previous one.
const maxRounds = 3

// commitBatch parks the records of parked keys, then commits the others with the checkpoint
// pos, parking the keys the broker refuses and trying again.
func (e *exactlyOnce) commitBatch(ctx context.Context, s *Source, p *parked, leases []relay.Lease, records []relay.Record,
	pos bookkeeping.WALPosition) error {
	direct, err := s.parkParkedKeys(ctx, p, records)
	if err != nil {
		return err
	}
	for round := 1; ; round++ {
		run(s.hooks().Committing)
		if err := ctx.Err(); err != nil {
			return err
		}
		refused, err := e.commit(ctx, s, leases, direct, pos)
		if err == nil {
			run(s.hooks().Committed)
			return ctx.Err() // a session stopped meanwhile does not confirm the batch
		}
		if len(refused) == 0 || round == maxRounds {
			return err
		}
		s.core.Log.Warn("wal: the broker refused events in the stream's transaction; parking their keys", "slot", s.cfg.Slot,
			"unit", e.unit(), "events", len(refused), "error", err)
		direct, err = e.parkRefused(ctx, s, p, direct, refused)
		if err != nil {
			return err
		}
		if err := e.openUnit(ctx, s); err != nil { // CommitUnit closed the session
			return err
		}
	}
}

// commit publishes records and the checkpoint pos in one transaction of the unit. On an abort
// it returns the refused records' errors by index (none when the failure is not theirs, or an
// outage: the session then restarts from the checkpoint).
func (e *exactlyOnce) commit(ctx context.Context, s *Source, leases []relay.Lease, records []relay.Record,
	pos bookkeeping.WALPosition) (map[int]error, error) {
	unit := e.unit()
	e.txn++
	cp, err := json.Marshal(bookkeeping.Checkpoint{Version: bookkeeping.CheckpointVersion, Installation: e.cfg.Table.Installation(),
		Unit: unit, Relay: s.core.RelayID, Txn: e.txn, Time: time.Now().UTC(), WAL: &pos})
	if err != nil {
		return nil, fmt.Errorf("encode the checkpoint of unit %s: %w", unit, err)
	}
	topics := make([]string, len(records))
	for i, r := range records {
		topics[i] = r.Event.Topic
	}
	s.core.Metrics.BatchSize.Observe(float64(len(records)))
	s.core.Inflight.Read(0)
	held := s.core.Inflight.Hold(0, relay.LeasesOf(leases, records, 0))
	defer s.core.Inflight.End(held)
	token := s.core.Progress.Begin()
	publishCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.core.LeaseTTL)
	started := time.Now()
	errs, err := e.cfg.Publisher.CommitUnit(publishCtx, unit, topics, relay.Messages(ctx, records), cp)
	cancel()
	s.core.Metrics.PublishSeconds.Observe(time.Since(started).Seconds())
	if err == nil {
		s.core.Metrics.TxCommitted.Inc()
		o, _, _ := NewStreamAcknowledger(s.core).Acknowledge(ctx, 0, held, records, nil)
		s.core.Progress.Delivered(token, o, nil)
		e.at = pos
		return nil, nil
	}
	s.core.Metrics.TxAborted.Inc()
	err = fmt.Errorf("wal: transaction of unit %s with %d streamed events: %w", unit, len(records), err)
	s.core.Progress.Delivered(token, relay.Outcome{}, err)
	refused := map[int]error{}
	for i, rerr := range errs {
		if rerr != nil {
			if s.core.Retry.Unblamed(rerr) {
				return nil, err
			}
			refused[i] = rerr
		}
	}
	return refused, err
}

// parkRefused parks, of records, each refused one and the later records of its key (the first
// refused one of a key with its attempt counted) and returns the others.
func (e *exactlyOnce) parkRefused(ctx context.Context, s *Source, p *parked, records []relay.Record, refused map[int]error) ([]relay.Record, error) {
	blocked := map[int64]bool{}
	settled := map[int64]relay.Settlement{}
	var rest, toPark []relay.Record
	for i, r := range records {
		rerr, failed := refused[i]
		switch {
		case blocked[r.KeyHash]:
			toPark = append(toPark, r)
		case failed:
			blocked[r.KeyHash] = true
			attempts, reason, _ := e.cfg.Settler.Failed(r, rerr)
			settled[r.Seq] = e.cfg.Settler.RetryLater(r, attempts, reason)
			toPark = append(toPark, r)
		default:
			rest = append(rest, r)
		}
	}
	return rest, s.park(ctx, p, toPark, settled)
}
