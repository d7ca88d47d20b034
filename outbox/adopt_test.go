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
	"github.com/go-sql-driver/mysql"
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

// seed004TableMySQL is the same table as a MariaDB/MySQL team creates it: the id as text, JSON
// columns, TIMESTAMP columns (their instants are converted to the relay table's UTC).
const seed004TableMySQL = `CREATE TABLE %s (
    id CHAR(36) NOT NULL PRIMARY KEY,
    aggregate_id VARCHAR(255) NOT NULL,
    aggregate_type VARCHAR(100) NOT NULL,
    event_type VARCHAR(100) NOT NULL,
    payload JSON NOT NULL,
    headers JSON NULL,
    created_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    published_at TIMESTAMP(6) NULL DEFAULT NULL,
    status VARCHAR(20) NOT NULL DEFAULT 'PENDING',
    retry_count INT NOT NULL DEFAULT 0,
    next_retry_at TIMESTAMP(6) NULL DEFAULT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4`

// adoptDialects are the databases adoption supports: every adoption test runs on each.
var adoptDialects = []outbox.Dialect{outbox.Postgres, outbox.MySQL}

// forEachAdoptDialect runs f as a subtest per dialect of adoptDialects.
func forEachAdoptDialect(t *testing.T, f func(t *testing.T, d outbox.Dialect)) {
	for _, d := range adoptDialects {
		t.Run(string(d), func(t *testing.T) { f(t, d) })
	}
}

// adoptedTable is a team's seed-004 table in a mixed-case schema (MariaDB/MySQL: database) of
// its own, and its relay table.
type adoptedTable struct {
	dialect outbox.Dialect
	db      *sql.DB
	schema  string // quoted
	team    string // quoted
	relay   outbox.Table
	cfg     outbox.AdoptConfig
}

func newAdoptedTable(t testing.TB, d outbox.Dialect) adoptedTable {
	t.Helper()
	name := testsupport.UniqueName("adopt")
	schema := "Team_" + name
	a := adoptedTable{dialect: d}
	create := []string{fmt.Sprintf("CREATE SCHEMA %q", schema)}
	a.schema, a.db, a.team = fmt.Sprintf("%q", schema), nil, ""
	table := seed004Table
	if d == outbox.MySQL {
		a.schema, table = "`"+schema+"`", seed004TableMySQL
		create = []string{"CREATE DATABASE " + a.schema}
		a.db = testsupport.OpenMySQL(t)
	} else {
		a.db = testsupport.OpenPostgres(t)
	}
	a.team = a.schema + ".outbox_events"
	relay, err := outbox.NewTable(d, name+"_relay")
	if err != nil {
		t.Fatal(err)
	}
	a.relay = relay
	a.cfg = outbox.AdoptConfig{Schema: schema, Table: "outbox_events", TopicTemplate: "{aggregate_type|lower}.events",
		Columns: outbox.AdoptColumns{EventID: "id", AggregateID: "aggregate_id", AggregateType: "aggregate_type",
			EventType: "event_type", Payload: "payload", Headers: "headers", CreatedAt: "created_at", Status: "status",
			PublishedAt: "published_at", RetryCount: "retry_count", NextRetryAt: "next_retry_at"}}
	for _, stmt := range append(create, fmt.Sprintf(table, a.team)) {
		if _, err := a.db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_ = outbox.Unadopt(context.Background(), a.db, relay, a.cfg, true)
		drop := fmt.Sprintf("DROP SCHEMA %s CASCADE", a.schema)
		if d == outbox.MySQL {
			drop = "DROP DATABASE " + a.schema
		}
		_, _ = a.db.Exec(drop)
	})
	return a
}

// q rewrites the ? placeholders of query for the table's dialect.
func (a adoptedTable) q(query string) string { return a.dialect.Rebind(query) }

// insert writes one event the way seed 004's service does, in its own transaction.
func (a adoptedTable) insert(ctx context.Context, ex interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, aggType, aggID string, n int) (string, error) {
	id := uuid.NewString()
	_, err := ex.ExecContext(ctx, a.q("INSERT INTO "+a.team+" (id, aggregate_id, aggregate_type, event_type, payload, headers)"+
		" VALUES (?, ?, ?, 'OrderCreated', ?, ?)"), id, aggID, aggType,
		fmt.Sprintf(`{"orderId": %q, "n": %d}`, aggID, n), fmt.Sprintf(`{"event_id": %q, "source": "order-service", "n": %d}`, id, n))
	return id, err
}

func (a adoptedTable) statuses(t *testing.T) map[string]int {
	t.Helper()
	rows, err := a.db.Query("SELECT CONCAT(status, CASE WHEN published_at IS NULL THEN '' ELSE '+at' END), count(*) FROM " + a.team + " GROUP BY 1")
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

// relayExists reports whether the relay table exists.
func (a adoptedTable) relayExists(t testing.TB) bool {
	t.Helper()
	query := "SELECT count(*) FROM pg_class WHERE oid = to_regclass($1)"
	if a.dialect == outbox.MySQL {
		query = "SELECT count(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?"
	}
	var n int
	if err := a.db.QueryRow(query, a.relay.Events()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// TestAdoptBackfillsOnceAndIsIdempotent: the pending rows at adoption are copied in created_at
// order, published ones are not, and a second adoption changes nothing and says so.
func TestAdoptBackfillsOnceAndIsIdempotent(t *testing.T) {
	forEachAdoptDialect(t, testAdoptBackfillsOnceAndIsIdempotent)
}

func testAdoptBackfillsOnceAndIsIdempotent(t *testing.T, d outbox.Dialect) {
	a := newAdoptedTable(t, d)
	ctx := context.Background()
	var ids []string
	for n := range 3 {
		id, err := a.insert(ctx, a.db, "Order", "o-1", n)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if _, err := a.db.Exec(a.q("UPDATE "+a.team+" SET status = 'PUBLISHED' WHERE id = ?"), ids[0]); err != nil {
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
	var topic, headers, eventID string
	var payload []byte
	if err := a.db.QueryRow("SELECT topic, payload, headers, CAST(event_id AS CHAR(36)) FROM "+a.relay.Events()+" ORDER BY seq LIMIT 1").
		Scan(&topic, &payload, &headers, &eventID); err != nil {
		t.Fatal(err)
	}
	var body struct{ N int }
	if err := json.Unmarshal(payload, &body); err != nil || body.N != 1 || topic != "order.events" || eventID != ids[1] {
		t.Errorf("first relayed row: %s topic %q payload %s, want %s, order.events and n=1", eventID, topic, payload, ids[1])
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(headers), &got); err != nil || fmt.Sprint(got) != "map[n:1 source:order-service]" || got["n"] != "1" {
		t.Errorf("headers %s: want the reserved event_id dropped and the number carried as text", headers)
	}
}

// TestAdoptRefusesBadMappings: errors name the configuration key, before anything changes.
func TestAdoptRefusesBadMappings(t *testing.T) {
	forEachAdoptDialect(t, testAdoptRefusesBadMappings)
}

func testAdoptRefusesBadMappings(t *testing.T, d outbox.Dialect) {
	a := newAdoptedTable(t, d)
	ctx := context.Background()
	typeName := map[outbox.Dialect]string{outbox.Postgres: "character varying(100)", outbox.MySQL: "varchar(100)"}[d]
	missing := "Payload" // PostgreSQL's column names are case-sensitive
	if d == outbox.MySQL {
		missing = "body" // MariaDB/MySQL's are not: "Payload" is the payload column there
	}
	for _, tc := range []struct {
		edit func(*outbox.AdoptConfig)
		want string
	}{
		{func(c *outbox.AdoptConfig) { c.Columns.EventID = "" }, "columns.event_id is required"},
		{func(c *outbox.AdoptConfig) { c.Columns.Payload = missing }, fmt.Sprintf("columns.payload %q: table", missing)},
		{func(c *outbox.AdoptConfig) { c.Columns.RetryCount = "event_type" }, `columns.retry_count "event_type" is of type ` + typeName},
		{func(c *outbox.AdoptConfig) { c.Columns.CreatedAt = "status" }, `columns.created_at "status" is of type`},
		{func(c *outbox.AdoptConfig) { c.TopicTemplate = "{aggregate_typ|lower}.events" }, `topic_template {aggregate_typ} "aggregate_typ": table`},
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
	if a.relayExists(t) {
		t.Errorf("relay table %s after refused adoptions; want none created", a.relay)
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
	forEachAdoptDialect(t, testAdoptedPoisonEventEndsFailed)
}

func testAdoptedPoisonEventEndsFailed(t *testing.T, d outbox.Dialect) {
	a := newAdoptedTable(t, d)
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
	admin, err := forwarder.NewAdmin(a.db, a.dialect, a.relay.Events())
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
	f, err := forwarder.New(forwarder.Config{DB: a.db, Dialect: a.dialect, Table: a.relay.Events(), Publisher: pub,
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
// table still gets its events copied (PostgreSQL: the adoption's functions are SECURITY
// DEFINER; MariaDB/MySQL: triggers run with their definer's rights).
func TestAdoptedTableNeedsNoNewRightsForWriters(t *testing.T) {
	forEachAdoptDialect(t, testAdoptedTableNeedsNoNewRightsForWriters)
}

func testAdoptedTableNeedsNoNewRightsForWriters(t *testing.T, d outbox.Dialect) {
	a := newAdoptedTable(t, d)
	ctx := context.Background()
	if _, err := outbox.Adopt(ctx, a.db, a.relay, a.cfg); err != nil {
		t.Fatal(err)
	}
	role := testsupport.UniqueName("adopt_writer")
	writer := openWriterWithInsertOnly(t, a, role)
	if _, err := writer.ExecContext(ctx, a.q("INSERT INTO "+a.team+" (id, aggregate_id, aggregate_type, event_type, payload) VALUES (?, 'o-1', 'Order', 'OrderCreated', '{}')"),
		uuid.NewString()); err != nil {
		t.Fatalf("INSERT by a writer with only INSERT on the team's table: %v", err)
	}
	if n := a.relayRows(t); n != 1 {
		t.Errorf("%d rows in the relay table, want 1", n)
	}
}

// openWriterWithInsertOnly creates role, allowed only to INSERT into the team's table (and, on
// PostgreSQL, to use its schema), and connects as it.
func openWriterWithInsertOnly(t *testing.T, a adoptedTable, role string) *sql.DB {
	t.Helper()
	if a.dialect == outbox.MySQL {
		user := "'" + role + "'@'localhost'" // an anonymous ''@'localhost' would shadow '%'
		for _, stmt := range []string{"CREATE USER " + user + " IDENTIFIED BY 'w'", "GRANT INSERT ON " + a.team + " TO " + user} {
			if _, err := a.db.Exec(stmt); err != nil {
				t.Fatal(err)
			}
		}
		t.Cleanup(func() { _, _ = a.db.Exec("DROP USER " + user) })
		cfg, err := mysql.ParseDSN(testsupport.MySQLDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		cfg.User, cfg.Passwd, cfg.DBName = role, "w", a.cfg.Schema
		return testsupport.OpenDSN(t, "mysql", cfg.FormatDSN())
	}
	for _, stmt := range []string{"CREATE ROLE " + role + " LOGIN PASSWORD 'w'", "GRANT USAGE ON SCHEMA " + a.schema + " TO " + role,
		"GRANT INSERT ON " + a.team + " TO " + role} {
		if _, err := a.db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		_, _ = a.db.Exec("REVOKE ALL ON " + a.team + " FROM " + role)
		_, _ = a.db.Exec("REVOKE ALL ON SCHEMA " + a.schema + " FROM " + role)
		_, _ = a.db.Exec("DROP ROLE " + role)
	})
	dsn, err := url.Parse(testsupport.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	dsn.User = url.UserPassword(role, "w")
	return testsupport.OpenDSN(t, "pgx", dsn.String())
}

// TestAdoptTextIDs: ids held as text (PostgreSQL: CHAR(36); MariaDB/MySQL: an ASCII VARCHAR with
// a case-sensitive collation, another character set than the relay table's), in lower or upper
// case, are relayed under their UUID and their rows marked when the relay acknowledges them
// (here by the relay's own statement: the pending row deleted).
func TestAdoptTextIDs(t *testing.T) {
	forEachAdoptDialect(t, testAdoptTextIDs)
}

func testAdoptTextIDs(t *testing.T, d outbox.Dialect) {
	a := newAdoptedTable(t, d)
	ctx := context.Background()
	alter := "ALTER TABLE " + a.team + " ALTER COLUMN id DROP DEFAULT, ALTER COLUMN id TYPE CHAR(36)"
	if d == outbox.MySQL {
		alter = "ALTER TABLE " + a.team + " MODIFY id VARCHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL"
	}
	if _, err := a.db.Exec(alter); err != nil {
		t.Fatal(err)
	}
	if _, err := outbox.Adopt(ctx, a.db, a.relay, a.cfg); err != nil {
		t.Fatal(err)
	}
	ids := []string{uuid.NewString(), strings.ToUpper(uuid.NewString())}
	for _, id := range ids {
		if _, err := a.db.Exec(a.q("INSERT INTO "+a.team+" (id, aggregate_id, aggregate_type, event_type, payload) VALUES (?, 'o-1', 'Order', 'OrderCreated', '{}')"), id); err != nil {
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

// TestAdoptAgainWithAnotherMapping: adopting again with another mapping replaces the triggers
// (PostgreSQL: in the adoption's transaction; MariaDB/MySQL: dropped and created under the
// adoption's LOCK TABLES), copies none of the rows already copied, and the next event follows the
// new mapping; a third run with the same mapping changes nothing.
func TestAdoptAgainWithAnotherMapping(t *testing.T) {
	forEachAdoptDialect(t, testAdoptAgainWithAnotherMapping)
}

func testAdoptAgainWithAnotherMapping(t *testing.T, d outbox.Dialect) {
	a := newAdoptedTable(t, d)
	ctx := context.Background()
	if _, err := outbox.Adopt(ctx, a.db, a.relay, a.cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := a.insert(ctx, a.db, "Order", "o-1", 1); err != nil {
		t.Fatal(err)
	}
	cfg := a.cfg
	cfg.TopicTemplate = "{aggregate_type|lower}.v2"
	if res, err := outbox.Adopt(ctx, a.db, a.relay, cfg); err != nil || !res.Changed || res.Backfilled != 0 {
		t.Fatalf("Adopt with another topic template: %+v, %v; want the triggers changed and nothing backfilled", res, err)
	}
	if _, err := a.insert(ctx, a.db, "Order", "o-1", 2); err != nil {
		t.Fatal(err)
	}
	if res, err := outbox.Adopt(ctx, a.db, a.relay, cfg); err != nil || res.Changed || res.Backfilled != 0 {
		t.Fatalf("Adopt again with the same mapping: %+v, %v; want nothing changed", res, err)
	}
	rows, err := a.db.Query("SELECT topic FROM " + a.relay.Events() + " ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var topics []string
	for rows.Next() {
		var topic string
		if err := rows.Scan(&topic); err != nil {
			t.Fatal(err)
		}
		topics = append(topics, topic)
	}
	if strings.Join(topics, " ") != "order.events order.v2" {
		t.Errorf("relayed topics %v, want [order.events order.v2]", topics)
	}
}

// TestAdoptRefusesSQLite: SQLite has no trigger that could take a copy's key lock; adopting
// there is refused before anything runs, naming the databases that are supported.
func TestAdoptRefusesSQLite(t *testing.T) {
	relay, err := outbox.NewTable(outbox.SQLite, "outbox_events_relay")
	if err != nil {
		t.Fatal(err)
	}
	_, err = outbox.PlanAdopt(context.Background(), nil, relay, seed004Mapping)
	if !errors.Is(err, outbox.ErrInvalidAdoptConfig) || !strings.Contains(err.Error(), "PostgreSQL and MariaDB/MySQL, not sqlite") {
		t.Errorf("PlanAdopt on SQLite: %v", err)
	}
	if _, err := outbox.UnadoptStatements(relay, seed004Mapping, false); !errors.Is(err, outbox.ErrInvalidAdoptConfig) {
		t.Errorf("UnadoptStatements on SQLite: %v", err)
	}
}
