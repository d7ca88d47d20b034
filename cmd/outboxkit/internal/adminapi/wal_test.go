package adminapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/internal/testsupport/testdb"
	"github.com/outboxkit/outboxkit/outbox"
)

// GET /api/v1/wal on a real PostgreSQL outbox with a registered wal slot and two parked keys
// (rows in the table; one of them dead): the slot usable and not streamed, its positions, the
// parked keys oldest first with their rows, ?limit, a bad limit refused naming it, and 404 for a
// relay whose source is not wal.
func TestWALEndpoint(t *testing.T) {
	db := testdb.Open(t, outbox.Postgres)
	w := testsupport.NewOutbox(t, db, outbox.Config{Dialect: outbox.Postgres, Table: testsupport.UniqueName("api_wal")})
	slot := testsupport.UniqueName("api_wal")
	t.Cleanup(func() {
		_, _ = db.Exec("SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = $1", slot)
		_, _ = db.Exec("DROP PUBLICATION IF EXISTS " + slot)
	})
	ctx := context.Background()
	if _, err := outbox.CreateWALSlot(ctx, db, w.Table(), slot); err != nil {
		t.Fatal(err)
	}
	var events []outbox.Event
	for _, id := range []string{"p", "q", "p"} {
		events = append(events, outbox.Event{Topic: "orders", AggregateType: "order", AggregateID: id, EventType: "Parked", Payload: []byte("{}")})
	}
	if err := testsupport.WriteEvents(ctx, db, w, events...); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("UPDATE "+w.Table().Events()+" SET status = 2 WHERE event_id = $1", events[1].ID); err != nil {
		t.Fatal(err)
	}
	adm, err := admin.New(db, outbox.Postgres, w.Table().Events())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	read := filepath.Join(dir, "read")
	_ = os.WriteFile(read, []byte("viewer:"+viewerSecret+"\n"), 0o600)
	tokens, err := LoadTokens(read, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(walSlot string) *httptest.Server {
		api, err := New(Config{Admin: adm, Tokens: tokens, WALSlot: walSlot})
		if err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		api.Register(mux)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return srv
	}
	get := func(srv *httptest.Server, path string, out any) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+viewerSecret)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		if out != nil && resp.StatusCode == http.StatusOK {
			if err := json.Unmarshal(data, out); err != nil {
				t.Fatalf("GET %s: %v\n%s", path, err, data)
			}
		}
		return resp.StatusCode, string(data)
	}
	srv := serve(slot)
	var v WALView
	code, body := get(srv, "/api/v1/wal", &v)
	if code != 200 || v.Slot != slot || !v.Registered || !v.Exists || !v.Usable || v.Lost || v.Active || v.ServerLSN == "" ||
		v.ConfirmedLSN == "" || v.LagBytes < 0 || v.RelayLSN != "" || v.ParkedKeys != 2 || len(v.Parked) != 2 {
		t.Fatalf("GET /api/v1/wal: %d %s, want slot %s usable, idle, and 2 parked keys", code, body, slot)
	}
	if p, q := v.Parked[0], v.Parked[1]; p.Key.AggregateID != "p" || p.Rows != 2 || p.Dead != 0 || q.Key.AggregateID != "q" || q.Rows != 1 || q.Dead != 1 {
		t.Errorf("parked keys %+v, want p (2 rows) then q (1 row, dead)", v.Parked)
	}
	if code, body := get(srv, "/api/v1/wal?limit=1", &v); code != 200 || v.ParkedKeys != 2 || len(v.Parked) != 1 {
		t.Errorf("?limit=1: %d %s, want 1 of 2 parked keys", code, body)
	}
	if code, body := get(srv, "/api/v1/wal?limit=0", nil); code != 400 || !strings.Contains(body, `limit: \"0\"`) {
		t.Errorf("?limit=0: %d %s, want 400 naming the value", code, body)
	}
	if code, body := get(serve(""), "/api/v1/wal", nil); code != http.StatusNotFound || !strings.Contains(body, "not wal") {
		t.Errorf("a relay whose source is not wal: %d %s, want 404", code, body)
	}
}
