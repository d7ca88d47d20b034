package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/internal/testsupport/testdb"
	"github.com/outboxkit/outboxkit/outbox"
)

const (
	viewerSecret = "viewer-secret-0123456789"
	opsSecret    = "ops-secret-9876543210abcdef"
)

// GET /api/v1/scheduled and POST /api/v1/scheduled/cancel on a real PostgreSQL outbox: the count
// and next due time, the listing next due first, a cancel reporting each id, the write scope, and
// bad input refused with its value named.
func TestScheduledEndpoints(t *testing.T) {
	db := testdb.Open(t, outbox.Postgres)
	w := testsupport.NewOutbox(t, db, outbox.Config{Dialect: outbox.Postgres, Table: testsupport.UniqueName("api_sched")})
	next := time.Now().Add(time.Hour).UTC().Truncate(time.Microsecond)
	var events []outbox.Event
	for i, at := range []time.Time{next.Add(time.Minute), next, next.Add(2 * time.Minute)} {
		events = append(events, outbox.Event{Topic: "orders", AggregateType: "order", AggregateID: "o-" + string(rune('a'+i)),
			EventType: "Reminder", Payload: []byte("{}"), DeliverAt: at})
	}
	if err := testsupport.WriteEvents(context.Background(), db, w, events...); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE "+w.Table().Events()+" SET status = 0 WHERE event_id = $1", events[2].ID); err != nil {
		t.Fatal(err) // released by the relay
	}
	adm, err := admin.New(db, outbox.Postgres, w.Table().Events())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	read, write := filepath.Join(dir, "read"), filepath.Join(dir, "write")
	_ = os.WriteFile(read, []byte("viewer:"+viewerSecret+"\n"), 0o600)
	_ = os.WriteFile(write, []byte("ops:"+opsSecret+"\n"), 0o600)
	tokens, err := LoadTokens(read, write, nil)
	if err != nil {
		t.Fatal(err)
	}
	api, err := New(Config{Admin: adm, Tokens: tokens})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	call := func(method, path, token, body string, out any) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, bytes.NewReader([]byte(body)))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if out != nil && resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(data, out); err != nil {
				t.Fatalf("%s %s: %v\n%s", method, path, err, data)
			}
		}
		return resp.StatusCode, string(data)
	}

	var view ScheduledView
	if code, body := call("GET", "/api/v1/scheduled", viewerSecret, "", &view); code != 200 || view.Count != 2 || view.NextDue == nil ||
		!view.NextDue.Equal(next) || len(view.Events) != 2 || view.Events[0].EventID != events[1].ID.String() ||
		view.Events[1].EventID != events[0].ID.String() || *view.NextDueInSeconds <= 0 {
		t.Fatalf("GET /api/v1/scheduled: %d %s, want 2 scheduled, next due %s, %s then %s", code, body, next, events[1].ID, events[0].ID)
	}
	if code, body := call("GET", "/api/v1/scheduled?limit=1", viewerSecret, "", &view); code != 200 || view.Count != 2 || len(view.Events) != 1 {
		t.Errorf("?limit=1: %d %s", code, body)
	}
	if code, body := call("GET", "/api/v1/scheduled?limit=many", viewerSecret, "", nil); code != 400 || !strings.Contains(body, `limit: \"many\"`) {
		t.Errorf("?limit=many: %d %s, want 400 naming the value", code, body)
	}
	cancel := `{"event_ids": ["` + events[1].ID.String() + `", "` + events[2].ID.String() + `", "` + uuid.Nil.String() + `"]}`
	if code, _ := call("POST", "/api/v1/scheduled/cancel", viewerSecret, cancel, nil); code != http.StatusForbidden {
		t.Errorf("cancel with a read token: %d, want 403", code)
	}
	if code, body := call("POST", "/api/v1/scheduled/cancel", opsSecret, `{"event_ids": ["`+events[0].ID.String()+`", "soon"]}`, nil); code != 400 ||
		!strings.Contains(body, `event_ids[1]: \"soon\" is not an event id`) {
		t.Errorf("cancel with a bad id: %d %s, want 400 naming it", code, body)
	}
	if code, body := call("POST", "/api/v1/scheduled/cancel", opsSecret, `{"ids": []}`, nil); code != 400 || !strings.Contains(body, "ids") {
		t.Errorf("cancel with an unknown field: %d %s, want 400", code, body)
	}
	var res CancelView
	if code, body := call("POST", "/api/v1/scheduled/cancel", opsSecret, cancel, &res); code != 200 ||
		len(res.Cancelled) != 1 || res.Cancelled[0] != events[1].ID.String() || len(res.Released) != 1 || res.Released[0] != events[2].ID.String() ||
		len(res.NotFound) != 1 || res.NotFound[0] != uuid.Nil.String() {
		t.Fatalf("cancel: %d %s, want %s cancelled, %s released, the nil id not found", code, body, events[1].ID, events[2].ID)
	}
	if code, body := call("GET", "/api/v1/scheduled", viewerSecret, "", &view); code != 200 || view.Count != 1 || !view.NextDue.Equal(next.Add(time.Minute)) {
		t.Errorf("after the cancel: %d %s, want 1 scheduled, next due %s", code, body, next.Add(time.Minute))
	}
}
