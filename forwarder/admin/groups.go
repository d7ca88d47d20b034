package admin

import (
	"context"
	"slices"
	"time"
)

// FailureGroup is the dead letters and blocked keys whose last errors share a fingerprint:
// failures with one cause, whatever ids or numbers their messages name.
type FailureGroup struct {
	Fingerprint string
	// Normalised is the error text the group shares (NormaliseError); Example is one error as
	// stored.
	Normalised string
	Example    string
	// Schema names the subject version, field path and reason when the group's events do not
	// fit their schema (SchemaFailureOf); nil otherwise.
	Schema *SchemaFailure
	// DeadLetters counts the group's dead letters, Skipped its skipped events, and BlockedKeys
	// the keys whose head (dead or retrying) is in the group.
	DeadLetters int
	Skipped     int
	BlockedKeys int
	Topics      []string
	// Oldest and Newest are the created_at bounds of the group's events.
	Oldest, Newest time.Time
}

// FailureGroups groups the dead letters and blocked keys matching f by failure fingerprint,
// largest group first. f.Limit bounds the number of groups (0: DefaultListLimit).
func (a *Admin) FailureGroups(ctx context.Context, f EventFilter) ([]FailureGroup, error) {
	letters, err := a.scanLetters(ctx, f, 0)
	if err != nil {
		return nil, err
	}
	keys, err := a.scanBlockedKeys(ctx, KeyFilter{Topic: f.Topic, TenantID: f.TenantID, Key: f.Key, Group: f.Group,
		EventIDs: f.EventIDs}, 0)
	if err != nil {
		return nil, err
	}
	groups := map[string]*FailureGroup{}
	group := func(e DeadLetterEntry) *FailureGroup {
		g := groups[e.Fingerprint]
		if g == nil {
			normalised := NormaliseError(e.LastError)
			g = &FailureGroup{Fingerprint: e.Fingerprint, Normalised: normalised, Example: e.LastError,
				Schema: SchemaFailureOf(normalised), Oldest: e.CreatedAt, Newest: e.CreatedAt}
			groups[e.Fingerprint] = g
		}
		if !slices.Contains(g.Topics, e.Topic) {
			g.Topics = append(g.Topics, e.Topic)
		}
		if e.CreatedAt.Before(g.Oldest) {
			g.Oldest = e.CreatedAt
		}
		if e.CreatedAt.After(g.Newest) {
			g.Newest = e.CreatedAt
		}
		return g
	}
	for _, l := range letters {
		g := group(l)
		if l.State == StateSkipped {
			g.Skipped++
		} else {
			g.DeadLetters++
		}
	}
	for _, k := range keys {
		if !matchesText(k.Head, f) {
			continue
		}
		group(k.Head).BlockedKeys++ // a dead head is counted as a dead letter too
	}
	out := make([]FailureGroup, 0, len(groups))
	for _, g := range groups {
		slices.Sort(g.Topics)
		out = append(out, *g)
	}
	slices.SortFunc(out, func(x, y FailureGroup) int {
		if n := (y.DeadLetters + y.Skipped + y.BlockedKeys) - (x.DeadLetters + x.Skipped + x.BlockedKeys); n != 0 {
			return n
		}
		return x.Oldest.Compare(y.Oldest)
	})
	limit := f.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	return out[:min(limit, len(out))], nil
}

// matchesText applies the filters of f that blocked keys do not take (event type, error text,
// time) to a key's head.
func matchesText(e DeadLetterEntry, f EventFilter) bool {
	if f.EventType != "" && e.EventType != f.EventType {
		return false
	}
	if f.ErrorContains != "" && !containsFold(e.LastError, f.ErrorContains) {
		return false
	}
	if !f.Since.IsZero() && e.CreatedAt.Before(f.Since) {
		return false
	}
	return f.Until.IsZero() || e.CreatedAt.Before(f.Until)
}
