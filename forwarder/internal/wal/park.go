package wal

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/forwarder/internal/sqlstore"
)

// errLeasesLost: the streaming relay no longer owns a partition it parks events of (another
// relay took it over after this one stalled); the session stops without confirming.
var errLeasesLost = errors.New("wal: this relay no longer owns every partition of the lease group")

// parked is the session's set of parked keys, the keys with a pending or dead row in the table,
// and the key fence (docs/wal.md, "Parking"): a mutex held by the stream while it decides which
// records go to the table and writes them, and by the drain while it reads which keys still
// have rows and replaces the set with them. So the drain never drops a key from the set that the
// stream parked an event of after the drain's read: once a key is out of the set, its next event
// is published directly, and it must have no row left behind it.
type parked struct {
	fence  sync.Mutex
	noLock bool // the tests' Hooks.NoKeyFence
	keys   map[int64]bool
}

func (p *parked) lock() {
	if !p.noLock {
		p.fence.Lock()
	}
}

func (p *parked) unlock() {
	if !p.noLock {
		p.fence.Unlock()
	}
}

// empty reports whether no key is parked (read by the drain, under the fence).
func (p *parked) empty() bool { return len(p.keys) == 0 }

// parkRecords writes records (in stream order, the failed ones with their settlement) into the
// table, fenced by the leases of their partitions, and adds their keys to the parked set; the
// caller holds the key fence.
func (s *Source) parkRecords(ctx context.Context, p *parked, records []relay.Record, settled map[int64]relay.Settlement) error {
	if len(records) == 0 {
		return nil
	}
	leases, err := s.core.Store.LiveLeases(ctx, s.core.DB, s.core.RelayID, 0, 1)
	if err != nil {
		return err
	}
	rows := make([]sqlstore.ParkedRow, len(records))
	for i, r := range records {
		rows[i] = sqlstore.ParkedRow{Event: r.Event, KeyHash: r.KeyHash, Partition: r.Partition}
		if st, ok := settled[r.Seq]; ok {
			rows[i].Attempts, rows[i].Next, rows[i].Dead = st.Attempts, st.Next, st.Dead
			rows[i].Reason = relay.TruncateUTF8(st.Reason, relay.MaxReasonBytes)
		}
	}
	lost, err := s.core.Store.ParkFenced(ctx, s.core.DB, s.core.RelayID, relay.LeasesOf(leases, records, 0), rows)
	if err != nil {
		return err
	}
	if len(lost) > 0 {
		return fmt.Errorf("%w: partitions %v lost before parking %d events", errLeasesLost, lost, len(records))
	}
	for _, r := range records {
		p.keys[r.KeyHash] = true
	}
	s.core.Log.Info("wal: parked events in the table", "slot", s.cfg.Slot, "events", len(records))
	return nil
}

// refresh replaces the parked set by the keys that have rows in the table, under the key fence.
func (s *Source) refresh(ctx context.Context, p *parked) error {
	p.lock()
	defer p.unlock()
	keys, err := s.core.Store.ParkedKeys(ctx, s.core.DB)
	if err != nil {
		return err
	}
	if h := s.hooks().Refreshing; h != nil {
		h(len(keys))
	}
	p.keys = keys
	return nil
}

// hooks returns the tests' hooks, or none.
func (s *Source) hooks() *Hooks {
	if s.cfg.Hooks == nil {
		return &Hooks{}
	}
	return s.cfg.Hooks
}
