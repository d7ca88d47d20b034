package outbox_test

// Tests of adopting a team's own outbox table (docs/adopting.md) on the real PostgreSQL: the
// table of seed 004, written by plain SQL, relayed by the forwarder through outboxkit's table.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// seed004Table is the outbox table of seed 004, as a team created it.
const seed004Table = `CREATE TABLE %s (
    id UUID PRIMARY KEY DEFAULT gen_random_uuid(),
    aggregate_id VARCHAR(255) NOT NULL,
    aggregate_type VARCHAR(100) NOT NULL,
    event_type VARCHAR(100) NOT NULL,
    payload JSONB NOT NULL,
    headers JSONB DEFAULT '{}',
    created_at TIMESTAMPTZ NOT NULL DEFAULT NOW(),
    published_at TIMESTAMPTZ,
    status VARCHAR(20) NOT NULL DEFAULT 'PENDING',
    retry_count INTEGER NOT NULL DEFAULT 0,
    next_retry_at TIMESTAMPTZ
)`

// adoptedTable is a team's seed-004 table in a mixed-case schema of its own, and its relay table.
type adoptedTable struct {
	db    *sql.DB
	team  string // quoted
	relay outbox.Table
	cfg   outbox.AdoptConfig
}

func newAdoptedTable(t testing.TB) adoptedTable {
	t.Helper()
	db := testsupport.OpenPostgres(t)
	name := testsupport.UniqueName("adopt")
	schema := "Team_" + name
	a := adoptedTable{db: db, team: fmt.Sprintf("%q.outbox_events", schema)}
	relay, err := outbox.NewTable(outbox.Postgres, name+"_relay")
	if err != nil {
		t.Fatal(err)
	}
	a.relay = relay
	a.cfg = outbox.AdoptConfig{Schema: schema, Table: "outbox_events", TopicTemplate: "{aggregate_type|lower}.events",
		Columns: outbox.AdoptColumns{EventID: "id", AggregateID: "aggregate_id", AggregateType: "aggregate_type",
			EventType: "event_type", Payload: "payload", Headers: "headers", CreatedAt: "created_at", Status: "status",
			PublishedAt: "published_at", RetryCount: "retry_count", NextRetryAt: "next_retry_at"}}
	for _, stmt := range []string{fmt.Sprintf("CREATE SCHEMA %q", schema), fmt.Sprintf(seed004Table, a.team)} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = outbox.Unadopt(context.Background(), db, relay, a.cfg, true)
		_, _ = db.Exec(fmt.Sprintf("DROP SCHEMA %q CASCADE", schema))
	})
	return a
}

// insert writes one event the way seed 004's service does, in its own transaction.
func (a adoptedTable) insert(ctx context.Context, ex interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, aggType, aggID string, n int) (string, error) {
	id := uuid.NewString()
	_, err := ex.ExecContext(ctx, "INSERT INTO "+a.team+" (id, aggregate_id, aggregate_type, event_type, payload, headers)"+
		" VALUES ($1, $2, $3, 'OrderCreated', $4, $5)", id, aggID, aggType,
		fmt.Sprintf(`{"orderId": %q, "n": %d}`, aggID, n), fmt.Sprintf(`{"event_id": %q, "source": "order-service", "n": %d}`, id, n))
	return id, err
}

func (a adoptedTable) statuses(t *testing.T) map[string]int {
	t.Helper()
	rows, err := a.db.Query("SELECT status || CASE WHEN published_at IS NULL THEN '' ELSE '+at' END, count(*) FROM " + a.team + " GROUP BY 1")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			t.Fatal(err)
		}
		out[s] = n
	}
	return out
}

func (a adoptedTable) relayRows(t testing.TB) int {
	t.Helper()
	var n int
	if err := a.db.QueryRow("SELECT count(*) FROM " + a.relay.Events()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestAdoptBackfillsOnceAndIsIdempotent: the pending rows at adoption are copied in created_at
// order, published ones are not, and a second adoption changes nothing and says so.
func TestAdoptBackfillsOnceAndIsIdempotent(t *testing.T) {
	a := newAdoptedTable(t)
	ctx := context.Background()
	for n := range 3 {
		if _, err := a.insert(ctx, a.db, "Order", "o-1", n); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.db.Exec("UPDATE " + a.team + " SET status = 'PUBLISHED' WHERE payload->>'n' = '0'"); err != nil {
		t.Fatal(err)
	}
	res, err := outbox.Adopt(ctx, a.db, a.relay, a.cfg)
	if err != nil {
		t.Fatalf("Adopt: %v", err)
	}
	if !res.Changed || res.Backfilled != 2 {
		t.Fatalf("first Adopt: %+v, want changed and 2 rows backfilled", res)
	}
	res, err = outbox.Adopt(ctx, a.db, a.relay, a.cfg)
	if err != nil || res.Changed || res.Backfilled != 0 {
		t.Fatalf("second Adopt: %+v, %v; want nothing changed", res, err)
	}
	var topic, headers string
	var payload []byte
	if err := a.db.QueryRow("SELECT topic, payload, headers::text FROM "+a.relay.Events()+" ORDER BY seq LIMIT 1").Scan(&topic, &payload, &headers); err != nil {
		t.Fatal(err)
	}
	var body struct{ N int }
	if err := json.Unmarshal(payload, &body); err != nil || body.N != 1 || topic != "order.events" {
		t.Errorf("first relayed row: topic %q payload %s, want order.events and n=1", topic, payload)
	}
	if headers != `{"n": "1", "source": "order-service"}` {
		t.Errorf("headers %s: want the reserved event_id dropped and the number carried as text", headers)
	}
}

// TestAdoptRefusesBadMappings: errors name the configuration key, before anything changes.
func TestAdoptRefusesBadMappings(t *testing.T) {
	a := newAdoptedTable(t)
	ctx := context.Background()
	for _, tc := range []struct {
		edit func(*outbox.AdoptConfig)
		want string
	}{
		{func(c *outbox.AdoptConfig) { c.Columns.EventID = "" }, "columns.event_id is required"},
		{func(c *outbox.AdoptConfig) { c.Columns.Payload = "Payload" }, `columns.payload "Payload": table`},
		{func(c *outbox.AdoptConfig) { c.Columns.RetryCount = "event_type" }, "columns.retry_count \"event_type\" is of type character varying(100)"},
		{func(c *outbox.AdoptConfig) { c.TopicTemplate = "{aggregate_type} events" }, "topic_template"},
		{func(c *outbox.AdoptConfig) { c.Columns.Topic = "event_type" }, "both set"},
		{func(c *outbox.AdoptConfig) { c.Status.Published = "PUBLISHED'; DROP" }, "status.published"},
		{func(c *outbox.AdoptConfig) { c.Status.Failed = "FAILED_AFTER_ALL_RETRIES_X" }, "longer than columns.status"},
		{func(c *outbox.AdoptConfig) { c.Table = "OUTBOX_EVENTS" }, "does not exist"},
	} {
		cfg := a.cfg
		tc.edit(&cfg)
		_, err := outbox.Adopt(ctx, a.db, a.relay, cfg)
		if !errors.Is(err, outbox.ErrInvalidAdoptConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Adopt(%+v): %v; want ErrInvalidAdoptConfig naming %q", cfg, err, tc.want)
		}
	}
	var relay sql.NullString
	if err := a.db.QueryRow("SELECT to_regclass($1)::text", a.relay.Events()).Scan(&relay); err != nil || relay.Valid {
		t.Errorf("relay table %v (%v) after refused adoptions; want none created", relay, err)
	}
}

// failingPublisher refuses every message of poison.events, like a broker that refuses a topic,
// and accepts (drops) the others: the dead letters.
type failingPublisher struct{}

func (failingPublisher) Publish(topic string, _ ...*message.Message) error {
	if topic == "poison.events" {
		return errors.New("topic refused")
	}
	return nil
}
func (failingPublisher) Close() error { return nil }

// TestAdoptedPoisonEventEndsFailed: an event the broker keeps refusing ends FAILED in the team's
// table after the configured attempts, with retry_count set; a replay makes it PENDING again.
func TestAdoptedPoisonEventEndsFailed(t *testing.T) {
	a := newAdoptedTable(t)
	ctx := context.Background()
	if _, err := outbox.Adopt(ctx, a.db, a.relay, a.cfg); err != nil {
		t.Fatal(err)
	}
	id, err := a.insert(ctx, a.db, "Poison", "p-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	runForwarder(t, a, failingPublisher{}, func() bool {
		return a.statuses(t)["FAILED"] == 1
	})
	var retries int
	var next sql.NullTime
	if err := a.db.QueryRow("SELECT retry_count, next_retry_at FROM "+a.team).Scan(&retries, &next); err != nil {
		t.Fatal(err)
	}
	if retries != 3 || next.Valid {
		t.Errorf("retry_count %d, next_retry_at %v; want 3 (MaxAttempts) and NULL", retries, next)
	}
	// An operator's replay (outboxkit dead-letters replay) makes the team's row pending again.
	admin, err := forwarder.NewAdmin(a.db, outbox.Postgres, a.relay.Events())
	if err != nil {
		t.Fatal(err)
	}
	if n, err := admin.Replay(ctx, uuid.MustParse(id)); err != nil || n != 1 {
		t.Fatalf("Replay: %d, %v", n, err)
	}
	if got := a.statuses(t); got["PENDING"] != 1 || len(got) != 1 {
		t.Errorf("team rows after replay: %v, want the one PENDING", got)
	}
	if err := a.db.QueryRow("SELECT retry_count FROM " + a.team).Scan(&retries); err != nil || retries != 0 {
		t.Errorf("retry_count after replay: %d, %v; want 0", retries, err)
	}
}

// runForwarder runs a forwarder on the relay table until done reports true (or 60 s pass).
func runForwarder(t *testing.T, a adoptedTable, pub message.Publisher, done func() bool) {
	t.Helper()
	f, err := forwarder.New(forwarder.Config{DB: a.db, Dialect: outbox.Postgres, Table: a.relay.Events(), Publisher: pub,
		MaxAttempts: 3, InitialInterval: 10 * time.Millisecond, MaxInterval: 50 * time.Millisecond,
		LeaseTTL: 2 * time.Second, HeartbeatInterval: 200 * time.Millisecond, MaxPollInterval: 200 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	finished := make(chan error, 1)
	go func() { finished <- f.Run(ctx) }()
	deadline := time.Now().Add(60 * time.Second)
	for !done() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	stop()
	if err := <-finished; err != nil {
		t.Errorf("forwarder.Run: %v", err)
	}
	if !done() {
		t.Fatalf("not done after 60 s: team rows %v", a.statuses(t))
	}
}

// TestAdoptedTableNeedsNoNewRightsForWriters: a writer allowed only to INSERT into the team's
// table still gets its events copied (the adoption's functions are SECURITY DEFINER).
func TestAdoptedTableNeedsNoNewRightsForWriters(t *testing.T) {
	a := newAdoptedTable(t)
	ctx := context.Background()
	if _, err := outbox.Adopt(ctx, a.db, a.relay, a.cfg); err != nil {
		t.Fatal(err)
	}
	role := testsupport.UniqueName("adopt_writer")
	schema := a.team[:strings.LastIndexByte(a.team, '.')]
	for _, stmt := range []string{"CREATE ROLE " + role + " LOGIN PASSWORD 'w'", "GRANT USAGE ON SCHEMA " + schema + " TO " + role,
		"GRANT INSERT ON " + a.team + " TO " + role} {
		if _, err := a.db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = a.db.Exec("REVOKE ALL ON " + a.team + " FROM " + role)
		_, _ = a.db.Exec("REVOKE ALL ON SCHEMA " + schema + " FROM " + role)
		_, _ = a.db.Exec("DROP ROLE " + role)
	})
	dsn, err := url.Parse(testsupport.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	dsn.User = url.UserPassword(role, "w")
	writer := testsupport.OpenDSN(t, "pgx", dsn.String())
	if _, err := writer.ExecContext(ctx, "INSERT INTO "+a.team+" (aggregate_id, aggregate_type, event_type, payload) VALUES ('o-1', 'Order', 'OrderCreated', '{}')"); err != nil {
		t.Fatalf("INSERT by a writer with only INSERT on the team's table: %v", err)
	}
	if n := a.relayRows(t); n != 1 {
		t.Errorf("%d rows in the relay table, want 1", n)
	}
}

// TestAdoptTextIDs: ids held as CHAR(36), in lower or upper case, are relayed under their UUID
// and their rows marked when the relay acknowledges them (here by the relay's own statement: the
// pending row deleted).
func TestAdoptTextIDs(t *testing.T) {
	a := newAdoptedTable(t)
	ctx := context.Background()
	if _, err := a.db.Exec("ALTER TABLE " + a.team + " ALTER COLUMN id DROP DEFAULT, ALTER COLUMN id TYPE CHAR(36)"); err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Adopt(ctx, a.db, a.relay, a.cfg); err != nil {
		t.Fatal(err)
	}
	ids := []string{uuid.NewString(), strings.ToUpper(uuid.NewString())}
	for _, id := range ids {
		if _, err := a.db.Exec("INSERT INTO "+a.team+" (id, aggregate_id, aggregate_type, event_type, payload) VALUES ($1, 'o-1', 'Order', 'OrderCreated', '{}')", id); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.db.Exec("DELETE FROM " + a.relay.Events() + " WHERE status = 0"); err != nil {
		t.Fatal(err)
	}
	if got := a.statuses(t); got["PUBLISHED+at"] != 2 {
		t.Errorf("team rows %v, want both PUBLISHED with published_at", got)
	}
}
