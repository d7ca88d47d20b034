package admin

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder/internal/sqlstore"
)

// Actions an operator takes on blocked keys and dead letters.
const (
	ActionSkip    = "skip"
	ActionReplay  = "replay"
	ActionDiscard = "discard"
)

// ActionEvent is one event an action touches (or, on a dry run, would touch).
type ActionEvent struct {
	EventID     uuid.UUID
	Seq         int64
	Key         Key
	Topic       string
	State       string
	Fingerprint string
}

// ActionResult says what an action touched: on a dry run, the events it would touch, with
// Applied 0 and nothing changed.
type ActionResult struct {
	Action string
	DryRun bool
	Events []ActionEvent
	// Applied counts the rows changed: fewer than len(Events) when a relay or another operator
	// changed some of them between the selection and the change.
	Applied int64
	// Committed is how many of Events, from the first, were in chunks whose transaction
	// committed: all of them after a success, fewer when an error stopped the action part-way
	// (the rest were left as they were).
	Committed int
}

// actionChunk bounds the events one statement changes.
const actionChunk = 500

// SkipKeys moves the head of every blocked key matching f out of its key's way: the head
// becomes skipped (kept in the table with its last error, listed with the dead letters, never
// published unless replayed), and the later events of the key flow again. Nothing is lost: a
// skipped event can be replayed (it is then published after the events that overtook it) or
// discarded. A zero filter skips every blocked key.
func (a *Admin) SkipKeys(ctx context.Context, f KeyFilter, dryRun bool) (ActionResult, error) {
	keys, err := a.scanBlockedKeys(ctx, f, 0)
	if err != nil {
		return ActionResult{}, err
	}
	res := ActionResult{Action: ActionSkip, DryRun: dryRun}
	for _, k := range keys {
		res.Events = append(res.Events, actionEvent(k.Head))
	}
	if dryRun || len(keys) == 0 {
		return res, nil
	}
	res.Applied, res.Committed, err = a.applyChunks(ctx, res.Events, func(tx *sql.Tx, seqs, hashes []any) (int64, error) {
		n, err := a.exec(ctx, tx, a.sql().SkipHeads(seqs))
		if err != nil {
			return 0, err
		}
		return n, a.releaseKeys(ctx, tx, hashes)
	})
	return res, err
}

// ReplayDeadLetters makes the dead and skipped events matching f pending again with fresh
// attempts: a running relay publishes them, then the later events of their keys, in order (a
// skipped event comes after the events that overtook it). A zero filter replays them all.
func (a *Admin) ReplayDeadLetters(ctx context.Context, f EventFilter, dryRun bool) (ActionResult, error) {
	return a.actOnLetters(ctx, ActionReplay, f, dryRun, func(tx *sql.Tx, seqs, _ []any) (int64, error) {
		// A next attempt time (now): the cdc source leaves keys with one to its retry path,
		// which publishes them in order (as Admin.Replay does).
		return a.exec(ctx, tx, a.sql().ReplayLetters(seqs))
	})
}

// DiscardDeadLetters deletes the dead and skipped events matching f for good, releasing the
// later events of their keys. A zero filter discards them all.
func (a *Admin) DiscardDeadLetters(ctx context.Context, f EventFilter, dryRun bool) (ActionResult, error) {
	return a.actOnLetters(ctx, ActionDiscard, f, dryRun, func(tx *sql.Tx, seqs, hashes []any) (int64, error) {
		if err := a.releaseKeys(ctx, tx, hashes); err != nil {
			return 0, err
		}
		return a.exec(ctx, tx, a.sql().DiscardLetters(seqs))
	})
}

func (a *Admin) actOnLetters(ctx context.Context, action string, f EventFilter, dryRun bool,
	apply func(tx *sql.Tx, seqs, hashes []any) (int64, error)) (ActionResult, error) {
	letters, err := a.scanLetters(ctx, f, 0)
	if err != nil {
		return ActionResult{}, err
	}
	res := ActionResult{Action: action, DryRun: dryRun}
	for _, l := range letters {
		res.Events = append(res.Events, actionEvent(l))
	}
	if dryRun || len(letters) == 0 {
		return res, nil
	}
	res.Applied, res.Committed, err = a.applyChunks(ctx, res.Events, apply)
	return res, err
}

// releaseKeys gives the pending events of the keys (their hashes) that have no next attempt
// time one (now), so that the cdc source leaves them to its retry path, in order, rather than
// letting newer events of the key overtake them; the polling source claims them as before.
func (a *Admin) releaseKeys(ctx context.Context, tx *sql.Tx, hashes []any) error {
	_, err := a.exec(ctx, tx, a.sql().ReleaseKeys(hashes))
	return err
}

// applyChunks runs apply on the events' sequence numbers and distinct key hashes, a chunk per
// transaction, and sums what it changed; committed counts the events of the chunks that
// committed (a chunk whose commit failed counts as not committed).
func (a *Admin) applyChunks(ctx context.Context, events []ActionEvent, apply func(tx *sql.Tx, seqs, hashes []any) (int64, error)) (applied int64, committed int, err error) {
	for start := 0; start < len(events); start += actionChunk {
		chunk := events[start:min(start+actionChunk, len(events))]
		var seqs, hashes []any
		seen := map[int64]bool{}
		for _, e := range chunk {
			seqs = append(seqs, e.Seq)
			if h := e.Key.Hash(); !seen[h] {
				seen[h] = true
				hashes = append(hashes, h)
			}
		}
		tx, err := a.db.BeginTx(ctx, nil)
		if err != nil {
			return applied, committed, fmt.Errorf("admin: begin: %w", err)
		}
		n, err := apply(tx, seqs, hashes)
		if err != nil {
			_ = tx.Rollback()
			return applied, committed, err
		}
		if err := tx.Commit(); err != nil {
			return applied, committed, fmt.Errorf("admin: commit: %w", err)
		}
		applied += n
		committed += len(chunk)
	}
	return applied, committed, nil
}

func (a *Admin) exec(ctx context.Context, tx *sql.Tx, query sqlstore.Query) (int64, error) {
	res, err := query.Exec(ctx, tx)
	if err != nil {
		return 0, fmt.Errorf("admin: %w", err)
	}
	return res.RowsAffected()
}

func actionEvent(e DeadLetterEntry) ActionEvent {
	return ActionEvent{EventID: e.EventID, Seq: e.Seq, Topic: e.Topic, State: e.State, Fingerprint: e.Fingerprint,
		Key: Key{TenantID: e.TenantID, AggregateType: e.AggregateType, AggregateID: e.AggregateID}}
}
