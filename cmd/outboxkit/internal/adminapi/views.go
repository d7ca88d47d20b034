// Package adminapi is the relay's admin HTTP API: JSON views of admin.Admin (forwarder/admin) (backlog,
// relays and leases, slots, units, blocked keys, dead letters) and its actions, behind bearer
// tokens with a read and a write scope. The CLI prints the same JSON views.
package adminapi

import (
	"time"

	"github.com/outboxkit/outboxkit/forwarder/admin"
)

// KeyView is an ordering key.
type KeyView struct {
	TenantID      string `json:"tenant_id"`
	AggregateType string `json:"aggregate_type"`
	AggregateID   string `json:"aggregate_id"`
}

// EventView is an event of the outbox table as the listings show it.
type EventView struct {
	EventID     string    `json:"event_id"`
	Seq         int64     `json:"seq"`
	Topic       string    `json:"topic"`
	Key         KeyView   `json:"key"`
	EventType   string    `json:"event_type"`
	State       string    `json:"state"`
	Attempts    int       `json:"attempts"`
	LastError   string    `json:"last_error"`
	Fingerprint string    `json:"fingerprint"`
	CreatedAt   time.Time `json:"created_at"`
}

// EventDetailView is one event, whole.
type EventDetailView struct {
	EventView
	KeyHash     int64             `json:"key_hash"`
	Partition   int               `json:"partition"`
	NextAttempt *time.Time        `json:"next_attempt,omitempty"`
	Headers     map[string]string `json:"headers"`
	// Payload is the payload as text when it is valid UTF-8, else PayloadBase64 holds it.
	Payload       *string `json:"payload,omitempty"`
	PayloadBase64 []byte  `json:"payload_base64,omitempty"`
}

// BlockedKeyView is a key the relay holds back.
type BlockedKeyView struct {
	Key          KeyView    `json:"key"`
	KeyHash      int64      `json:"key_hash"`
	Partition    int        `json:"partition"`
	State        string     `json:"state"`
	Head         EventView  `json:"head"`
	NextAttempt  *time.Time `json:"next_attempt,omitempty"`
	Waiting      int64      `json:"waiting"`
	BlockedSince time.Time  `json:"blocked_since"`
}

// GroupView is a failure group.
type GroupView struct {
	Fingerprint string `json:"fingerprint"`
	Normalised  string `json:"normalised_error"`
	Example     string `json:"example_error"`
	// Schema is set for a group of events that do not fit their schema.
	Schema      *SchemaFailureView `json:"schema,omitempty"`
	DeadLetters int                `json:"dead_letters"`
	Skipped     int                `json:"skipped"`
	BlockedKeys int                `json:"blocked_keys"`
	Topics      []string           `json:"topics"`
	Oldest      time.Time          `json:"oldest"`
	Newest      time.Time          `json:"newest"`
}

// SchemaFailureView is the schema a failure group's events do not fit, and where and why.
type SchemaFailureView struct {
	Subject string `json:"subject"`
	Version int    `json:"version"`
	Path    string `json:"path"`
	Reason  string `json:"reason"`
}

// ActionView is what an action touched, or would touch on a dry run.
type ActionView struct {
	Action  string `json:"action"`
	DryRun  bool   `json:"dry_run"`
	Matched int    `json:"matched"`
	Applied int64  `json:"applied"`
	// Listed is how many event ids the request carried (0 when it selected by filter only):
	// Matched of them still matched, Applied of those changed.
	Listed int         `json:"listed,omitempty"`
	Events []EventView `json:"events"`
}

// TopicView is the backlog of one topic.
type TopicView struct {
	Topic                   string     `json:"topic"`
	Pending                 int64      `json:"pending"`
	Retrying                int64      `json:"retrying"`
	Dead                    int64      `json:"dead"`
	OldestPending           *time.Time `json:"oldest_pending"`
	OldestPendingAgeSeconds *float64   `json:"oldest_pending_age_seconds"`
}

// Key returns the view of k.
func Key(k admin.Key) KeyView {
	return KeyView{TenantID: k.TenantID, AggregateType: k.AggregateType, AggregateID: k.AggregateID}
}

// Event returns the view of a listed event.
func Event(e admin.DeadLetterEntry) EventView {
	return EventView{EventID: e.EventID.String(), Seq: e.Seq, Topic: e.Topic, EventType: e.EventType, State: e.State,
		Key:      KeyView{TenantID: e.TenantID, AggregateType: e.AggregateType, AggregateID: e.AggregateID},
		Attempts: e.Attempts, LastError: e.LastError, Fingerprint: e.Fingerprint, CreatedAt: e.CreatedAt.UTC()}
}

// Events returns the views of listed events (never nil: an empty list is "[]").
func Events(entries []admin.DeadLetterEntry) []EventView {
	out := make([]EventView, 0, len(entries))
	for _, e := range entries {
		out = append(out, Event(e))
	}
	return out
}

// Detail returns the view of one whole event.
func Detail(d admin.EventDetail) EventDetailView {
	v := EventDetailView{EventView: Event(d.DeadLetterEntry), KeyHash: d.KeyHash, Partition: d.Partition,
		Headers: d.Headers, NextAttempt: optionalTime(d.NextAttempt)}
	if v.Headers == nil {
		v.Headers = map[string]string{}
	}
	if text, ok := PayloadText(d.Payload); ok {
		v.Payload = &text
	} else {
		v.PayloadBase64 = d.Payload
	}
	return v
}

// BlockedKeys returns the views of blocked keys (never nil).
func BlockedKeys(keys []admin.BlockedKey) []BlockedKeyView {
	out := make([]BlockedKeyView, 0, len(keys))
	for _, k := range keys {
		out = append(out, BlockedKeyView{Key: Key(k.Key), KeyHash: k.KeyHash, Partition: k.Partition, State: k.State,
			Head: Event(k.Head), NextAttempt: optionalTime(k.NextAttempt), Waiting: k.Waiting, BlockedSince: k.BlockedSince.UTC()})
	}
	return out
}

// Groups returns the views of failure groups (never nil).
func Groups(groups []admin.FailureGroup) []GroupView {
	out := make([]GroupView, 0, len(groups))
	for _, g := range groups {
		var sf *SchemaFailureView
		if g.Schema != nil {
			sf = &SchemaFailureView{Subject: g.Schema.Subject, Version: g.Schema.Version, Path: g.Schema.Path, Reason: g.Schema.Reason}
		}
		out = append(out, GroupView{Fingerprint: g.Fingerprint, Normalised: g.Normalised, Example: g.Example, Schema: sf,
			DeadLetters: g.DeadLetters, Skipped: g.Skipped, BlockedKeys: g.BlockedKeys, Topics: g.Topics,
			Oldest: g.Oldest.UTC(), Newest: g.Newest.UTC()})
	}
	return out
}

// Action returns the view of an action's result.
func Action(r admin.ActionResult) ActionView {
	v := ActionView{Action: r.Action, DryRun: r.DryRun, Matched: len(r.Events), Applied: r.Applied, Events: []EventView{}}
	for _, e := range r.Events {
		v.Events = append(v.Events, EventView{EventID: e.EventID.String(), Seq: e.Seq, Topic: e.Topic, Key: Key(e.Key),
			State: e.State, Fingerprint: e.Fingerprint})
	}
	return v
}

// Topics returns the backlog views, with the age of each topic's oldest pending event at now.
func Topics(topics []admin.TopicStatus, now time.Time) []TopicView {
	out := make([]TopicView, 0, len(topics))
	for _, t := range topics {
		row := TopicView{Topic: t.Topic, Pending: t.Pending, Retrying: t.Retrying, Dead: t.Dead}
		if !t.OldestPending.IsZero() {
			oldest := t.OldestPending.UTC()
			age := now.Sub(oldest).Seconds()
			row.OldestPending, row.OldestPendingAgeSeconds = &oldest, &age
		}
		out = append(out, row)
	}
	return out
}

func optionalTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
