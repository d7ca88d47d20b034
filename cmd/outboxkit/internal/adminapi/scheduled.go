package adminapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/outbox"
)

// The scheduled events' endpoints (docs/admin-api.md): GET /api/v1/scheduled and
// POST /api/v1/scheduled/cancel, what admin.Admin.ScheduledSummary, ScheduledEvents and
// CancelScheduled do.

// defaultScheduledLimit is how many scheduled events GET /api/v1/scheduled lists without ?limit.
const defaultScheduledLimit = 100

// maxScheduledLimit bounds ?limit.
const maxScheduledLimit = 10000

// ScheduledView is GET /api/v1/scheduled: how many events are scheduled, when the next is due,
// and the first of them, next due first.
type ScheduledView struct {
	Count int64 `json:"count"`
	// NextDue is the earliest delivery time (null when none); NextDueInSeconds is how long until
	// it (negative when it is due and the relay has not released it yet).
	NextDue          *time.Time           `json:"next_due"`
	NextDueInSeconds *float64             `json:"next_due_in_seconds"`
	Events           []ScheduledEventView `json:"events"`
}

// ScheduledEventView is one scheduled event.
type ScheduledEventView struct {
	EventID       string    `json:"event_id"`
	Seq           int64     `json:"seq"`
	Topic         string    `json:"topic"`
	AggregateType string    `json:"aggregate_type"`
	AggregateID   string    `json:"aggregate_id"`
	EventType     string    `json:"event_type"`
	TenantID      string    `json:"tenant_id"`
	CreatedAt     time.Time `json:"created_at"`
	DeliverAt     time.Time `json:"deliver_at"`
}

// Scheduled returns the view of a summary and its events; the time until the next is taken at now.
func Scheduled(sum admin.ScheduledSummary, events []admin.ScheduledEvent, now time.Time) ScheduledView {
	v := ScheduledView{Count: sum.Count, Events: make([]ScheduledEventView, 0, len(events))}
	if !sum.NextDue.IsZero() {
		next := sum.NextDue.UTC()
		in := next.Sub(now).Seconds()
		v.NextDue, v.NextDueInSeconds = &next, &in
	}
	for _, e := range events {
		v.Events = append(v.Events, ScheduledEventView{EventID: e.EventID.String(), Seq: e.Seq, Topic: e.Topic, AggregateType: e.AggregateType,
			AggregateID: e.AggregateID, EventType: e.EventType, TenantID: e.TenantID, CreatedAt: e.CreatedAt.UTC(), DeliverAt: e.DeliverAt.UTC()})
	}
	return v
}

// scheduled serves GET /api/v1/scheduled[?limit=n].
func (a *API) scheduled(r *http.Request) (any, error) {
	limit := defaultScheduledLimit
	if text := r.URL.Query().Get("limit"); text != "" {
		n, err := strconv.Atoi(text)
		if err != nil || n <= 0 || n > maxScheduledLimit {
			return nil, InputError{fmt.Errorf("limit: %q is not a number from 1 to %d", text, maxScheduledLimit)}
		}
		limit = n
	}
	sum, err := a.cfg.Admin.ScheduledSummary(r.Context())
	if err != nil {
		return nil, err
	}
	events, err := a.cfg.Admin.ScheduledEvents(r.Context(), limit)
	if err != nil {
		return nil, err
	}
	return Scheduled(sum, events, time.Now()), nil
}

// CancelRequest is the body of POST /api/v1/scheduled/cancel.
type CancelRequest struct {
	EventIDs []string `json:"event_ids"`
}

// CancelView is the answer of POST /api/v1/scheduled/cancel: each id given, in one of three
// groups (outbox.ScheduleResult's Changed, Released, NotFound).
type CancelView struct {
	Cancelled []string `json:"cancelled"`
	Released  []string `json:"released"`
	NotFound  []string `json:"not_found"`
}

// cancelScheduled serves POST /api/v1/scheduled/cancel and audits it.
func (a *API) cancelScheduled(tok Token, r *http.Request) (any, error) {
	var req CancelRequest
	dec := json.NewDecoder(http.MaxBytesReader(nil, r.Body, maxActionBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, statusError{http.StatusRequestEntityTooLarge, fmt.Errorf("request body: more than %d bytes", maxActionBody)}
		}
		return nil, InputError{fmt.Errorf("request body: %w", err)}
	}
	if len(req.EventIDs) == 0 {
		return nil, InputError{errors.New("event_ids: no event id given")}
	}
	ids := make([]uuid.UUID, 0, len(req.EventIDs))
	for i, text := range req.EventIDs {
		id, err := uuid.Parse(text)
		if err != nil {
			return nil, InputError{fmt.Errorf("event_ids[%d]: %q is not an event id", i, text)}
		}
		ids = append(ids, id)
	}
	res, err := a.cfg.Admin.CancelScheduled(r.Context(), ids...)
	a.auditCancel(r, tok, ids, res, err)
	if err != nil {
		return nil, err
	}
	return CancelView{Cancelled: idTexts(res.Changed), Released: idTexts(res.Released), NotFound: idTexts(res.NotFound)}, nil
}

// auditCancel logs a cancel of scheduled events (whatever the log level): who, from where, the
// ids cancelled and how many were released or not found.
func (a *API) auditCancel(r *http.Request, tok Token, ids []uuid.UUID, res outbox.ScheduleResult, err error) {
	attrs := []slog.Attr{slog.String("who", tok.Name), slog.String("remote", r.RemoteAddr), slog.String("via", "api"),
		slog.String("action", "cancel-scheduled"), slog.Int("listed", len(ids)), slog.Any("cancelled", idTexts(res.Changed)),
		slog.Int("released", len(res.Released)), slog.Int("not_found", len(res.NotFound))}
	level := slog.LevelInfo
	if err != nil {
		level = slog.LevelWarn
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	audit(r.Context(), a.cfg.Logger, level, "admin action", attrs...)
}

func idTexts(ids []uuid.UUID) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, id.String())
	}
	return out
}
