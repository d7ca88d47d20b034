package wal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/pgrepl"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
)

// Stream is how the source delivers the streamed events: AtLeastOnce or ExactlyOnce (eo.go).
// Its methods are the source's own.
type Stream interface {
	// open readies the mode for a session of s that owns every lease and returns a position
	// the session may confirm at once (0: none).
	open(ctx context.Context, s *Source, leases []relay.Lease) (pgrepl.LSN, error)
	// deliver publishes or parks a batch's records. The batch is done, and its position may be
	// confirmed, once deliver returns nil.
	deliver(ctx context.Context, s *Source, p *parked, leases []relay.Lease, b batch) error
	// drainTurn is taken by the drain around each claim and delivery of parked rows; it
	// returns its release.
	drainTurn() (release func(), err error)
	// stop ends the session's use of the broker.
	stop()
}

// atLeastOnce is the at-least-once Stream: the events go through an at-least-once deliverer
// whose acknowledger writes nothing (StreamAcknowledger).
type atLeastOnce struct{ d relay.Deliverer }

// AtLeastOnce returns the at-least-once Stream over d, an at-least-once deliverer over
// StreamAcknowledger.
func AtLeastOnce(d relay.Deliverer) Stream { return atLeastOnce{d: d} }

func (a atLeastOnce) open(ctx context.Context, _ *Source, leases []relay.Lease) (pgrepl.LSN, error) {
	_, err := a.d.Ready(ctx, 0, leases)
	return 0, err
}

func (atLeastOnce) drainTurn() (func(), error) { return func() {}, nil }

func (a atLeastOnce) stop() { a.d.Stop() }

// deliver publishes a batch of streamed events: those of parked keys go into the table
// behind the key's rows, the others to the broker, and what the broker did not take (a key's
// failed event and its later events of the batch) into the table too. Events the publisher
// could not try because it reports an outage (relay.ErrOutage: its schema registry does not
// answer) are neither parked nor a reason to end the session: they are tried again, with their
// keys' later events of the batch, after a pause that doubles up to the heartbeat interval,
// spending no attempt, until the outage ends or the session stops. The batch is done, and its
// position may be confirmed, once deliver returns nil.
func (a atLeastOnce) deliver(ctx context.Context, s *Source, p *parked, leases []relay.Lease, b batch) error {
	if len(b.records) == 0 {
		return nil
	}
	direct, err := s.parkParkedKeys(ctx, p, b.records)
	if err != nil || len(direct) == 0 {
		return err
	}
	for attempt := 0; ; attempt++ {
		rest, settled, err := a.deliverDirect(ctx, s, leases, direct)
		outage := errors.Is(err, relay.ErrOutage)
		if err != nil && !outage {
			return fmt.Errorf("wal: deliver %d streamed events: %w", len(direct), err)
		}
		toPark, again := rest, []relay.Record(nil)
		if outage {
			toPark, again = splitSettledKeys(rest, settled)
		}
		if len(toPark) > 0 {
			if err := s.park(ctx, p, toPark, settled); err != nil {
				return err
			}
		}
		if len(again) == 0 {
			return nil
		}
		pause := outagePause(s.core.Retry.Initial, s.cfg.HeartbeatInterval, attempt)
		if attempt == 0 {
			s.core.Log.Warn("wal: the publisher reports an outage; trying the same events again, spending no attempt",
				"slot", s.cfg.Slot, "events", len(again), "error", err)
		}
		if !relay.Sleep(ctx, pause) {
			return ctx.Err()
		}
		direct = again
	}
}

// deliverDirect publishes records through the stream's deliverer and returns those the broker
// did not take, in stream order, with the settlements of the failed ones; its error wraps
// relay.ErrOutage when some were not tried.
func (a atLeastOnce) deliverDirect(ctx context.Context, s *Source, leases []relay.Lease, records []relay.Record) ([]relay.Record, map[int64]relay.Settlement, error) {
	s.core.Metrics.BatchSize.Observe(float64(len(records)))
	s.core.Inflight.Read(0)
	held := s.core.Inflight.Hold(0, relay.LeasesOf(leases, records, 0))
	defer s.core.Inflight.End(held)
	token := s.core.Progress.Begin()
	o, err := a.d.Deliver(ctx, 0, held, records)
	s.core.Progress.Delivered(token, o, err)
	if err != nil && !errors.Is(err, relay.ErrOutage) {
		return nil, nil, err
	}
	if len(o.Acked) == len(records) {
		return nil, nil, err
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
	for _, r := range records {
		if !acked[r.Seq] {
			rest = append(rest, r)
		}
	}
	return rest, settled, err
}

// splitSettledKeys splits the records the broker did not take into those of keys with a settled
// failure (parked) and those of keys whose events were not tried (tried again), keeping the
// stream order in each. A key's failures are gapless, so a key is in one of them only.
func splitSettledKeys(rest []relay.Record, settled map[int64]relay.Settlement) (park, again []relay.Record) {
	failed := map[int64]bool{}
	for _, st := range settled {
		failed[st.Record.KeyHash] = true
	}
	for _, r := range rest {
		if failed[r.KeyHash] {
			park = append(park, r)
		} else {
			again = append(again, r)
		}
	}
	return park, again
}

// outagePause is the pause before the attempt-th retry of events not tried during an outage:
// initial (100ms when unset) doubled per attempt, at most limit.
func outagePause(initial, limit time.Duration, attempt int) time.Duration {
	if initial <= 0 {
		initial = 100 * time.Millisecond
	}
	d := initial
	for range min(attempt, 30) {
		if d >= limit {
			break
		}
		d *= 2
	}
	return min(d, max(limit, initial))
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
