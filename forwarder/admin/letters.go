package admin

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder/internal/bookkeeping"
	"github.com/outboxkit/outboxkit/forwarder/internal/sqlstore"
	"github.com/outboxkit/outboxkit/outbox"
)

// Event states as the Admin reports them (DeadLetterEntry.State, BlockedKey.State,
// ActionEvent.State). A skipped event is one an operator skipped (SkipKeys): kept in the table
// with its last error, it holds back nothing and is never published unless replayed. A
// scheduled event (docs/scheduled.md) waits for its delivery time and is not yet released to
// the relay.
const (
	StatePending   = bookkeeping.StatePending
	StateRetrying  = bookkeeping.StateRetrying
	StatePublished = bookkeeping.StatePublished
	StateDead      = bookkeeping.StateDead
	StateSkipped   = bookkeeping.StateSkipped
	StateScheduled = bookkeeping.StateScheduled
)

// EventFilter selects events for the Admin's listings and actions. Every field set narrows the
// selection (they combine with AND); the zero filter selects everything.
type EventFilter struct {
	Topic     string
	EventType string
	TenantID  string
	// Key selects the events of one ordering key.
	Key *Key
	// EventIDs selects these events only.
	EventIDs []uuid.UUID
	// ErrorContains keeps the events whose last error contains it (case-insensitive).
	ErrorContains string
	// Group keeps the events whose last error has this fingerprint (see Fingerprint).
	Group string
	// Since and Until bound the events' created_at: Since <= created_at < Until (zero: unbounded).
	Since, Until time.Time
	// Limit bounds a listing (0: DefaultListLimit); actions ignore it.
	Limit int
}

// DefaultListLimit is how many rows a listing returns when its filter sets no limit.
const DefaultListLimit = 100

// DeadLetterEntry is a dead letter as the filtered listing returns it: dead (it holds back the
// later events of its key) or skipped (it holds back nothing).
type DeadLetterEntry struct {
	DeadLetter
	State       string
	Fingerprint string
}

// EventDetail is one event of the outbox table, whole.
type EventDetail struct {
	DeadLetterEntry
	Payload     []byte
	Headers     map[string]string
	KeyHash     int64
	Partition   int
	NextAttempt time.Time
}

// ErrEventNotFound is returned by Admin.Event for an id the outbox table does not hold.
var ErrEventNotFound = errors.New("no such event in the outbox table")

// listPage is how many rows a filtered listing reads per round trip.
const listPage = 500

// FindDeadLetters lists the dead and skipped events matching f, oldest first, up to f.Limit.
func (a *Admin) FindDeadLetters(ctx context.Context, f EventFilter) ([]DeadLetterEntry, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	return a.scanLetters(ctx, f, limit)
}

// idChunk bounds the event ids one listing statement names: the databases bound the parameters
// of a statement (SQLite to 32,766), and a confirmed dry run may list more ids than that.
const idChunk = 1000

// scanLetters reads the dead and skipped rows matching f a page at a time (seq order), applies
// the filters SQL does not (error text, fingerprint) and stops at limit (0: no limit).
func (a *Admin) scanLetters(ctx context.Context, f EventFilter, limit int) ([]DeadLetterEntry, error) {
	if len(f.EventIDs) > idChunk {
		return a.scanLetterChunks(ctx, f, limit)
	}
	var out []DeadLetterEntry
	after := int64(-1)
	filter := storeFilter(f)
	for {
		rows, err := a.sql().Letters(filter, after, listPage).Query(ctx, a.db)
		if err != nil {
			return nil, fmt.Errorf("admin: list dead letters: %w", err)
		}
		page, err := scanEntries(rows)
		if err != nil {
			return nil, fmt.Errorf("admin: list dead letters: %w", err)
		}
		for _, e := range page {
			after = e.Seq
			if f.ErrorContains != "" && !containsFold(e.LastError, f.ErrorContains) {
				continue
			}
			if f.Group != "" && e.Fingerprint != f.Group {
				continue
			}
			out = append(out, e)
			if limit > 0 && len(out) == limit {
				return out, nil
			}
		}
		if len(page) < listPage {
			return out, nil
		}
	}
}

// scanLetterChunks is scanLetters for a filter naming more than idChunk event ids: it reads the
// letters of each chunk of ids and merges them in seq order, each row once.
func (a *Admin) scanLetterChunks(ctx context.Context, f EventFilter, limit int) ([]DeadLetterEntry, error) {
	var out []DeadLetterEntry
	for ids := range slices.Chunk(f.EventIDs, idChunk) {
		part := f
		part.EventIDs = ids
		entries, err := a.scanLetters(ctx, part, 0)
		if err != nil {
			return nil, err
		}
		out = append(out, entries...)
	}
	slices.SortFunc(out, func(x, y DeadLetterEntry) int { return cmp.Compare(x.Seq, y.Seq) })
	out = slices.CompactFunc(out, func(x, y DeadLetterEntry) bool { return x.Seq == y.Seq })
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// storeFilter is the part of f the database applies.
func storeFilter(f EventFilter) sqlstore.Filter {
	out := sqlstore.Filter{Topic: f.Topic, EventType: f.EventType, TenantID: f.TenantID, Since: f.Since, Until: f.Until}
	if k := f.Key; k != nil {
		out.Key = &sqlstore.FilterKey{Hash: k.Hash(), TenantID: k.TenantID, AggregateType: k.AggregateType, AggregateID: k.AggregateID}
	}
	for _, id := range f.EventIDs {
		out.EventIDs = append(out.EventIDs, id.String())
	}
	return out
}

// scanEntries reads rows of sqlstore.EntryColumns and closes them.
func scanEntries(rows *sql.Rows) ([]DeadLetterEntry, error) {
	defer rows.Close()
	var out []DeadLetterEntry
	for rows.Next() {
		var (
			e      DeadLetterEntry
			id     string
			status int
		)
		created, getCreated := outbox.TimeScanner()
		if err := rows.Scan(&e.Seq, &id, &e.Topic, &e.AggregateType, &e.AggregateID, &e.EventType, &e.TenantID,
			&e.Attempts, &e.LastError, created, &status); err != nil {
			return nil, err
		}
		if err := fillEntry(&e, id, status, getCreated); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

func fillEntry(e *DeadLetterEntry, id string, status int, getCreated func() (time.Time, error)) error {
	var err error
	if e.EventID, err = uuid.Parse(id); err != nil {
		return fmt.Errorf("row %d: event id %q: %w", e.Seq, id, err)
	}
	if e.CreatedAt, err = getCreated(); err != nil {
		return fmt.Errorf("row %d: created_at: %w", e.Seq, err)
	}
	e.State = bookkeeping.StateOf(status, e.Attempts)
	e.Fingerprint = Fingerprint(e.LastError)
	return nil
}

// Event returns one event of the outbox table with its payload and headers, in whatever state
// it is; ErrEventNotFound when the table does not hold it (never written, or published and
// removed).
func (a *Admin) Event(ctx context.Context, id uuid.UUID) (EventDetail, error) {
	var (
		d       EventDetail
		rawID   string
		status  int
		headers []byte
	)
	created, getCreated := outbox.TimeScanner()
	next, getNext := outbox.TimeScanner()
	err := a.sql().Event(id.String()).QueryRow(ctx, a.db).Scan(&d.Seq, &rawID, &d.Topic, &d.AggregateType,
		&d.AggregateID, &d.EventType, &d.TenantID, &d.Attempts, &d.LastError, created, &status,
		&d.Payload, &headers, &d.KeyHash, &d.Partition, next)
	if errors.Is(err, sql.ErrNoRows) {
		return d, fmt.Errorf("admin: event %s: %w", id, ErrEventNotFound)
	}
	if err != nil {
		return d, fmt.Errorf("admin: read event %s: %w", id, err)
	}
	if err := fillEntry(&d.DeadLetterEntry, rawID, status, getCreated); err != nil {
		return d, fmt.Errorf("admin: %w", err)
	}
	if d.NextAttempt, err = getNext(); err != nil {
		return d, fmt.Errorf("admin: event %s: next_attempt_at: %w", id, err)
	}
	if status != sqlstore.StatusPending {
		d.NextAttempt = time.Time{} // kept by a dead or skipped row, but not an attempt to come
	}
	if len(headers) > 0 {
		if err := json.Unmarshal(headers, &d.Headers); err != nil {
			return d, fmt.Errorf("admin: event %s: headers: %w", id, err)
		}
	}
	return d, nil
}

// containsFold reports whether s contains sub, ignoring case.
func containsFold(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
