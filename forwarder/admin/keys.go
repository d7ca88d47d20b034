package admin

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder/internal/sqlstore"
	"github.com/outboxkit/outboxkit/outbox"
)

// Key is an ordering key: the events of one aggregate of one tenant, published in order.
type Key struct {
	TenantID      string
	AggregateType string
	AggregateID   string
}

// Hash is the key's hash, as stored in the outbox table's key_hash column.
func (k Key) Hash() int64 { return outbox.KeyHash(k.TenantID, k.AggregateType, k.AggregateID) }

// String returns "type/id", prefixed by "tenant:" when the key has a tenant.
func (k Key) String() string {
	s := k.AggregateType + "/" + k.AggregateID
	if k.TenantID != "" {
		s = k.TenantID + ":" + s
	}
	return s
}

// ParseKey reads "type/id" (aggregate type up to the first slash, the rest is the aggregate id)
// for the given tenant ("" for none).
func ParseKey(tenant, s string) (Key, error) {
	typ, id, ok := strings.Cut(s, "/")
	if !ok || id == "" {
		return Key{}, fmt.Errorf("admin: key %q: want aggregate_type/aggregate_id (such as order/o-1)", s)
	}
	return Key{TenantID: tenant, AggregateType: typ, AggregateID: id}, nil
}

// BlockedKey is an ordering key the relay holds back: its head, the first of its events that
// failed, is dead (it waits for an operator) or retrying (the relay tries it again at
// NextAttempt). The later events of the key wait behind it; every other key flows.
type BlockedKey struct {
	Key       Key
	KeyHash   int64
	Partition int
	// State is StateDead or StateRetrying.
	State string
	// Head is the blocking event; its Fingerprint is its failure group.
	Head        DeadLetterEntry
	NextAttempt time.Time
	// Waiting counts the key's pending events behind the head.
	Waiting int64
	// BlockedSince is the head's created_at: the table records no time of the first failure,
	// so the key has been held back for at most this long.
	BlockedSince time.Time
}

// KeyFilter selects blocked keys: every field set narrows the selection.
type KeyFilter struct {
	Topic    string
	TenantID string
	Key      *Key
	// Group keeps the keys whose head's last error has this fingerprint.
	Group string
	// EventIDs keeps the keys whose head is one of these events.
	EventIDs []uuid.UUID
	// Limit bounds a listing (0: DefaultListLimit); SkipKeys ignores it.
	Limit int
}

// BlockedKeys lists the keys the relay holds back, oldest head first, up to f.Limit.
func (a *Admin) BlockedKeys(ctx context.Context, f KeyFilter) ([]BlockedKey, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	return a.scanBlockedKeys(ctx, f, limit)
}

// scanBlockedKeys reads the blocked keys matching f a page at a time, in head order, and stops
// at limit (0: no limit).
func (a *Admin) scanBlockedKeys(ctx context.Context, f KeyFilter, limit int) ([]BlockedKey, error) {
	filter := storeFilter(EventFilter{Topic: f.Topic, TenantID: f.TenantID, Key: f.Key, EventIDs: f.EventIDs})
	var out []BlockedKey
	after := int64(-1)
	for {
		page, err := a.blockedPage(ctx, a.sql().BlockedKeys(filter, after, listPage))
		if err != nil {
			return nil, err
		}
		for _, k := range page {
			after = k.Head.Seq
			if f.Group != "" && k.Head.Fingerprint != f.Group {
				continue
			}
			out = append(out, k)
			if limit > 0 && len(out) == limit {
				return out, nil
			}
		}
		if len(page) < listPage {
			return out, nil
		}
	}
}

func (a *Admin) blockedPage(ctx context.Context, query sqlstore.Query) ([]BlockedKey, error) {
	rows, err := query.Query(ctx, a.db)
	if err != nil {
		return nil, fmt.Errorf("admin: list blocked keys: %w", err)
	}
	defer rows.Close()
	var out []BlockedKey
	for rows.Next() {
		var (
			k      BlockedKey
			id     string
			status int
		)
		h := &k.Head
		created, getCreated := outbox.TimeScanner()
		next, getNext := outbox.TimeScanner()
		if err := rows.Scan(&h.Seq, &id, &h.Topic, &h.AggregateType, &h.AggregateID, &h.EventType, &h.TenantID,
			&h.Attempts, &h.LastError, created, &status, &k.KeyHash, &k.Partition, next, &k.Waiting); err != nil {
			return nil, fmt.Errorf("admin: list blocked keys: %w", err)
		}
		if err := fillEntry(h, id, status, getCreated); err != nil {
			return nil, fmt.Errorf("admin: list blocked keys: %w", err)
		}
		if k.NextAttempt, err = getNext(); err != nil {
			return nil, fmt.Errorf("admin: list blocked keys: row %d: next_attempt_at: %w", h.Seq, err)
		}
		if status == sqlstore.StatusDead {
			k.NextAttempt = time.Time{}
		}
		k.Key = Key{TenantID: h.TenantID, AggregateType: h.AggregateType, AggregateID: h.AggregateID}
		k.State, k.BlockedSince = h.State, h.CreatedAt
		out = append(out, k)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("admin: list blocked keys: %w", err)
	}
	return out, nil
}
