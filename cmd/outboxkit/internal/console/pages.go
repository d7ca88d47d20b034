package console

import (
	"fmt"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/adminapi"
	"github.com/outboxkit/outboxkit/forwarder/admin"
)

// backlogData is the backlog page: topics, lease groups and cdc slots.
type backlogData struct {
	Topics []adminapi.TopicView
	Leases []adminapi.LeaseGroups
	Slots  []adminapi.SlotView
	// WAL is the wal source's slot and parked keys (nil unless the relay's source is wal).
	WAL  *adminapi.WALView
	Keys int
	// Scheduled is how many events are scheduled and when the next is due (not in Topics: they
	// are not pending).
	Scheduled adminapi.ScheduledView
	At        time.Time
}

// walParkedShown bounds the parked keys the backlog page lists.
const walParkedShown = 20

func (c *Console) backlog(_ adminapi.Token, r *http.Request) (string, view, error) {
	ctx := r.Context()
	topics, err := c.adm.Status(ctx)
	if err != nil {
		return "", view{}, err
	}
	_, leases, err := c.adm.Relays(ctx)
	if err != nil {
		return "", view{}, err
	}
	slots, err := c.adm.Slots(ctx)
	if err != nil {
		return "", view{}, err
	}
	keys, err := c.adm.BlockedKeys(ctx, admin.KeyFilter{Limit: maxCounted})
	if err != nil {
		return "", view{}, err
	}
	scheduled, err := c.adm.ScheduledSummary(ctx)
	if err != nil {
		return "", view{}, err
	}
	d := backlogData{Topics: adminapi.Topics(topics, time.Now()), Leases: adminapi.Relays(nil, leases).Leases,
		Slots: adminapi.Slots(slots), Keys: len(keys), Scheduled: adminapi.Scheduled(scheduled, nil, time.Now()), At: time.Now()}
	if slot := c.api.WALSlot(); slot != "" {
		st, err := c.adm.WAL(ctx, slot, walParkedShown)
		if err != nil {
			return "", view{}, err
		}
		v := adminapi.WAL(st)
		d.WAL = &v
	}
	return "backlog", view{Title: "Backlog", Nav: "backlog", Live: true, Data: d}, nil
}

func (c *Console) relays(_ adminapi.Token, r *http.Request) (string, view, error) {
	relays, leases, err := c.adm.Relays(r.Context())
	if err != nil {
		return "", view{}, err
	}
	return "relays", view{Title: "Relays", Nav: "relays", Data: adminapi.Relays(relays, leases)}, nil
}

func (c *Console) keys(_ adminapi.Token, r *http.Request) (string, view, error) {
	s, err := adminapi.SelectionFromQuery(r.URL.Query())
	if err != nil {
		return "", view{}, adminapi.InputError{Err: err}
	}
	f, err := s.Filter(time.Now())
	if err != nil {
		return "", view{}, adminapi.InputError{Err: err}
	}
	keys, err := c.adm.BlockedKeys(r.Context(), adminapi.KeyFilter(f))
	if err != nil {
		return "", view{}, err
	}
	return "keys", view{Title: "Blocked keys", Nav: "keys", Live: true, Data: adminapi.BlockedKeys(keys)}, nil
}

func (c *Console) groups(_ adminapi.Token, r *http.Request) (string, view, error) {
	groups, err := c.adm.FailureGroups(r.Context(), admin.EventFilter{})
	if err != nil {
		return "", view{}, err
	}
	return "groups", view{Title: "Failure groups", Nav: "groups", Data: adminapi.Groups(groups)}, nil
}

func (c *Console) letters(_ adminapi.Token, r *http.Request) (string, view, error) {
	s, err := adminapi.SelectionFromQuery(r.URL.Query())
	if err != nil {
		return "", view{}, adminapi.InputError{Err: err}
	}
	f, err := s.Filter(time.Now())
	if err != nil {
		return "", view{}, adminapi.InputError{Err: err}
	}
	letters, err := c.adm.FindDeadLetters(r.Context(), f)
	if err != nil {
		return "", view{}, err
	}
	return "letters", view{Title: "Dead letters", Nav: "letters", Data: adminapi.Events(letters)}, nil
}

func (c *Console) letter(_ adminapi.Token, r *http.Request) (string, view, error) {
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		return "", view{}, adminapi.InputError{Err: fmt.Errorf("%q is not an event id", r.PathValue("id"))}
	}
	d, err := c.adm.Event(r.Context(), id)
	if err != nil {
		return "", view{}, err
	}
	return "letter", view{Title: "Event " + id.String(), Nav: "letters", Data: adminapi.Detail(d)}, nil
}

// actionData is the result page of an action, with the selection to confirm a dry run: the
// confirmation posts the dry run's event ids with its filter (never all), so that it touches
// only the listed events that still match, not the ones that came to match since.
type actionData struct {
	Result    adminapi.ActionView
	Selection adminapi.Selection
}

func (c *Console) action(tok adminapi.Token, r *http.Request) (string, view, error) {
	if err := readForm(nil, r, maxActionBody); err != nil {
		return "", view{}, err
	}
	f := r.PostForm
	s := adminapi.Selection{EventIDs: f["event_id"], Key: f.Get("key"), Tenant: f.Get("tenant"), Topic: f.Get("topic"),
		Group: f.Get("group"), All: f.Get("all") == "1", DryRun: f.Get("dry_run") == "1"}
	res, err := c.api.Act(r.Context(), tok, r.PathValue("action"), s, "console", r.RemoteAddr)
	if err != nil {
		return "", view{}, err
	}
	v := adminapi.Action(res)
	v.Listed = len(s.EventIDs)
	return "action", view{Title: "Action: " + res.Action, Data: actionData{Result: v, Selection: s}}, nil
}

// maxCounted bounds the blocked keys the backlog page counts.
const maxCounted = 10000

// formatAge prints a duration rounded for humans: 850ms, 42s, 3m20s, 5h2m0s.
func formatAge(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	}
	return d.Round(time.Minute).String()
}

// inTime prints when a future time comes ("-" for none).
func inTime(t *time.Time) string {
	if t == nil {
		return "-"
	}
	if d := time.Until(*t); d > 0 {
		return "in " + formatAge(d)
	}
	return "due"
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n] + "…"
}
