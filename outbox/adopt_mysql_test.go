package outbox_test

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// mysqlShapesTable is a MariaDB/MySQL outbox table of other column types than seed 004's: a
// binary(16) id, a numeric aggregate id, a topic column, a blob payload, text headers, DATETIME
// times, an enum status and a short last_error, in latin1, in the connection's database.
const mysqlShapesTable = `CREATE TABLE %s (
    uid BINARY(16) NOT NULL PRIMARY KEY,
    Tenant_Topic VARCHAR(100) NOT NULL,
    agg BIGINT NOT NULL,
    kind VARCHAR(50) NOT NULL,
    body LONGBLOB NOT NULL,
    meta TEXT NULL,
    created DATETIME(6) NOT NULL,
    sent_at DATETIME(6) NULL,
    state ENUM('new', 'sent', 'dead') NOT NULL DEFAULT 'new',
    tries SMALLINT NOT NULL DEFAULT 0,
    retry_at DATETIME(6) NULL,
    err VARCHAR(20) NULL
) ENGINE=InnoDB DEFAULT CHARSET=latin1`

// TestAdoptMySQLColumnTypes: the column types MariaDB/MySQL teams use beside seed 004's are
// copied and marked back (the relay table's own statements stand for the relay): a binary(16)
// id under its UUID, a bigint aggregate id as text, the payload's bytes unchanged, header values
// as text, DATETIME as UTC; acknowledged, dead, replayed and retried rows marked with the enum's
// values, the attempts, the next attempt and the error cut to the column's 20 characters. Column
// names match in any case, as in MariaDB/MySQL. An enum value the column lacks and a header
// value that is an object are refused, naming the key and the column.
func TestAdoptMySQLColumnTypes(t *testing.T) {
	db := testsupport.OpenMySQL(t)
	ctx := context.Background()
	name := testsupport.UniqueName("adopt_shapes")
	if _, err := db.Exec(strings.Replace(mysqlShapesTable, "%s", name, 1)); err != nil {
		t.Fatal(err)
	}
	relay, err := outbox.NewTable(outbox.MySQL, name+"_relay")
	if err != nil {
		t.Fatal(err)
	}
	cfg := outbox.AdoptConfig{Table: name, Columns: outbox.AdoptColumns{EventID: "uid", Topic: "tenant_topic",
		AggregateID: "agg", EventType: "kind", Payload: "body", Headers: "meta", CreatedAt: "created", Status: "state",
		PublishedAt: "sent_at", RetryCount: "tries", NextRetryAt: "retry_at", LastError: "err"},
		Status: outbox.AdoptStatus{Pending: "new", Published: "sent", Failed: "dead"}}
	t.Cleanup(func() {
		_ = outbox.Unadopt(context.Background(), db, relay, cfg, true)
		_, _ = db.Exec("DROP TABLE IF EXISTS " + name)
	})
	bad := cfg
	bad.Status.Failed = "FAILED"
	if _, err := outbox.Adopt(ctx, db, relay, bad); !errors.Is(err, outbox.ErrInvalidAdoptConfig) ||
		!strings.Contains(err.Error(), `status value "FAILED" is not a value of columns.status "state"`) {
		t.Errorf("Adopt with a status value the enum lacks: %v", err)
	}
	if res, err := outbox.Adopt(ctx, db, relay, cfg); err != nil || !res.Changed {
		t.Fatalf("Adopt: %+v, %v", res, err)
	}
	body := []byte{'{', 0x00, 0xff, '}'}
	created := time.Date(2024, 5, 6, 7, 8, 9, 123456000, time.UTC)
	insert := func(headers string) (string, error) {
		id := uuid.NewString()
		_, err := db.Exec("INSERT INTO "+name+" (uid, tenant_topic, agg, kind, body, meta, created) VALUES (UNHEX(REPLACE(?, '-', '')), 'billing.events', 42, 'Billed', ?, ?, ?)",
			id, body, headers, created)
		return id, err
	}
	ids := make([]string, 3)
	for i := range ids {
		if ids[i], err = insert(`{"trace": "t1", "ok": true, "none": null}`); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := insert(`{"a": {"b": 1}}`); err == nil || !strings.Contains(err.Error(), `header "a" in column meta of`) {
		t.Errorf("INSERT with an object header value: %v; want an error naming the header and the column", err)
	}
	var topic, aggID, headers string
	var payload []byte
	var at time.Time
	if err := db.QueryRow("SELECT topic, aggregate_id, payload, headers, created_at FROM "+relay.Events()+" WHERE event_id = ?", ids[0]).
		Scan(&topic, &aggID, &payload, &headers, &at); err != nil {
		t.Fatalf("the copy of %s: %v", ids[0], err)
	}
	var h map[string]any
	if err := json.Unmarshal([]byte(headers), &h); err != nil || len(h) != 2 || h["trace"] != "t1" || h["ok"] != "true" {
		t.Errorf("headers %s: want trace and ok as text, the null dropped", headers)
	}
	if topic != "billing.events" || aggID != "42" || !bytes.Equal(payload, body) || !at.Equal(created) {
		t.Errorf("copy: topic %q aggregate_id %q payload %x created_at %v; want billing.events, 42, %x, %v", topic, aggID, payload, at, body, created)
	}
	next := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, stmt := range []struct {
		query string
		args  []any
	}{
		{"DELETE FROM " + relay.Events() + " WHERE event_id = ?", []any{ids[0]}},
		{"UPDATE " + relay.Events() + " SET status = 2, attempts = 3, last_error = 'broker refused it for good' WHERE event_id = ?", []any{ids[1]}},
		{"UPDATE " + relay.Events() + " SET status = 2, attempts = 3 WHERE event_id = ?", []any{ids[2]}},
		{"UPDATE " + relay.Events() + " SET status = 0, attempts = 0, last_error = NULL WHERE event_id = ?", []any{ids[2]}},
		{"UPDATE " + relay.Events() + " SET attempts = 1, next_attempt_at = ?, last_error = 'timeout' WHERE event_id = ?", []any{next, ids[2]}},
	} {
		if _, err := db.Exec(stmt.query, stmt.args...); err != nil {
			t.Fatalf("%s: %v", stmt.query, err)
		}
	}
	want := []string{"sent 0 sent_at  ", "dead 3   broker refused it fo", "new 1  2030-01-02 03:04:05 timeout"}
	for i, id := range ids {
		var got string
		if err := db.QueryRow("SELECT CONCAT_WS(' ', state, tries, IF(sent_at IS NULL, '', 'sent_at'), COALESCE(CAST(retry_at AS DATETIME(0)), ''), COALESCE(err, ''))"+
			" FROM "+name+" WHERE uid = UNHEX(REPLACE(?, '-', ''))", id).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want[i] {
			t.Errorf("team row %d: %q, want %q", i, got, want[i])
		}
	}
}

// TestAdoptMySQLTimestampsAreInstants: TIMESTAMP columns (seed 004 on MariaDB/MySQL) hold
// instants that MariaDB shows in the session's time zone. A writer in +05:00 and a relay in
// -03:00: the copy's created_at is the instant in UTC (the relay table's DATETIME), and the
// next attempt the relay writes in UTC is the same instant in the team's next_retry_at.
func TestAdoptMySQLTimestampsAreInstants(t *testing.T) {
	a := newAdoptedTable(t, outbox.MySQL)
	ctx := context.Background()
	if _, err := outbox.Adopt(ctx, a.db, a.relay, a.cfg); err != nil {
		t.Fatal(err)
	}
	session := func(zone string) *sql.Conn {
		conn, err := a.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		if _, err := conn.ExecContext(ctx, "SET time_zone = '"+zone+"'"); err != nil {
			t.Fatal(err)
		}
		return conn
	}
	writer, relay := session("+05:00"), session("-03:00")
	id := uuid.NewString()
	if _, err := writer.ExecContext(ctx, "INSERT INTO "+a.team+" (id, aggregate_id, aggregate_type, event_type, payload, created_at)"+
		" VALUES (?, 'o-1', 'Order', 'OrderCreated', '{}', '2024-01-01 12:00:00')", id); err != nil {
		t.Fatal(err)
	}
	var created time.Time
	if err := a.db.QueryRow("SELECT created_at FROM "+a.relay.Events()+" WHERE event_id = ?", id).Scan(&created); err != nil {
		t.Fatal(err)
	}
	if want := time.Date(2024, 1, 1, 7, 0, 0, 0, time.UTC); !created.Equal(want) {
		t.Errorf("relay created_at %v, want %v (12:00 at +05:00)", created, want)
	}
	next := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	if _, err := relay.ExecContext(ctx, "UPDATE "+a.relay.Events()+" SET attempts = 1, next_attempt_at = ? WHERE event_id = ?", next, id); err != nil {
		t.Fatal(err)
	}
	var epoch int64
	if err := a.db.QueryRow("SELECT CAST(UNIX_TIMESTAMP(next_retry_at) AS SIGNED) FROM "+a.team+" WHERE id = ?", id).Scan(&epoch); err != nil {
		t.Fatal(err)
	}
	if epoch != next.Unix() {
		t.Errorf("team next_retry_at is %v, want %v", time.Unix(epoch, 0).UTC(), next)
	}
}

// TestAdoptMariaDBUUIDIDs: ids in MariaDB's UUID type (10.7 and later) are relayed under their
// text and their rows marked published when the relay acknowledges them.
func TestAdoptMariaDBUUIDIDs(t *testing.T) {
	a := newAdoptedTable(t, outbox.MySQL)
	ctx := context.Background()
	if _, err := a.db.Exec("ALTER TABLE " + a.team + " MODIFY id UUID NOT NULL"); err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Adopt(ctx, a.db, a.relay, a.cfg); err != nil {
		t.Fatal(err)
	}
	id, err := a.insert(ctx, a.db, "Order", "o-1", 1)
	if err != nil {
		t.Fatal(err)
	}
	if n := a.relayRowsWhere(t, "event_id = ?", id); n != 1 {
		t.Fatalf("%d copies of %s in the relay table, want 1", n, id)
	}
	if _, err := a.db.Exec("DELETE FROM " + a.relay.Events() + " WHERE status = 0"); err != nil {
		t.Fatal(err)
	}
	if got := a.statuses(t); got["PUBLISHED+at"] != 1 || len(got) != 1 {
		t.Errorf("team rows %v, want the one PUBLISHED with published_at", got)
	}
}
