package main

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestMigrateReidentifyAndRebindARestoredCopy, on PostgreSQL and MariaDB: a database restored
// from a dump of another installation's (pg_dump | psql into a second database, mysqldump into
// a second schema) is refused by the exactly-once relay with the error naming both bindings and
// the two ways out; `migrate --reidentify` gives it a new identity and drops the old identity's
// unit marks; on another restored copy `migrate --rebind` keeps the identity.
func TestMigrateReidentifyAndRebindARestoredCopy(t *testing.T) {
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			original := newCLIOriginal(t, d)
			reidentified := original.restore(t)
			res := cli(t, reidentified.dir, "relay")
			if res.code == 0 || !strings.Contains(res.stderr, "--reidentify") || !strings.Contains(res.stderr, "--rebind") ||
				!strings.Contains(res.stderr, original.installation) {
				t.Fatalf("the relay on the restored copy: %s\nwant it refused naming the installation and --reidentify, --rebind", res)
			}
			t.Logf("relay on the copy: exit %d: %s", res.code, grepLines(res.stderr, "--reidentify"))
			// status with the exactly-once configuration refuses the copy too; with at-least-once
			// polling, which uses no identity, it works.
			if res := cli(t, reidentified.dir, "status"); res.code == 0 || !strings.Contains(res.stderr, "--reidentify") {
				t.Errorf("status (exactly-once) on the restored copy: %s\nwant it refused", res)
			}
			polling := writeConfig(t, strings.Replace(reidentified.config(t, reidentified.dsn), "  delivery: exactly_once\n", "", 1))
			if res := cli(t, polling, "status"); res.code != 0 {
				t.Errorf("status (at-least-once polling) on the restored copy: %s", res)
			}
			res = cli(t, reidentified.dir, "migrate", "--reidentify")
			if res.code != 0 || !strings.Contains(res.stdout, "re-identified") || !strings.Contains(res.stdout, "1 exactly-once unit rows") {
				t.Fatalf("migrate --reidentify: %s", res)
			}
			t.Logf("migrate --reidentify:\n%s", res.stdout)
			id := reidentified.rawInstallation(t)
			if id == original.installation {
				t.Fatalf("the copy's installation is still %s after --reidentify", id)
			}
			if n := count(t, reidentified.db, "SELECT COUNT(*) FROM "+original.table.Units()); n != 0 {
				t.Errorf("%d unit rows of the original left in the re-identified copy", n)
			}
			if id := original.installation; original.readInstallation(t) != id {
				t.Errorf("the original's installation changed")
			}

			rebound := original.restore(t)
			res = cli(t, rebound.dir, "migrate", "--rebind")
			if res.code != 0 || !strings.Contains(res.stdout, "rebound") {
				t.Fatalf("migrate --rebind: %s", res)
			}
			t.Logf("migrate --rebind:\n%s", res.stdout)
			if id := rebound.rawInstallation(t); id != original.installation {
				t.Errorf("the rebound copy's installation is %s, want the original's %s", id, original.installation)
			}
			if n := count(t, rebound.db, "SELECT COUNT(*) FROM "+original.table.Units()); n != 1 {
				t.Errorf("the rebound copy has %d unit rows, want the original's 1", n)
			}
			if res := cli(t, rebound.dir, "migrate", "--rebind", "--reidentify"); res.code == 0 {
				t.Errorf("migrate --rebind --reidentify was accepted: %s", res)
			}
		})
	}
}

// cliDatabase is an outbox database the CLI is configured for.
type cliDatabase struct {
	dialect outbox.Dialect
	table   outbox.Table
	db      *sql.DB
	dir     string
	// installation is the original's identity (cliOriginal only).
	installation string
	// schema is the PostgreSQL schema of the table.
	schema string
	// dsn is the database's DSN.
	dsn string
}

// newCLIOriginal migrates an outbox with `outboxkit migrate` (exactly-once on the test Kafka)
// and records a unit mark in it, as its relays would.
func newCLIOriginal(t *testing.T, d outbox.Dialect) *cliDatabase {
	t.Helper()
	c := &cliDatabase{dialect: d}
	var dsn, name string
	switch d {
	case outbox.Postgres:
		c.db = testsupport.OpenPostgres(t)
		c.schema = testsupport.UniqueName("cli_inst")
		if _, err := c.db.Exec("CREATE SCHEMA " + c.schema); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = c.db.Exec("DROP SCHEMA " + c.schema + " CASCADE") })
		dsn, name = testsupport.PostgresDSN(t), c.schema+".outbox_events"
	default:
		c.db = testsupport.OpenMySQL(t)
		dsn, name = testsupport.MySQLDSN(t), testsupport.UniqueName("cli_inst")
	}
	table, err := outbox.NewTable(d, name)
	if err != nil {
		t.Fatal(err)
	}
	c.table = table
	if d == outbox.MySQL {
		t.Cleanup(func() {
			for _, n := range table.Tables() {
				_, _ = c.db.Exec("DROP TABLE IF EXISTS " + n)
			}
		})
	}
	c.dsn, c.dir = dsn, writeConfig(t, c.config(t, dsn))
	if res := cli(t, c.dir, "migrate"); res.code != 0 {
		t.Fatalf("migrate: %s", res)
	}
	if _, err := c.db.Exec("INSERT INTO " + table.Units() + " (unit, cleaned, cleaned_at) VALUES ('outboxkit/x/u00', 'abc', CURRENT_TIMESTAMP)"); err != nil {
		t.Fatal(err)
	}
	c.installation = c.readInstallation(t)
	return c
}

// config is the CLI's configuration of the table in dsn: exactly-once on the test Kafka.
func (c *cliDatabase) config(t *testing.T, dsn string) string {
	brokers := testsupport.KafkaBrokers(t)
	config := pgConfig(dsn, c.table.String(), fmt.Sprintf("broker: kafka\nkafka:\n  brokers: [%s]\n", strings.Join(brokers, ", ")))
	config = strings.Replace(config, "forwarder:\n", "forwarder:\n  delivery: exactly_once\n  checkpoint_topic: outboxkit-test.checkpoints\n", 1)
	return strings.Replace(config, "dialect: postgres", "dialect: "+string(c.dialect), 1)
}

// restore restores a dump of c into a new database (PostgreSQL) or schema (MariaDB) and
// configures the CLI for it.
func (c *cliDatabase) restore(t *testing.T) *cliDatabase {
	t.Helper()
	out := &cliDatabase{dialect: c.dialect, table: c.table}
	var dsn, driver string
	switch c.dialect {
	case outbox.Postgres:
		dsn, driver = testsupport.RestorePostgresCopy(t, c.schema), "pgx"
	default:
		dsn, driver = testsupport.RestoreMySQLCopy(t, c.table.Events(), c.table.Leases(), c.table.Relays(),
			c.table.KeyLocks(), c.table.Installation(), c.table.Units(), c.table.Migrations()), "mysql"
	}
	out.db = testsupport.OpenDSN(t, driver, dsn)
	out.dsn, out.dir = dsn, writeConfig(t, out.config(t, dsn))
	return out
}

// installation reads the installation id without checking its binding.
func (c *cliDatabase) rawInstallation(t *testing.T) string {
	t.Helper()
	var id string
	if err := c.db.QueryRow("SELECT installation_id FROM " + c.table.Installation()).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// readInstallation reads the installation id as the relay does (checking its binding).
func (c *cliDatabase) readInstallation(t *testing.T) string {
	t.Helper()
	id, err := outbox.ReadInstallation(t.Context(), c.db, c.table)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
