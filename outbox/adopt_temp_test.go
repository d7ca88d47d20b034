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
// a trigger the writer put on it would run with the adoption's rights. PostgreSQL only: on
// MariaDB/MySQL a temporary table can carry no trigger, and a writer needs CREATE TEMPORARY
// TABLES in the relay table's database to make one (docs/adopting.md, Privileges).
func TestAdoptedTriggerIgnoresWritersTempTables(t *testing.T) {
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
