package wal

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxkit/outboxkit/forwarder/internal/pgrepl"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

// session opens the replication connection, makes sure of the slot, streams until ctx ends or
// the stream fails, and returns why it stopped.
func (s *Source) session(ctx context.Context) error {
	conn, err := pgrepl.Connect(ctx, s.cfg.DSN)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	defer s.stream.stop()
	defer s.table.Stop()
	if err := s.acquireSlot(ctx); err != nil {
		return err
	}
	if err := pgrepl.StartMessages(ctx, conn, s.cfg.Slot, s.cfg.Publication); err != nil {
		if pgrepl.Code(err) == pgrepl.ObjectInUse {
			return errSlotBusy{err}
		}
		return err
	}
	s.streaming.Store(true)
	reader := &streamReader{stream: pgrepl.NewStream(conn, pgrepl.NewDecoder(pgrepl.Target{})), prefix: s.cfg.Prefix,
		batchSize: s.cfg.BatchSize,
		maxBytes:  s.cfg.MaxBatchBytes, statusInterval: s.cfg.StatusInterval}
	batches := make(chan batch)
	readCtx, stopReading := context.WithCancel(ctx)
	readErr := make(chan error, 1)
	go func() { readErr <- reader.run(readCtx, batches) }()
	defer func() {
		stopReading()
		<-readErr
		// The reader is done with the connection: report the final position on it.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = reader.sendStatus(fctx)
	}()
	leases, err := s.awaitAllLeases(ctx, readErr)
	if err != nil {
		return err
	}
	p, err := s.start(ctx, leases, reader)
	if err != nil {
		return err
	}
	s.core.Log.Info("wal: streaming", "slot", s.cfg.Slot, "prefix", s.cfg.Prefix, "parked_keys", len(p.keys))
	return s.streamLoop(ctx, reader, p, leases, batches, readErr)
}

// start readies the deliverers, reads the parked keys (the previous streamer can no longer park:
// this relay owns every lease) and sets the session's barrier position (drain.go).
func (s *Source) start(ctx context.Context, leases []relay.Lease, reader *streamReader) (*parked, error) {
	if _, err := s.table.Ready(ctx, 0, leases); err != nil {
		return nil, fmt.Errorf("wal: ready the leases before streaming: %w", err)
	}
	resume, err := s.stream.open(ctx, s, leases)
	if err != nil {
		return nil, fmt.Errorf("wal: ready the stream's delivery: %w", err)
	}
	if resume != 0 {
		reader.confirmed.Store(uint64(resume))
	}
	keys, err := s.core.Store.ParkedKeys(ctx, s.core.DB)
	if err != nil {
		return nil, err
	}
	at, err := pgrepl.CurrentLSN(ctx, s.core.DB)
	if err != nil {
		return nil, err
	}
	reader.barrierAt.Store(uint64(at))
	return &parked{keys: keys, noLock: s.hooks().NoKeyFence}, nil
}

// awaitAllLeases renews this relay's leases until it owns every partition of the group (the
// previous streamer's expire within LeaseTTL) and returns them; the reader keeps the stream
// alive meanwhile.
func (s *Source) awaitAllLeases(ctx context.Context, readErr chan error) ([]relay.Lease, error) {
	for {
		if _, err := s.heartbeat(ctx); err != nil {
			s.core.Log.Warn("wal: taking the partitions failed", "error", err)
		}
		leases, err := s.core.Store.LiveLeases(ctx, s.core.DB, s.core.RelayID, 0, 1)
		if err == nil && len(leases) == outbox.Partitions {
			return leases, nil
		}
		select {
		case err := <-readErr:
			readErr <- err // for the session's stop
			return nil, err
		default:
		}
		if !relay.Sleep(ctx, s.cfg.HeartbeatInterval/2) {
			return nil, ctx.Err()
		}
	}
}

// streamLoop delivers the reader's batches one after the other (a key's events in stream
// order) and confirms each batch's position once it is delivered; the drain runs beside it and
// has ended when streamLoop returns, so no drain of this session publishes, acknowledges or uses
// the table deliverer once the session stops it or the next session starts.
func (s *Source) streamLoop(ctx context.Context, reader *streamReader, p *parked, leases []relay.Lease, batches <-chan batch, readErr chan error) error {
	loopCtx, stop := context.WithCancel(ctx)
	barrier := make(chan struct{})
	drainErr := make(chan error, 1) // drainLoop sends at most once, so it never blocks on it
	drained := make(chan struct{})
	go func() {
		defer close(drained)
		s.drainLoop(loopCtx, p, barrier, drainErr)
	}()
	defer func() {
		stop()
		<-drained
	}()
	run(s.hooks().Streaming)
	passed := false
	for {
		var b batch
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-readErr:
			readErr <- err
			return err
		case err := <-drainErr:
			return err
		case b = <-batches:
		}
		if err := s.stream.deliver(ctx, s, p, leases, b); err != nil {
			return err
		}
		if uint64(b.confirm) > reader.confirmed.Load() { // a session may start past a re-streamed batch (eo.go)
			reader.confirmed.Store(uint64(b.confirm))
		}
		if h := s.hooks().Batch; h != nil {
			h(len(b.records))
		}
		if b.barrier && !passed {
			passed = true
			close(barrier)
		}
	}
}
