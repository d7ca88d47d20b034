package outbox_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestAdoptedTriggerIgnoresWritersTempTables: the copy trigger runs with the adoption's rights
// (SECURITY DEFINER), so a writer of the team's table must not be able to steer it to objects
// of its own. A temporary table named like the relay table comes first in every session's
// search path unless pg_temp is named last: the copy would then go into the writer's table, and
// a trigger the writer put on it would run with the adoption's rights.
//
// MariaDB/MySQL have no search path: a temporary table shadows the table of its name in its
// session, also in triggers, but it can carry no trigger, and a writer with only INSERT on the
// team's table cannot create one in the relay table's database (docs/adopting.md, Privileges).
func TestAdoptedTriggerIgnoresWritersTempTables(t *testing.T) {
	forEachAdoptDialect(t, func(t *testing.T, d outbox.Dialect) {
		if d == outbox.MySQL {
			testMySQLWritersTempTables(t)
			return
		}
		testPostgresWritersTempTables(t)
	})
}

func testPostgresWritersTempTables(t *testing.T) {
	a := newAdoptedTable(t, outbox.Postgres)
	ctx := context.Background()
	if _, err := outbox.Adopt(ctx, a.db, a.relay, a.cfg); err != nil {
		t.Fatal(err)
	}
	role := testsupport.UniqueName("adopt_temp")
	schema := a.team[:strings.LastIndexByte(a.team, '.')]
	proof := schema + ".only_the_owner_writes_here"
	for _, stmt := range []string{"CREATE TABLE " + proof + " (who text)", "CREATE ROLE " + role + " LOGIN PASSWORD 'w'",
		"GRANT USAGE ON SCHEMA " + schema + " TO " + role, "GRANT INSERT ON " + a.team + " TO " + role} {
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
	conn, err := writer.Conn(ctx) // temporary objects live in one session
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	for _, stmt := range []string{
		"CREATE TEMP TABLE " + a.relay.Events() + " AS SELECT * FROM (VALUES (NULL::uuid)) v(event_id) WHERE false",
		"CREATE FUNCTION pg_temp.steal() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN INSERT INTO " + proof +
			" VALUES (current_user); RETURN NULL; END$$",
	} {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	// Every column the copy writes, so that its INSERT succeeds into the temporary table.
	for _, col := range []string{"topic text", "aggregate_id text", "event_type text", "aggregate_type text", "payload bytea",
		"headers jsonb", "created_at timestamptz"} {
		if _, err := conn.ExecContext(ctx, "ALTER TABLE pg_temp."+a.relay.Events()+" ADD COLUMN "+col); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := conn.ExecContext(ctx, "CREATE TRIGGER steal AFTER INSERT ON pg_temp."+a.relay.Events()+
		" FOR EACH ROW EXECUTE FUNCTION pg_temp.steal()"); err != nil {
		t.Fatal(err)
	}
	_, insertErr := a.insert(ctx, conn, "Order", "o-1", 1)
	var stolen int
	if err := a.db.QueryRow("SELECT count(*) FROM " + proof).Scan(&stolen); err != nil {
		t.Fatal(err)
	}
	if stolen > 0 {
		t.Errorf("a writer's trigger on its temporary table ran with the adoption's rights: it wrote %d rows into %s", stolen, proof)
	}
	if insertErr == nil {
		if n := a.relayRows(t); n != 1 {
			t.Errorf("%d rows in the relay table after the writer's INSERT, want 1 (the copy went into the writer's temporary table)", n)
		}
	}
}

// testMySQLWritersTempTables: the writer's attempt to create a temporary table named like the
// relay table is refused, its INSERT is copied into the relay table, and a temporary table
// (made by a user allowed to) cannot carry a trigger.
func testMySQLWritersTempTables(t *testing.T) {
	a := newAdoptedTable(t, outbox.MySQL)
	ctx := context.Background()
	if _, err := outbox.Adopt(ctx, a.db, a.relay, a.cfg); err != nil {
		t.Fatal(err)
	}
	var relayDB string
	if err := a.db.QueryRow("SELECT DATABASE()").Scan(&relayDB); err != nil {
		t.Fatal(err)
	}
	writer := openWriterWithInsertOnly(t, a, testsupport.UniqueName("adopt_temp"))
	conn, err := writer.Conn(ctx) // temporary objects live in one session
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = conn.Close() }()
	if _, err := conn.ExecContext(ctx, "CREATE TEMPORARY TABLE `"+relayDB+"`."+a.relay.Events()+" (event_id CHAR(36))"); err == nil {
		t.Errorf("a writer with only INSERT on the team's table created a temporary table named like the relay table")
	}
	if _, err := a.insert(ctx, conn, "Order", "o-1", 1); err != nil {
		t.Fatal(err)
	}
	if n := a.relayRows(t); n != 1 {
		t.Errorf("%d rows in the relay table after the writer's INSERT, want 1", n)
	}
	owner, err := a.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = owner.Close() }()
	if _, err := owner.ExecContext(ctx, "CREATE TEMPORARY TABLE adopt_temp_shadow (id INT)"); err != nil {
		t.Fatal(err)
	}
	if _, err := owner.ExecContext(ctx, "CREATE TRIGGER adopt_temp_steal AFTER INSERT ON adopt_temp_shadow FOR EACH ROW SET @stolen = 1"); err == nil {
		_, _ = owner.ExecContext(ctx, "DROP TRIGGER adopt_temp_steal")
		t.Errorf("a trigger was created on a temporary table")
	}
}
