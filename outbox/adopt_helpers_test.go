package outbox_test

// The helpers of the adoption tests: the team's seed-004 table on each database, its relay
// table, writers and forwarders.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/go-sql-driver/mysql"
	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// seed004TableMySQL is seed 004's table (testsupport.Seed004Postgres) as a MariaDB/MySQL team
// creates it: the id as text, JSON columns, TIMESTAMP columns (their instants are converted to
// the relay table's UTC).
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
	table := testsupport.Seed004Postgres
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

// relayRowsWhere counts the relay table's rows matching where (? placeholders).
func (a adoptedTable) relayRowsWhere(t testing.TB, where string, args ...any) int {
	t.Helper()
	var n int
	if err := a.db.QueryRow(a.q("SELECT count(*) FROM "+a.relay.Events()+" WHERE "+where), args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
