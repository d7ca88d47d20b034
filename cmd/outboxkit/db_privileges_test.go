package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// relayGrants are the privileges docs/security.md lists for the relay's database user, by table
// suffix.
var relayGrants = map[string][]string{
	"":        {"DELETE", "SELECT", "UPDATE"},
	"_leases": {"INSERT", "SELECT", "UPDATE"},
	"_relays": {"DELETE", "INSERT", "SELECT", "UPDATE"},
}

// cdcGrants are the privileges docs/security.md adds for forwarder.source cdc, beside the
// REPLICATION attribute, pg_signal_backend and a publication created by the owner.
// The cdc source releases a due scheduled event by writing its row again under a new seq: INSERT
// on the outbox table, and USAGE on its seq sequence (granted in createRelayRole).
var cdcGrants = map[string][]string{"": {"DELETE", "INSERT", "SELECT", "UPDATE"},
	"_cdc_slots": {"DELETE", "INSERT", "SELECT", "UPDATE"}, "_installation": {"SELECT"}}

// `outboxkit relay` runs as a PostgreSQL role that holds exactly the privileges of
// docs/security.md (checked in information_schema) and nothing more, and events flow.
func TestRelayWithLeastDatabasePrivileges(t *testing.T) {
	t.Parallel()
	testRelayWithLeastPrivileges(t, false)
}

// The same with forwarder.source cdc and the privileges docs/security.md adds for it.
func TestRelayCDCWithLeastDatabasePrivileges(t *testing.T) {
	t.Parallel()
	testRelayWithLeastPrivileges(t, true)
}

// testRelayWithLeastPrivileges runs the relay (polling, or cdc with cdc set) as a role that holds
// only the documented privileges, and checks that events flow and nothing was denied.
func testRelayWithLeastPrivileges(t *testing.T, cdc bool) {
	db := testsupport.OpenPostgres(t)
	ownerDSN := testsupport.PostgresDSN(t)
	table := testsupport.UniqueName("cli_priv")
	topic := testsupport.UniqueName("cli.priv")
	dropTables(t, db, table)
	if res := cli(t, writeConfig(t, pgConfig(ownerDSN, table, "")), "migrate"); res.code != 0 {
		t.Fatalf("migrate as the owner: %s", res)
	}

	role, password, grants, env := createRelayRole(t, db, table, cdc)
	checkRoleHoldsOnly(t, db, role, table, grants)

	u, err := url.Parse(ownerDSN)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(role, password)
	brokers := testsupport.KafkaBrokers(t)
	testsupport.CreateKafkaTopic(t, brokers, topic)
	kafkaPart := "broker: kafka\nkafka:\n  brokers: [" + strings.Join(brokers, ", ") + "]\n"
	dir := writeConfig(t, pgConfig("set-by-the-environment", table, kafkaPart))
	p := startRelayWithEnv(t, dir, append(env, "OUTBOXKIT_DATABASE_DSN="+u.String()))
	// The start-up line names the environment overrides in effect (never their values).
	start := p.waitLog(t, "outboxkit relay starting")
	if overrides, _ := start["env_overrides"].([]any); !slices.Contains(overrides, any("OUTBOXKIT_DATABASE_DSN")) {
		t.Errorf("start-up line: env_overrides = %v, want OUTBOXKIT_DATABASE_DSN among them", start["env_overrides"])
	}
	p.waitLog(t, "broker ready")
	p.waitLog(t, "forwarder started")
	if cdc {
		p.waitLog(t, "cdc: streaming")
	}
	ids := writeEvents(t, db, table, topic, 6) // written by the owner, as an application would
	// A scheduled event comes due while the relay runs: its release (an UPDATE when polling, the
	// row written again under a new seq with cdc) runs as the role too.
	ids = append(ids, writeScheduledEvent(t, db, table, topic, time.Now().Add(2*time.Second)))
	consume(t, brokers, topic, ids)
	if code := p.stop(t); code != 0 {
		t.Fatalf("relay exited with %d after SIGTERM, want 0; its log:\n%s", code, p.log())
	}
	if n := count(t, db, "SELECT COUNT(*) FROM "+table); n != 0 {
		t.Errorf("%d rows left in the outbox", n)
	}
	if strings.Contains(p.log(), password) {
		t.Errorf("the relay's log shows the role's password")
	}
	for _, l := range strings.Split(p.log(), "\n") {
		if strings.Contains(l, "permission denied") {
			t.Errorf("a privilege was missing: %s", l)
		}
	}
}

// createRelayRole creates a login role holding exactly the privileges docs/security.md lists
// for the relay on table (with those cdc adds, and a publication, when cdc is set), dropped
// with its privileges at the end of the test. It returns the role, its password, its table
// privileges by table suffix and the environment the relay needs beside the DSN.
func createRelayRole(t *testing.T, db *sql.DB, table string, cdc bool) (role, password string, grants map[string][]string, env []string) {
	role = testsupport.UniqueName("relay_role")
	var secret [12]byte
	_, _ = rand.Read(secret[:])
	password = hex.EncodeToString(secret[:])
	var dbName string
	if err := db.QueryRow("SELECT current_database()").Scan(&dbName); err != nil {
		t.Fatal(err)
	}
	// Identifiers are UniqueName's letters, digits and underscores; the password is hex.
	stmts := []string{
		"CREATE ROLE " + role + " LOGIN PASSWORD '" + password + "'",
		"GRANT CONNECT ON DATABASE " + dbName + " TO " + role,
		"GRANT USAGE ON SCHEMA public TO " + role,
	}
	grants = maps.Clone(relayGrants)
	if cdc {
		maps.Copy(grants, cdcGrants)
		tbl := cdcTable(t, db, table)
		stmts = append(stmts, "ALTER ROLE "+role+" REPLICATION", "GRANT pg_signal_backend TO "+role,
			"CREATE PUBLICATION "+testsupport.CDCPublication(t, db, tbl)+" FOR TABLE "+table+" WITH (publish = 'insert')",
			"GRANT USAGE ON SEQUENCE "+table+"_seq_seq TO "+role)
		env = append(env, "OUTBOXKIT_FORWARDER_SOURCE=cdc")
	}
	for suffix, privs := range grants {
		stmts = append(stmts, "GRANT "+strings.Join(privs, ", ")+" ON "+table+suffix+" TO "+role)
	}
	t.Cleanup(func() {
		_, _ = db.Exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1", role)
		// DROP OWNED also revokes the role's privileges, on schema public among them, which the
		// other least-privilege test changes at the same time: retried like the GRANTs.
		if err := execCatalogChange(db, "DROP OWNED BY "+role); err != nil {
			t.Errorf("drop owned by %s: %v", role, err)
		}
		_ = execCatalogChange(db, "REVOKE ALL ON DATABASE "+dbName+" FROM "+role)
		_ = execCatalogChange(db, "REVOKE ALL ON SCHEMA public FROM "+role)
		if err := execCatalogChange(db, "DROP ROLE "+role); err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
	for _, s := range stmts {
		if err := execCatalogChange(db, s); err != nil {
			t.Fatalf("%s: %v", strings.Replace(s, password, "xxxxx", 1), err)
		}
	}
	return role, password, grants, env
}

// execCatalogChange runs a GRANT or similar, again when PostgreSQL refused it with "tuple
// concurrently updated": two sessions changing the privileges of one object (schema public, the
// database) at the same moment, as tests of several packages do, collide that way.
func execCatalogChange(db *sql.DB, stmt string) error {
	var err error
	// Tried again for as long as other tests' catalog changes collide with it (a bound of 2
	// minutes against a hang; 10 tries 50 ms apart could all collide on a loaded machine).
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err = db.Exec(stmt); err == nil || !strings.Contains(err.Error(), "tuple concurrently updated") {
			return err
		}
	}
	return err
}

// writeScheduledEvent writes, as the owner, one event of topic scheduled for at.
func writeScheduledEvent(t *testing.T, db *sql.DB, table, topic string, at time.Time) uuid.UUID {
	t.Helper()
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	id := uuid.Must(uuid.NewV7())
	err = testsupport.WriteEvents(context.Background(), db, w, outbox.Event{ID: id, Topic: topic, AggregateType: "order",
		AggregateID: "order-scheduled", EventType: "OrderReminder", Payload: []byte(`{}`), DeliverAt: at})
	if err != nil {
		t.Fatalf("write a scheduled event: %v", err)
	}
	return id
}

// checkRoleHoldsOnly checks that role holds exactly grants (by suffix of table) on tables and
// is no superuser, nor may create roles or databases.
func checkRoleHoldsOnly(t *testing.T, db *sql.DB, role, table string, grants map[string][]string) {
	// Nothing more: the role's table privileges are exactly relayGrants, and it is no superuser.
	rows, err := db.Query(`SELECT table_name, privilege_type FROM information_schema.role_table_grants
		WHERE grantee = $1 ORDER BY 1, 2`, role)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for rows.Next() {
		var tb, priv string
		if err := rows.Scan(&tb, &priv); err != nil {
			t.Fatal(err)
		}
		got[strings.TrimPrefix(tb, table)] = append(got[strings.TrimPrefix(tb, table)], priv)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	rows.Close()
	for suffix, want := range grants {
		if !slices.Equal(got[suffix], want) {
			t.Errorf("role has %v on %s%s, want %v", got[suffix], table, suffix, want)
		}
	}
	if len(got) != len(grants) {
		t.Errorf("role has privileges on other tables: %v", got)
	}
	var super bool
	if err := db.QueryRow("SELECT rolsuper OR rolcreaterole OR rolcreatedb FROM pg_roles WHERE rolname = $1", role).Scan(&super); err != nil || super {
		t.Fatalf("role attributes: superuser/createrole/createdb = %v (%v)", super, err)
	}
}
