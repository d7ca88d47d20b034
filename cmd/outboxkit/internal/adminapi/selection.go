package adminapi

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder/admin"
)

// Selection says which events a listing or an action covers: the JSON body of an action, or
// the query parameters of a listing (event_id may repeat there).
type Selection struct {
	EventIDs  []string `json:"event_ids,omitempty"`
	Key       string   `json:"key,omitempty"` // aggregate_type/aggregate_id
	Tenant    string   `json:"tenant,omitempty"`
	Topic     string   `json:"topic,omitempty"`
	Group     string   `json:"group,omitempty"`
	EventType string   `json:"type,omitempty"`
	Error     string   `json:"error,omitempty"`
	Since     string   `json:"since,omitempty"` // RFC 3339 or an age (90m)
	Until     string   `json:"until,omitempty"`
	Limit     int      `json:"limit,omitempty"`
	// All must be set for an action on everything (no other field set).
	All    bool `json:"all,omitempty"`
	DryRun bool `json:"dry_run,omitempty"`
}

// SelectionFromQuery reads a listing's selection from URL query parameters.
func SelectionFromQuery(q url.Values) (Selection, error) {
	s := Selection{EventIDs: q["event_id"], Key: q.Get("key"), Tenant: q.Get("tenant"), Topic: q.Get("topic"),
		Group: q.Get("group"), EventType: q.Get("type"), Error: q.Get("error"), Since: q.Get("since"), Until: q.Get("until")}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return s, fmt.Errorf("limit: %q is not a positive number", v)
		}
		s.Limit = n
	}
	return s, checkLimit(s.Limit)
}

// MaxLimit is the largest limit of a listing: a page of rows the relay reads, renders and sends
// in one answer, kept well under what would strain the database or the relay's memory.
const MaxLimit = 1000

// checkLimit refuses a limit above MaxLimit (or below 0), naming the value.
func checkLimit(n int) error {
	if n < 0 || n > MaxLimit {
		return fmt.Errorf("limit: %d is out of range (1 to %d; leave it out for %d)", n, MaxLimit, admin.DefaultListLimit)
	}
	return nil
}

// Narrowed reports whether any selecting field is set.
func (s Selection) Narrowed() bool {
	return len(s.EventIDs) > 0 || s.Key != "" || s.Tenant != "" || s.Topic != "" || s.Group != "" || s.EventType != "" ||
		s.Error != "" || s.Since != "" || s.Until != ""
}

// Filter returns the forwarder's filter for the selection; errors name the bad field.
func (s Selection) Filter(now time.Time) (admin.EventFilter, error) {
	f := admin.EventFilter{Topic: s.Topic, TenantID: s.Tenant, Group: s.Group, EventType: s.EventType,
		ErrorContains: s.Error, Limit: s.Limit}
	if err := checkLimit(s.Limit); err != nil {
		return f, err
	}
	if s.Key != "" {
		k, err := admin.ParseKey(s.Tenant, s.Key)
		if err != nil {
			return f, fmt.Errorf("key: %w", err)
		}
		f.Key = &k
	}
	for i, id := range s.EventIDs {
		u, err := uuid.Parse(strings.TrimSpace(id))
		if err != nil {
			return f, fmt.Errorf("event_ids[%d]: %q is not an event id", i, id)
		}
		f.EventIDs = append(f.EventIDs, u)
	}
	var err error
	if f.Since, err = ParseWhen(s.Since, now); err != nil {
		return f, fmt.Errorf("since: %w", err)
	}
	if f.Until, err = ParseWhen(s.Until, now); err != nil {
		return f, fmt.Errorf("until: %w", err)
	}
	return f, nil
}

// KeyFilter is the blocked-keys filter of an event filter.
func KeyFilter(f admin.EventFilter) admin.KeyFilter {
	return admin.KeyFilter{Topic: f.Topic, TenantID: f.TenantID, Key: f.Key, Group: f.Group, EventIDs: f.EventIDs, Limit: f.Limit}
}

// ParseWhen reads an RFC 3339 time or an age before now ("" is the zero time): the since and
// until of the API's, the console's and the CLI's filters.
func ParseWhen(s string, now time.Time) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2026-01-02T15:04:05Z) nor an age (90m)", s)
	}
	return now.Add(-d), nil
}

// ErrUnselected refuses an action that selects nothing without All.
var ErrUnselected = errors.New("select the events (event_ids, key, group, topic, tenant, ...) or set all, not both")

// Run runs an action (admin.ActionSkip, ActionReplay or ActionDiscard) on what s selects.
func Run(ctx context.Context, adm *admin.Admin, action string, s Selection) (admin.ActionResult, error) {
	if s.All == s.Narrowed() {
		return admin.ActionResult{}, InputError{ErrUnselected}
	}
	f, err := s.Filter(time.Now())
	if err != nil {
		return admin.ActionResult{}, InputError{err}
	}
	switch action {
	case admin.ActionSkip:
		return adm.SkipKeys(ctx, KeyFilter(f), s.DryRun)
	case admin.ActionReplay:
		return adm.ReplayDeadLetters(ctx, f, s.DryRun)
	case admin.ActionDiscard:
		return adm.DiscardDeadLetters(ctx, f, s.DryRun)
	}
	return admin.ActionResult{}, InputError{fmt.Errorf("unknown action %q (want skip, replay or discard)", action)}
}

// InputError is an error in what the caller asked for (HTTP 400), as opposed to one of the
// database (500).
type InputError struct{ Err error }

func (e InputError) Error() string { return e.Err.Error() }
func (e InputError) Unwrap() error { return e.Err }
