package console

import (
	"context"
	"database/sql"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// The backlog page says how many events are scheduled and when the next is due, or that none is.
func TestBacklogShowsScheduledEvents(t *testing.T) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "outbox.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx := context.Background()
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.SQLite})
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(ctx, db, w.Table()); err != nil {
		t.Fatal(err)
	}
	mux := newTestConsoleOn(t, db, outbox.SQLite, outbox.DefaultTable, slog.New(slog.DiscardHandler))
	cookie := loginCookie(t, mux, readToken)
	page := func() string {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, "http://relay.test/console/backlog", nil)
		r.AddCookie(cookie)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, r)
		if rec.Code != http.StatusOK {
			t.Fatalf("backlog: %d %s", rec.Code, rec.Body)
		}
		return rec.Body.String()
	}
	if body := page(); !strings.Contains(body, "Scheduled: none") {
		t.Fatalf("backlog of an empty outbox does not say 'Scheduled: none':\n%s", body)
	}
	next := time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)
	var events []outbox.Event
	for _, at := range []time.Time{next.Add(time.Hour), next} {
		events = append(events, outbox.Event{Topic: "orders", AggregateType: "order", AggregateID: "o-1", EventType: "Reminder",
			Payload: []byte("{}"), DeliverAt: at})
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteTx(ctx, tx, events...); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if want, body := "Scheduled: 2, the next due at 2031-05-06T07:08:09Z", page(); !strings.Contains(body, want) {
		t.Fatalf("backlog lacks %q:\n%s", want, body)
	}
}
