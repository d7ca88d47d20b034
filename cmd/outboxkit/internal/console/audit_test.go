package console

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// auditLines returns the log's records with message msg.
func auditLines(log string, msg string) []map[string]any {
	var out []map[string]any
	for _, line := range strings.Split(log, "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == msg {
			out = append(out, rec)
		}
	}
	return out
}

// deadLetters writes n events of a table of the test on PostgreSQL, dead, oldest first.
func deadLetters(t *testing.T, db *sql.DB, table string, n int) []uuid.UUID {
	t.Helper()
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	var ids []uuid.UUID
	for i := range n {
		e := outbox.Event{ID: uuid.Must(uuid.NewV7()), Topic: "audit.test", AggregateType: "order", AggregateID: fmt.Sprint("o-", i),
			EventType: "OrderPlaced", Payload: []byte(`{}`)}
		tx, err := db.BeginTx(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.WriteTx(context.Background(), tx, e); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
	}
	if _, err := db.Exec("UPDATE " + table + " SET status = 2, attempts = 3, last_error = 'kafka: message too large'"); err != nil {
		t.Fatal(err)
	}
	return ids
}

// The audit of an action is written whatever the log level (here warn), with the client's
// address, the token's name, the count applied (also when the action fails after some of its
// chunks committed) and the ids of the events; failed authentications are logged, a bounded
// number of lines for many attempts.
func TestAuditCannotBeSilencedAndCountsWhatWasApplied(t *testing.T) {
	db := testsupport.OpenPostgres(t)
	table := testsupport.UniqueName("audit")
	tbl, err := outbox.NewTable(outbox.Postgres, table)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, suffix := range []string{"", "_leases", "_relays", "_migrations", "_key_locks", "_units"} {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + table + suffix + " CASCADE")
		}
		_, _ = db.Exec("DROP FUNCTION IF EXISTS " + table + "_refuse() CASCADE")
	})
	if err := outbox.Migrate(context.Background(), db, tbl); err != nil {
		t.Fatal(err)
	}
	ids := deadLetters(t, db, table, 600)
	// The database refuses to delete the 550th event: the discard's second chunk fails after
	// its first one committed.
	if _, err := db.Exec(`CREATE FUNCTION ` + table + `_refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
		IF OLD.event_id = '` + ids[549].String() + `' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN OLD; END $$`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("CREATE TRIGGER refuse BEFORE DELETE ON " + table + " FOR EACH ROW EXECUTE FUNCTION " + table + "_refuse()"); err != nil {
		t.Fatal(err)
	}
	log := &lockedBuffer{}
	mux := newTestConsoleOn(t, db, outbox.Postgres, table, slog.New(slog.NewJSONHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn})))
	act := func(body string) int {
		r := httptest.NewRequest(http.MethodPost, "http://relay.test/api/v1/actions/discard", strings.NewReader(body))
		r.RemoteAddr = "203.0.113.7:4242"
		r.Header.Set("Authorization", "Bearer "+writeToken)
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w.Code
	}
	if code := act(`{"all": true}`); code != http.StatusInternalServerError {
		t.Fatalf("a discard the database refuses half-way: %d, want 500", code)
	}
	left := count(t, db, "SELECT COUNT(*) FROM "+table)
	if left != 100 {
		t.Errorf("after a discard refused in its second chunk, %d events are left, want 100 (its first chunk of 500 committed)", left)
	}
	var rec map[string]any
	for _, r := range auditLines(log.String(), "admin action") {
		if r["dry_run"] == false && r["error"] != nil {
			rec = r
		}
	}
	if rec == nil {
		t.Errorf("no audit line of the failed discard; log:\n%.3000s", log.String())
	} else if rec["applied"] != float64(600-left) || rec["matched"] != float64(600) || rec["remote"] != "203.0.113.7:4242" || rec["who"] != "ops" {
		t.Errorf("audit of the failed discard (%d events left): applied %v, matched %v, remote %v, who %v", left, rec["applied"], rec["matched"], rec["remote"], rec["who"])
	}
	committed := map[string]any{} // event id → the committed flag of its audit line
	for _, r := range auditLines(log.String(), "admin action events") {
		list, _ := r["event_ids"].([]any)
		for _, id := range list {
			committed[fmt.Sprint(id)] = r["committed"]
		}
	}
	for i, id := range ids {
		// The first chunk of 500 committed, the second was refused and left as it was.
		if want := i < 500; committed[id.String()] != want {
			t.Errorf("event %d (%s) in the audit with committed %v, want %v", i, id, committed[id.String()], want)
			break
		}
	}
	// A successful action at log level warn.
	if code := act(`{"event_ids": ["` + ids[599].String() + `"]}`); code != http.StatusOK {
		t.Fatalf("discard one event: %d", code)
	}
	found := slices.ContainsFunc(auditLines(log.String(), "admin action"), func(r map[string]any) bool {
		return r["error"] == nil && r["applied"] == float64(1) && r["remote"] == "203.0.113.7:4242"
	})
	if !found {
		t.Errorf("no audit line of the successful discard at log level warn; log:\n%.3000s", log.String())
	}
	// Failed authentications: logged, in a bounded number of lines.
	for i := range 50 {
		r := httptest.NewRequest(http.MethodGet, "http://relay.test/api/v1/backlog", nil)
		r.RemoteAddr = "198.51.100.9:5555"
		r.Header.Set("Authorization", fmt.Sprint("Bearer guess-", i, "-0123456789abcdef"))
		mux.ServeHTTP(httptest.NewRecorder(), r)
	}
	fails := auditLines(log.String(), "admin authentication failed")
	if len(fails) == 0 || len(fails) > 10 || fails[0]["remote"] != "198.51.100.9:5555" {
		t.Errorf("50 failed authentications: %d log lines (want 1 to 10, naming the remote): %v", len(fails), fails)
	}
}

func count(t *testing.T, db *sql.DB, query string) int {
	t.Helper()
	var n int
	if err := db.QueryRow(query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
