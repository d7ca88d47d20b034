// Package wal is the wal source (docs/wal.md): the events are logical decoding messages
// (pg_logical_emit_message) that the writers emit in their transactions, with no row. One
// logical replication slot streams them in commit order; only one relay can stream it at a
// time (PostgreSQL refuses a second walsender), and that relay takes every partition of the
// lease group, as the cdc source does, so that the lease epochs fence what it writes. The
// stream publishes the events directly and writes nothing to the database; the slot position
// is confirmed once everything before it is published or parked. A key whose event fails is
// parked: that event and every later one of the key are written into the outbox table, where
// the polling machinery (retries, backoff, dead letters, replay) takes them, until the key has
// no row left (park.go, drain.go).
package wal

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/pgrepl"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// Config is the wal source's own settings (forwarder.WALConfig, and the heartbeat interval).
type Config struct {
	// DSN is the replication connection's connection string.
	DSN string
	// Slot and Publication name the replication slot and the (empty) publication pgoutput needs.
	Slot, Publication string
	// Prefix is the messages' prefix (outbox.Table.WALPrefix).
	Prefix string
	// StatusInterval paces the reports of the confirmed position; RetryInterval the passes over
	// the parked events.
	StatusInterval, RetryInterval time.Duration
	// HeartbeatInterval paces the reconnects, the standby's checks and the wait for the leases.
	HeartbeatInterval time.Duration
	// BatchSize and MaxBatchBytes bound a batch of the stream (the events and payload bytes
	// delivered at once; one Kafka transaction under exactly-once). The reader hands a batch
	// over as soon as the delivering loop is free, so the bounds cost no latency: they only
	// say how much it may gather while the previous batch is being delivered.
	BatchSize     int
	MaxBatchBytes int64
	// Scope returns the leases the table's deliverer holds and fences for a delivery of records
	// (the delivery mode's; nil: those of the records' partitions).
	Scope func(leases []relay.Lease, records []relay.Record) []relay.Lease
	// Hooks are the tests' (nil in production).
	Hooks *Hooks
}

// Hooks let a test stop the source at the points where the hand-over of a parked key is fenced
// (docs/wal.md, "Parking"), and turn each fence off to show what it prevents. Nil functions do
// nothing.
type Hooks struct {
	// Parking runs before the stream takes the key fence to park events; Parked once they are
	// committed, before the batch counts as done (its position is not confirmed before).
	Parking, Parked func()
	// Refreshing runs in the drain between its read of the keys with rows (keys of them) and
	// its update of the parked set (inside the key fence).
	Refreshing func(keys int)
	// Streaming runs before the delivering loop takes its first batch; Batch after each batch
	// it delivered (records in it). BarrierWait runs when the drain starts waiting for the
	// session's barrier; Drained after each pass of the drain (rows it claimed).
	Streaming, BarrierWait func()
	Batch, Drained         func(n int)
	// Committing runs before each transaction of the exactly-once stream, Committed after its
	// commit, before the batch counts as done.
	Committing, Committed func()
	// NoKeyFence and NoBarrier turn the two fences off; NoCheckpointSkip has the exactly-once
	// stream publish again what its last checkpoint covers.
	NoKeyFence, NoBarrier, NoCheckpointSkip bool
}

func run(f func()) {
	if f != nil {
		f()
	}
}

// Heartbeat is what the source needs of the relay's lease keeper: a heartbeat, which takes every
// partition while the source streams (its share policy aims at Target).
type Heartbeat func(ctx context.Context) (relay.Holding, error)

// Source is the wal source: a relay.Source streaming the table's logical decoding messages.
type Source struct {
	core relay.Core
	// stream delivers the streamed events (at least or exactly once); table delivers the
	// parked rows with the forwarder's acknowledger.
	stream    Stream
	table     relay.Deliverer
	heartbeat Heartbeat
	cfg       Config
	streaming atomic.Bool
	drainWarn relay.EveryMinute // a failing drain pass is logged once a minute
}

// New returns the wal source over core: stream delivers the streamed events (AtLeastOnce or
// ExactlyOnce), table the parked rows (the forwarder's deliverer).
func New(core relay.Core, stream Stream, table relay.Deliverer, heartbeat Heartbeat, cfg Config) *Source {
	return &Source{core: core, stream: stream, table: table, heartbeat: heartbeat, cfg: cfg}
}

// Target is the number of partitions the relay aims at (lease.Target): all of them while it
// streams the slot, none while it stands by.
func (s *Source) Target(int) int {
	if s.streaming.Load() {
		return outbox.Partitions
	}
	return 0
}

// Start makes sure of the publication and the slot before the relay takes its first lease, so
// that a lost slot (an error wrapping outbox.ErrWALSlotLost) stops the relay's start; every
// session makes sure of them again.
func (s *Source) Start(ctx context.Context) error { return s.acquireSlot(ctx) }

// errSlotBusy: another walsender streams the slot.
type errSlotBusy struct{ err error }

func (e errSlotBusy) Error() string { return e.err.Error() }

// Run streams the slot while this relay can, standing by (and retrying every heartbeat) while
// another relay streams it, until ctx ends.
func (s *Source) Run(ctx context.Context) {
	standingBy := false
	for ctx.Err() == nil {
		err := s.session(ctx)
		s.streaming.Store(false)
		if ctx.Err() != nil {
			return
		}
		var busy errSlotBusy
		if !errors.As(err, &busy) {
			standingBy = false
			s.core.Log.Warn("wal: the stream stopped; reconnecting", "slot", s.cfg.Slot, "error", err, "in", s.cfg.HeartbeatInterval)
			relay.Sleep(ctx, s.cfg.HeartbeatInterval)
			continue
		}
		if !standingBy {
			s.core.Log.Info("wal: another relay streams the slot; standing by", "slot", s.cfg.Slot)
			standingBy = true
		}
		if s.takeOverStalled(ctx) {
			continue
		}
		relay.Sleep(ctx, s.cfg.HeartbeatInterval)
	}
}

// takeOverStalled terminates the walsender of the slot when no other relay holds a live lease
// of the group: its relay died or stalled, and its leases expired, so it can no longer park.
func (s *Source) takeOverStalled(ctx context.Context) bool {
	others, err := s.core.Store.OtherLiveOwners(ctx, s.core.DB, s.core.RelayID)
	if err != nil || others > 0 {
		return false
	}
	done, err := pgrepl.TerminateWalsender(ctx, s.core.DB, s.cfg.Slot)
	if err != nil {
		s.core.Log.Warn("wal: cannot terminate the walsender of a relay without live leases", "slot", s.cfg.Slot, "error", err)
		return false
	}
	if done {
		s.core.Log.Warn("wal: terminated the walsender of a relay whose leases expired, taking the slot over", "slot", s.cfg.Slot)
	}
	return done
}
