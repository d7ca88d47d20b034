package outbox

import (
	"context"
	"fmt"
	"strings"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/google/uuid"
)

// The outbox table's status values the write side sets (the relay's are in the forwarder).
const (
	// statusPending is an event the relay claims in its key's order.
	statusPending = 0
	// statusScheduled is an event with a delivery time that the relay has not released yet:
	// left out of every claim, and the only status Cancel and Reschedule change.
	statusScheduled = 4
)

// maxIDsPerStatement bounds the ids of one Cancel or Reschedule statement (bind parameters).
const maxIDsPerStatement = 1000

// ScheduleResult says what [Writer.Cancel] or [Writer.Reschedule] did with each id it was given.
type ScheduleResult struct {
	// Changed are the ids cancelled (or rescheduled): they were still scheduled.
	Changed []uuid.UUID
	// Released are the ids the relay had already released: the event came due and is being
	// published, retried or was dead-lettered (its row is pending or dead). It will not be
	// withdrawn; a consumer must expect it.
	Released []uuid.UUID
	// NotFound are the ids of no scheduled, pending or dead row: published already (the
	// relay deletes a row once the broker acknowledged it, or marks it published with
	// retention), skipped by an operator, never written, or written by a transaction that has
	// not committed or rolled back (on MySQL/MariaDB also one committed after the business
	// transaction's first read: docs/scheduled.md).
	NotFound []uuid.UUID
}

// Cancel removes the scheduled events ids (see [Event.DeliverAt]) that the relay has not
// released yet, through tx, the caller's business transaction: they are never published if tx
// commits, and stay scheduled if it rolls back. The result says which ids were cancelled and
// which had been released already or are unknown. A cancel that races the relay's release is
// decided by the row lock: the release skips a row whose cancel has not ended (it waits for the
// next claim), and a cancel that finds the row released reports it Released. Duplicate ids count
// once. Only [ModeTable] keeps scheduled events.
func (w *Writer) Cancel(ctx context.Context, tx wsql.ContextExecutor, ids ...uuid.UUID) (ScheduleResult, error) {
	return w.changeScheduled(ctx, tx, "cancel", ids, func(in string) (string, []any) {
		return "DELETE FROM " + w.table.Events() + " WHERE status = " + scheduledText + " AND event_id IN " + in, nil
	})
}

// Reschedule moves the scheduled events ids that the relay has not released yet to the delivery
// time at (zero or past: as soon as the relay claims again), through tx, the caller's business
// transaction, as [Writer.Cancel] does; the result says the same.
func (w *Writer) Reschedule(ctx context.Context, tx wsql.ContextExecutor, at time.Time, ids ...uuid.UUID) (ScheduleResult, error) {
	if y := at.UTC().Year(); !at.IsZero() && (y < 1 || y > 9999) {
		return ScheduleResult{}, fmt.Errorf("outbox: reschedule to %s: the year must be between 1 and 9999", at.UTC().Format(time.RFC3339))
	}
	if at.IsZero() {
		at = time.Now()
	}
	arg := w.table.dialect.TimeArg(at)
	return w.changeScheduled(ctx, tx, "reschedule", ids, func(in string) (string, []any) {
		return "UPDATE " + w.table.Events() + " SET deliver_at = ? WHERE status = " + scheduledText + " AND event_id IN " + in, []any{arg}
	})
}

// scheduledText is statusScheduled as SQL.
const scheduledText = "4"

// changeScheduled runs the change of the scheduled rows ids, chunk by chunk, and sorts the ids
// by outcome. statement returns the change (its leading arguments before the ids) for an IN
// list of the ids.
func (w *Writer) changeScheduled(ctx context.Context, tx wsql.ContextExecutor, what string, ids []uuid.UUID,
	statement func(in string) (string, []any)) (ScheduleResult, error) {
	if tx == nil {
		return ScheduleResult{}, fmt.Errorf("outbox: %s: the transaction is nil", what)
	}
	var res ScheduleResult
	unique := distinctIDs(ids)
	for start := 0; start < len(unique); start += maxIDsPerStatement {
		chunk := unique[start:min(start+maxIDsPerStatement, len(unique))]
		changed, err := w.changeChunk(ctx, tx, chunk, statement)
		if err != nil {
			return ScheduleResult{}, fmt.Errorf("outbox: %s %d scheduled events in %s: %w", what, len(chunk), w.table, err)
		}
		var rest []uuid.UUID
		for _, id := range chunk {
			if changed[id] {
				res.Changed = append(res.Changed, id)
			} else {
				rest = append(rest, id)
			}
		}
		released, err := w.released(ctx, tx, rest)
		if err != nil {
			return ScheduleResult{}, fmt.Errorf("outbox: %s: look up %d events not scheduled in %s: %w", what, len(rest), w.table, err)
		}
		for _, id := range rest {
			if released[id] {
				res.Released = append(res.Released, id)
			} else {
				res.NotFound = append(res.NotFound, id)
			}
		}
	}
	return res, nil
}

// changeChunk changes the scheduled rows of ids and returns the ids it changed: in one
// statement with RETURNING on PostgreSQL and SQLite; on MySQL, which has no UPDATE ... RETURNING,
// by locking the scheduled rows first (SELECT ... FOR UPDATE), then changing those. On MySQL an
// id is looked for in the transaction's snapshot first (REPEATABLE READ): an event committed
// after the transaction's first read is not seen, and is reported NotFound.
func (w *Writer) changeChunk(ctx context.Context, tx wsql.ContextExecutor, ids []uuid.UUID,
	statement func(in string) (string, []any)) (map[uuid.UUID]bool, error) {
	d := w.table.dialect
	if d != MySQL {
		query, args := statement(placeholders(len(ids)))
		return queryIDs(ctx, tx, d.Rebind(query+" RETURNING "+w.idText()), append(args, idArgs(ids)...))
	}
	// Only the ids scheduled in the transaction's snapshot are locked: a locking read of an id
	// that is not scheduled would lock the index gap where it would be, and so hold up the
	// writers of new events (and, in the gap of a released row, the relay) until tx ends.
	snapshot, err := queryIDs(ctx, tx, "SELECT event_id FROM "+w.table.Events()+" WHERE status = "+scheduledText+
		" AND event_id IN "+placeholders(len(ids)), idArgs(ids))
	if err != nil || len(snapshot) == 0 {
		return nil, err
	}
	ids = ids[:0:0]
	for id := range snapshot {
		ids = append(ids, id)
	}
	locked, err := queryIDs(ctx, tx, "SELECT event_id FROM "+w.table.Events()+" WHERE status = "+scheduledText+
		" AND event_id IN "+placeholders(len(ids))+" FOR UPDATE", idArgs(ids))
	if err != nil || len(locked) == 0 {
		return locked, err
	}
	found := make([]uuid.UUID, 0, len(locked))
	for id := range locked {
		found = append(found, id)
	}
	query, args := statement(placeholders(len(found)))
	if _, err := tx.ExecContext(ctx, query, append(args, idArgs(found)...)...); err != nil {
		return nil, err
	}
	return locked, nil
}

// released returns which of ids the relay released: pending or dead rows (or rows never
// scheduled). The condition is written per status so that PostgreSQL can use its partial
// indexes of pending and dead rows instead of reading the whole table.
//
// On MySQL it takes no lock: a shared lock on a released row would make the relay's
// acknowledgement of that row (and so of its whole batch) wait for the business transaction to
// end. Its plain SELECT reads the transaction's snapshot (REPEATABLE READ), which may predate a
// release the cancel's locking read has just seen: a row still scheduled there, but not scheduled
// any more in the locking read, left the scheduled status after the snapshot, and only the relay's
// release or another transaction's cancel or reschedule does that. It is reported Released.
func (w *Writer) released(ctx context.Context, tx wsql.ContextExecutor, ids []uuid.UUID) (map[uuid.UUID]bool, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	statuses := "status = 0 OR status = 2"
	if w.table.dialect == MySQL {
		statuses += " OR status = " + scheduledText
	}
	return queryIDs(ctx, tx, w.table.dialect.Rebind("SELECT "+w.idText()+" FROM "+w.table.Events()+
		" WHERE ("+statuses+") AND event_id IN "+placeholders(len(ids))), idArgs(ids))
}

// idText is the event id as text in a select list (PostgreSQL's is a uuid).
func (w *Writer) idText() string {
	if w.table.dialect == Postgres {
		return "event_id::text"
	}
	return "event_id"
}

// queryIDs runs a query returning event ids as text and collects them.
func queryIDs(ctx context.Context, tx wsql.ContextExecutor, query string, args []any) (map[uuid.UUID]bool, error) {
	rows, err := tx.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[uuid.UUID]bool{}
	for rows.Next() {
		var text string
		if err := rows.Scan(&text); err != nil {
			return nil, err
		}
		id, err := uuid.Parse(text)
		if err != nil {
			return nil, fmt.Errorf("event id %q: %w", text, err)
		}
		out[id] = true
	}
	if withErr, ok := rows.(interface{ Err() error }); ok {
		return out, withErr.Err()
	}
	return out, nil
}

func distinctIDs(ids []uuid.UUID) []uuid.UUID {
	seen := make(map[uuid.UUID]bool, len(ids))
	out := make([]uuid.UUID, 0, len(ids))
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

func idArgs(ids []uuid.UUID) []any {
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id.String()
	}
	return args
}

// placeholders returns "(?, ?, ...)" for n values.
func placeholders(n int) string {
	return "(?" + strings.Repeat(", ?", n-1) + ")"
}
