package main

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// seed004MySQL is seed 004's table (testsupport.Seed004Postgres) as a MariaDB/MySQL team
// creates it.
const seed004MySQL = `CREATE TABLE %s (
    id CHAR(36) NOT NULL PRIMARY KEY DEFAULT (UUID()),
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

// adoptDB is the database of a CLI adoption test: PostgreSQL or MariaDB, with its seed-004
// table, its configuration and its catalog query for a table's existence.
type adoptDB struct {
	dialect outbox.Dialect
	db      *sql.DB
}

func openAdoptDB(t *testing.T, d outbox.Dialect) adoptDB {
	if d == outbox.MySQL {
		return adoptDB{dialect: d, db: testsupport.OpenMySQL(t)}
	}
	return adoptDB{dialect: d, db: testsupport.OpenPostgres(t)}
}

// createTeamTable creates the seed-004 table team, dropped with the test.
func (a adoptDB) createTeamTable(t *testing.T, team string) {
	t.Helper()
	ddl := testsupport.Seed004Postgres
	if a.dialect == outbox.MySQL {
		ddl = seed004MySQL
	}
	if _, err := a.db.Exec(fmt.Sprintf(ddl, team)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = a.db.Exec("DROP TABLE IF EXISTS " + team) })
}

// config is the relay's configuration on this database with the given table and broker part.
func (a adoptDB) config(t *testing.T, table, broker string) string {
	if a.dialect == outbox.MySQL {
		return strings.Replace(pgConfig(testsupport.MySQLDSN(t), table, broker), "dialect: postgres", "dialect: mysql", 1)
	}
	return pgConfig(testsupport.PostgresDSN(t), table, broker)
}

// tableExists counts the tables named name in the current schema or database.
func (a adoptDB) tableExists(t *testing.T, name string) int {
	if a.dialect == outbox.MySQL {
		return count(t, a.db, "SELECT count(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?", name)
	}
	return count(t, a.db, "SELECT count(*) FROM pg_class WHERE relname = $1", name)
}

// forwardTrigger is the start of the copy trigger's statement in `adopt --dry-run`.
func (a adoptDB) forwardTrigger(team, relay string) string {
	if a.dialect == outbox.MySQL {
		return "CREATE TRIGGER `outboxkit`.`" + relay + "_adopt_forward` AFTER INSERT ON `outboxkit`.`" + team + "`"
	}
	return "CREATE OR REPLACE TRIGGER " + relay + "_adopt_forward AFTER INSERT ON \"public\".\"" + team + "\""
}

// adoptMapping is cmd/outboxkit/adopt.example.yaml's mapping for table.
func adoptMapping(table string) string {
	return fmt.Sprintf(`table: %s
topic_template: "{aggregate_type}.events"
columns: {event_id: id, aggregate_id: aggregate_id, aggregate_type: aggregate_type, event_type: event_type,
  payload: payload, headers: headers, created_at: created_at, status: status, published_at: published_at,
  retry_count: retry_count, next_retry_at: next_retry_at}
`, table)
}

// `outboxkit adopt` on the seed-004 table, then `outboxkit relay` to the real Kafka: --dry-run
// changes nothing, adopt copies the pending row, a second adopt says nothing changed; events
// inserted by plain SQL end PUBLISHED with published_at, and one whose topic Kafka refuses
// ("Poison:x.events": outboxkit accepts ':' in topics, Kafka does not: INVALID_TOPIC_EXCEPTION,
// a permanent error, dead at its first attempt) ends FAILED with retry_count 1 (the Go test
// TestAdoptedPoisonEventEndsFailed covers a retriable failure, FAILED after max_attempts). --undo --drop-relay-table leaves the team's table and rows.
func TestAdoptThenRelaySeed004(t *testing.T) {
	t.Parallel()
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			testAdoptThenRelaySeed004(t, d)
		})
	}
}

func testAdoptThenRelaySeed004(t *testing.T, d outbox.Dialect) {
	a := openAdoptDB(t, d)
	db := a.db
	brokers := testsupport.KafkaBrokers(t)
	team := testsupport.UniqueName("cli_adopt")
	relay := team + "_relay"
	aggType := strings.ReplaceAll(testsupport.UniqueName("Order"), "_", "")
	testsupport.CreateKafkaTopic(t, brokers, aggType+".events")
	a.createTeamTable(t, team)
	dropTables(t, db, relay)
	insert := func(aggType, aggID string) {
		t.Helper()
		if _, err := db.Exec(d.Rebind("INSERT INTO "+team+" (aggregate_id, aggregate_type, event_type, payload, headers)"+
			` VALUES (?, ?, 'OrderCreated', '{"total": 10}', '{"source": "order-service"}')`), aggID, aggType); err != nil {
			t.Fatal(err)
		}
	}
	insert(aggType, "o-0")
	cfg := strings.Replace(a.config(t, relay, fmt.Sprintf("broker: kafka\nkafka:\n  brokers: [%s]\n", strings.Join(brokers, ", "))),
		"forwarder:\n", "forwarder:\n  max_attempts: 3\n  max_interval: 200ms\n", 1)
	// The lease TTL bounds a publish call. 2 s was too short on a loaded CI machine for the
	// broker's answer on the poison topic (and for the dead-letter topic's first metadata): each
	// attempt ended in "context deadline exceeded", a retriable error, so the poison event took 6
	// attempts instead of 1.
	cfg = strings.Replace(cfg, "lease_ttl: 2s", "lease_ttl: 15s", 1)
	dir := writeConfig(t, cfg)
	if err := os.WriteFile(filepath.Join(dir, "adopt.yaml"), []byte(adoptMapping(team)), 0o600); err != nil {
		t.Fatal(err)
	}
	res := cli(t, dir, "adopt", "--dry-run")
	if res.code != 0 || !strings.Contains(res.stdout, a.forwardTrigger(team, relay)) {
		t.Fatalf("adopt --dry-run: %s", res)
	}
	if n := a.tableExists(t, relay); n != 0 {
		t.Fatalf("adopt --dry-run created the relay table")
	}
	if res := cli(t, dir, "adopt"); res.code != 0 || !strings.Contains(res.stdout, "1 pending rows copied") {
		t.Fatalf("adopt: %s", res)
	}
	if res := cli(t, dir, "adopt"); res.code != 0 || !strings.Contains(res.stdout, "nothing changed") {
		t.Fatalf("second adopt: %s", res)
	}
	for i := 1; i < 5; i++ {
		insert(aggType, fmt.Sprintf("o-%d", i))
	}
	insert("Poison:x", "p-1")
	p := startRelay(t, dir)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) && count(t, db, "SELECT count(*) FROM "+team+" WHERE status = 'PENDING'") > 0 {
		time.Sleep(200 * time.Millisecond)
	}
	if code := p.stop(t); code != 0 {
		t.Errorf("relay exited with %d: %s", code, p.log())
	}
	if n := count(t, db, "SELECT count(*) FROM "+team+" WHERE status = 'PUBLISHED' AND published_at IS NOT NULL"); n != 5 {
		t.Errorf("%d rows PUBLISHED with published_at, want 5", n)
	}
	var status string
	var retries int
	if err := db.QueryRow("SELECT status, retry_count FROM "+team+" WHERE aggregate_type = 'Poison:x'").Scan(&status, &retries); err != nil {
		t.Fatal(err)
	}
	if status != "FAILED" || retries != 1 {
		t.Errorf("the poison event is %s with retry_count %d, want FAILED after 1 attempt (a permanent error); relay log:\n%s", status, retries, p.log())
	}
	if got := len(testsupport.ReadKafkaTopic(t, brokers, aggType+".events")); got != 5 {
		t.Errorf("%d records on %s.events, want 5", got, aggType)
	}
	if res := cli(t, dir, "adopt", "--undo", "--drop-relay-table"); res.code != 0 || !strings.Contains(res.stdout, "undone") {
		t.Fatalf("adopt --undo: %s", res)
	}
	insert(aggType, "after-undo")
	if n := count(t, db, "SELECT count(*) FROM "+team); n != 7 {
		t.Errorf("%d rows in the team's table after undo, want 7", n)
	}
	if n := a.tableExists(t, relay); n != 0 {
		t.Errorf("relay table left after --undo --drop-relay-table")
	}
}

// A mapping error is a configuration error (exit 2) naming the key, and nothing is created.
func TestAdoptMappingErrorExitsTwo(t *testing.T) {
	t.Parallel()
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			t.Parallel()
			testAdoptMappingErrorExitsTwo(t, d)
		})
	}
}

func testAdoptMappingErrorExitsTwo(t *testing.T, d outbox.Dialect) {
	a := openAdoptDB(t, d)
	team := testsupport.UniqueName("cli_adopt")
	a.createTeamTable(t, team)
	dir := writeConfig(t, a.config(t, team+"_relay", ""))
	mapping := strings.Replace(adoptMapping(team), "payload: payload", "payload: body", 1)
	if err := os.WriteFile(filepath.Join(dir, "adopt.yaml"), []byte(mapping), 0o600); err != nil {
		t.Fatal(err)
	}
	res := cli(t, dir, "adopt")
	if res.code != 2 || !strings.Contains(res.stderr, `columns.payload "body"`) {
		t.Errorf("adopt with a missing column: %s", res)
	}
	dir = writeConfig(t, a.config(t, team, ""))
	if err := os.WriteFile(filepath.Join(dir, "adopt.yaml"), []byte(adoptMapping(team)), 0o600); err != nil {
		t.Fatal(err)
	}
	if res := cli(t, dir, "adopt"); res.code != 2 || !strings.Contains(res.stderr, "is the team's table") {
		t.Errorf("adopt with database.table = the team's table: %s", res)
	}
}
