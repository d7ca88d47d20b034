package faultinject

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/outbox"
)

// startWriters starts cfg.Writers writer goroutines; they stop after cfg.Events committed
// events, at stopWriting, or when a writer gives up.
func (e *env) startWriters() {
	writeCtx, stop := context.WithCancel(context.Background())
	e.stopWriterCtx = stop
	e.defer_(stop)
	e.writeStart = time.Now()
	e.holdWriters.Store(e.cfg.DiscardAt > 0 && e.cfg.PoisonEvents > 0)
	e.writersLeft.Store(int64(e.cfg.Writers))
	for w := range e.cfg.Writers {
		wrng := mrand.New(mrand.NewPCG(e.cfg.Seed, uint64(100+w)))
		e.writersWG.Add(1)
		go func() {
			defer e.writersWG.Done()
			defer e.writersLeft.Add(-1)
			e.writeLoop(writeCtx, wrng, w)
		}()
	}
}

// writeLoop is one writer: transactions until cfg.Events events committed, stopWrites, or 50
// transactions in a row failed before their commit (then the error goes to writeErrs). slot is
// the writer's number: it picks the installation's writer (installation.writerFor).
func (e *env) writeLoop(ctx context.Context, rng *mrand.Rand, slot int) {
	consecutive := 0
	for ctx.Err() == nil && !e.stopWrites.Load() && (e.committedCount.Load() < int64(e.cfg.Events) || e.holdWriters.Load()) {
		if e.committedCount.Load() >= int64(e.cfg.Events) {
			// Held past Events for the discard under load: a steady trickle, whatever the
			// rate, so that a slow fault before the discard (a broker restart on a loaded
			// machine) does not multiply the run's events.
			time.Sleep(250 * time.Millisecond)
		} else if e.cfg.Rate > 0 {
			due := e.writeStart.Add(time.Duration(float64(e.committedCount.Load()) / float64(e.cfg.Rate) * float64(time.Second)))
			if d := time.Until(due); d > 0 {
				time.Sleep(d)
			}
		}
		rollback := rng.Float64() < e.cfg.RollbackShare
		in := e.insts[0]
		if len(e.insts) > 1 {
			in = e.insts[rng.IntN(len(e.insts))]
		}
		poison := e.claimPoison()
		st := e.planSchedule(in, rng, poison)
		ids, ok, err := e.writeTx(ctx, in, in.writerFor(slot), rng, rollback && !poison, poison, st)
		var commitErr *commitError
		failedBeforeCommit := err != nil && !errors.As(err, &commitErr)
		if err != nil && isLockTrouble(err.Error()) {
			e.writerDeadlocks.Add(1)
		}
		if poison && (err != nil || !ok) {
			e.poisonClaimed.Add(-1) // another writer writes it again
		}
		e.record(in, ids, ok, err, failedBeforeCommit, poison)
		if failedBeforeCommit {
			e.settle(st, in.index, false, nil)
		} else {
			e.settle(st, in.index, ok, err)
		}
		if !failedBeforeCommit {
			consecutive = 0
			continue
		}
		// Nothing committed (the connection may have been cut by another test sharing the
		// database): its events count as rolled back.
		if ctx.Err() != nil {
			return
		}
		e.aborted.Add(1)
		if consecutive++; consecutive > 50 {
			e.writeErrs <- err
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// record files the outcome of one transaction's events.
func (e *env) record(in *installation, ids []string, ok bool, err error, failedBeforeCommit, poison bool) {
	now := time.Now()
	e.outMu.Lock()
	defer e.outMu.Unlock()
	for _, id := range ids {
		e.out.installation[id] = in.index
		switch {
		case failedBeforeCommit:
			e.out.rolledBack[id] = true
		case err != nil:
			e.out.uncertain[id] = true
		case ok && poison:
			e.out.poison[id] = true
		case ok:
			e.out.committed[id] = true
			e.out.committedAt[id] = now
		default:
			e.out.rolledBack[id] = true
		}
	}
	if err == nil && ok && !poison {
		e.committedCount.Add(int64(len(ids)))
	}
}

// claimPoison reports whether the calling writer is to write the next poison event: the
// PoisonEvents are spread evenly over the writes.
func (e *env) claimPoison() bool {
	for {
		n := e.poisonClaimed.Load()
		if n >= int64(e.cfg.PoisonEvents) || e.committedCount.Load() < (n+1)*int64(e.cfg.Events)/int64(e.cfg.PoisonEvents+1) {
			return false
		}
		if e.poisonClaimed.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// writersDone reports whether every writer has stopped.
func (e *env) writersDone() bool { return e.writersLeft.Load() == 0 }

// waitWriters waits for the writers and returns the error of a writer that gave up.
func (e *env) waitWriters() error {
	e.writersWG.Wait()
	e.writeDuration = time.Since(e.writeStart)
	select {
	case err := <-e.writeErrs:
		return fmt.Errorf("faultinject: writer: %w", err)
	default:
		return nil
	}
}

// writeCalm commits n more events (Config.CalmEvents) at the configured rate once every fault
// is over, with the relays left alone: they must carry these through their steady path (for
// cdc, the stream), not the catch-up a restart or a takeover does, which can hide a stream that
// delivers nothing.
func (e *env) writeCalm(ctx context.Context, n int) error {
	committed := e.committedCount.Load()
	e.cfg.Events = int(committed) + n // writeLoop's bound; the writers are done
	if e.cfg.Rate > 0 {
		e.writeStart = time.Now().Add(-time.Duration(float64(committed) / float64(e.cfg.Rate) * float64(time.Second)))
	}
	rng := mrand.New(mrand.NewPCG(e.cfg.Seed, 99))
	e.writersLeft.Store(1)
	e.writersWG.Add(1)
	go func() {
		defer e.writersWG.Done()
		defer e.writersLeft.Add(-1)
		e.writeLoop(ctx, rng, 0)
	}()
	return e.waitWriters()
}

// writeTx commits (or, when rollback, rolls back) one transaction of installation in, written by w, that
// advances 1-3 keys' counters and writes one event per key carrying the key's new sequence
// number; a poison transaction writes one event whose payload is over the broker's limit (in
// the schema variant, one whose JSON breaks the schema); st (the scheduled variant) schedules
// its last event and cancels before the commit. The
// counter row lock serializes transactions of one key, so sequence order is commit order, and
// a rolled back transaction leaves no gap among the committed numbers. It returns the event
// ids, whether they committed, and an error when the outcome is unknown or nothing was written.
func (e *env) writeTx(ctx context.Context, in *installation, w eventWriter, rng *mrand.Rand, rollback, poison bool,
	st *schedTx) ([]string, bool, error) {
	n := 1 + rng.IntN(3)
	if poison {
		n = 1
	}
	keys := make([]string, 0, n)
	for len(keys) < n {
		k := in.key(1 + rng.IntN(e.cfg.Keys))
		if poison && !e.newPoisonKey(k) {
			continue // each poison event parks a key of its own
		}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys) // one lock order for every transaction: no deadlocks among writers
	if pw, ok := w.(*pgxWALWriter); ok {
		return e.writePgxTx(ctx, in, pw, keys, rollback, poison)
	}
	tx, err := in.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, err
	}
	events, err := e.events(func(k string) (int64, error) { return e.advance(ctx, tx, in, k) }, in, keys, poison)
	if err == nil && st != nil && st.schedule {
		last := len(events) - 1
		err = e.scheduleEvent(ctx, tx, rng, &events[last])
		st.ownID = events[last].ID.String()
	}
	if err == nil {
		err = w.WriteTx(ctx, tx, events...)
	}
	if err == nil {
		err = st.cancel(ctx, tx, w)
	}
	if err != nil {
		_ = tx.Rollback()
		return nil, false, err
	}
	ids := make([]string, len(events))
	for i, ev := range events {
		ids[i] = ev.ID.String()
	}
	if rollback {
		if err := tx.Rollback(); err != nil {
			return ids, false, fmt.Errorf("rollback: %w", err)
		}
		return ids, false, nil
	}
	if err := tx.Commit(); err != nil {
		return ids, false, &commitError{err}
	}
	return ids, true, nil
}

// events advances the counters of keys (advance, in the writer's transaction) and returns one
// event per key.
func (e *env) events(advance func(k string) (int64, error), in *installation, keys []string, poison bool) ([]outbox.Event, error) {
	events := make([]outbox.Event, 0, len(keys))
	for _, k := range keys {
		seq, err := advance(k)
		if err != nil {
			return nil, fmt.Errorf("advance %s: %w", k, err)
		}
		var body any = payload{Key: k, Seq: seq}
		var path string // the field path a schema-breaking poison event breaks
		switch {
		case poison && e.reg != nil:
			body, path = e.reg.poisonPayload(k, seq)
		case poison:
			p := payload{Key: k, Seq: seq}
			if p.Pad, err = padding(e.cfg.poisonBytes()); err != nil {
				return nil, err
			}
			body = p
		}
		ev, err := outbox.NewJSONEvent(e.topic, "account", k, "AccountChanged", body)
		if err != nil {
			return nil, err
		}
		ev.ID = uuid.Must(uuid.NewV7())
		if path != "" {
			e.reg.expect(ev.ID.String(), path)
		}
		events = append(events, ev)
	}
	return events, nil
}

// padding returns about n bytes of base64 text of random bytes: compression leaves it above
// three quarters of its size.
func padding(n int) (string, error) {
	raw := make([]byte, n*3/4)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("faultinject: poison payload: %w", err)
	}
	return base64.StdEncoding.EncodeToString(raw), nil
}

// advance increments key k's counter in tx and returns the new value.
func (e *env) advance(ctx context.Context, tx *sql.Tx, in *installation, k string) (int64, error) {
	if e.cfg.Dialect == outbox.Postgres {
		var seq int64
		err := tx.QueryRowContext(ctx, "UPDATE "+in.keysTable+" SET seq = seq + 1 WHERE k = $1 RETURNING seq", k).Scan(&seq)
		return seq, err
	}
	// MariaDB has no UPDATE ... RETURNING: LAST_INSERT_ID(expr) hands the new value back.
	r, err := tx.ExecContext(ctx, "UPDATE "+in.keysTable+" SET seq = LAST_INSERT_ID(seq + 1) WHERE k = ?", k)
	if err != nil {
		return 0, err
	}
	if n, err := r.RowsAffected(); err != nil || n != 1 {
		return 0, fmt.Errorf("%d rows updated (%v)", n, err)
	}
	return r.LastInsertId()
}

// commitError is a failed COMMIT: whether the transaction committed is unknown.
type commitError struct{ err error }

func (e *commitError) Error() string { return "commit: " + e.err.Error() }
func (e *commitError) Unwrap() error { return e.err }

// newPoisonKey reports whether no poison event took key k yet (while there are keys left for
// the remaining ones), and then reserves it: the poison events park distinct keys.
func (e *env) newPoisonKey(k string) bool {
	e.outMu.Lock()
	defer e.outMu.Unlock()
	if e.poisonKeys == nil {
		e.poisonKeys = map[string]bool{}
	}
	if e.poisonKeys[k] && len(e.poisonKeys) < e.cfg.Keys {
		return false
	}
	e.poisonKeys[k] = true
	return true
}
