package wal

import (
	"context"
	"fmt"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

// deliverBatch publishes a batch of streamed events: those of parked keys go into the table
// behind the key's rows, the others to the broker, and what the broker did not take (a key's
// failed event and its later events of the batch) into the table too. The batch is done, and
// its position may be confirmed, once deliverBatch returns nil.
func (s *Source) deliverBatch(ctx context.Context, p *parked, leases []relay.Lease, b batch) error {
	if len(b.records) == 0 {
		return nil
	}
	direct, err := s.parkParkedKeys(ctx, p, b.records)
	if err != nil || len(direct) == 0 {
		return err
	}
	s.core.Metrics.BatchSize.Observe(float64(len(direct)))
	s.core.Inflight.Read(0)
	held := s.core.Inflight.Hold(0, relay.LeasesOf(leases, direct, 0))
	defer s.core.Inflight.End(held)
	token := s.core.Progress.Begin()
	o, err := s.stream.Deliver(ctx, 0, held, direct)
	s.core.Progress.Delivered(token, o, err)
	if err != nil {
		return fmt.Errorf("wal: deliver %d streamed events: %w", len(direct), err)
	}
	if len(o.Acked) == len(direct) {
		return nil
	}
	acked := make(map[int64]bool, len(o.Acked))
	for _, r := range o.Acked {
		acked[r.Seq] = true
	}
	settled := make(map[int64]relay.Settlement, len(o.Settled))
	for _, st := range o.Settled {
		settled[st.Record.Seq] = st
	}
	var rest []relay.Record
	for _, r := range direct {
		if !acked[r.Seq] {
			rest = append(rest, r)
		}
	}
	return s.park(ctx, p, rest, settled)
}

// parkParkedKeys parks the records of keys in the parked set and returns the others, deciding
// and writing under the key fence.
func (s *Source) parkParkedKeys(ctx context.Context, p *parked, records []relay.Record) ([]relay.Record, error) {
	run(s.hooks().Parking)
	p.lock()
	if p.empty() {
		p.unlock()
		return records, nil
	}
	var direct, toPark []relay.Record
	for _, r := range records {
		if p.keys[r.KeyHash] {
			toPark = append(toPark, r)
		} else {
			direct = append(direct, r)
		}
	}
	err := s.parkRecords(ctx, p, toPark, nil)
	p.unlock()
	if err == nil && len(toPark) > 0 {
		err = s.parked(ctx)
	}
	return direct, err
}

// park parks records (in stream order; settled holds the settlements of the failed ones) under
// the key fence.
func (s *Source) park(ctx context.Context, p *parked, records []relay.Record, settled map[int64]relay.Settlement) error {
	run(s.hooks().Parking)
	p.lock()
	err := s.parkRecords(ctx, p, records, settled)
	p.unlock()
	if err != nil {
		return err
	}
	return s.parked(ctx)
}

// parked runs the tests' Parked hook; a session stopped meanwhile fails the batch, so that its
// position is not confirmed (a relay killed between parking and confirming).
func (s *Source) parked(ctx context.Context) error {
	run(s.hooks().Parked)
	return ctx.Err()
}
