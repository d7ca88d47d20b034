package testsupport

import (
	"bytes"
	"net/url"
	"os/exec"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"
)

// The restored copies of an installation's database that the identity tests make: a dump of one
// database restored into a second one with the database's own tools, as a team makes a staging
// copy of production or the green side of a blue/green cutover.

// RestorePostgresCopy dumps schema of the test PostgreSQL database with pg_dump and restores it
// with psql into a new database of the same cluster (dropped with the test), and returns that
// database's URL with search_path set to schema.
func RestorePostgresCopy(t testing.TB, schema string) string {
	t.Helper()
	src := PostgresDSN(t)
	name := UniqueName("restored")
	admin := OpenPostgres(t)
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create the database of the restored copy: %v", err)
	}
	t.Cleanup(func() { _, _ = admin.Exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)") })
	u, err := url.Parse(src)
	if err != nil {
		t.Fatalf("the test DSN is not a URL: %v", err)
	}
	u.Path = "/" + name
	dump := run(t, nil, "pg_dump", "--no-owner", "--schema="+schema, "--dbname="+src)
	run(t, dump, "psql", "--quiet", "--no-psqlrc", "-v", "ON_ERROR_STOP=1", "--dbname="+u.String())
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// RestoreMySQLCopy dumps tables of the test MariaDB/MySQL database with mysqldump (their
// triggers too) and restores them with mysql into a new schema of the same server (dropped with
// the test), and returns the go-sql-driver DSN of that schema.
func RestoreMySQLCopy(t testing.TB, tables ...string) string {
	t.Helper()
	cfg, err := mysql.ParseDSN(MySQLDSN(t))
	if err != nil {
		t.Fatalf("the test MySQL DSN: %v", err)
	}
	name := UniqueName("restored")
	admin := OpenMySQL(t)
	if _, err := admin.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create the schema of the restored copy: %v", err)
	}
	t.Cleanup(func() { _, _ = admin.Exec("DROP DATABASE IF EXISTS " + name) })
	host, port, _ := strings.Cut(cfg.Addr, ":")
	login := []string{"--protocol=tcp", "--host=" + host, "--port=" + port, "--user=" + cfg.User, "--password=" + cfg.Passwd}
	dump := run(t, nil, mysqlTool("mariadb-dump", "mysqldump"), append(append(login, "--single-transaction", cfg.DBName), tables...)...)
	run(t, dump, mysqlTool("mariadb", "mysql"), append(login, name)...)
	cfg.DBName = name
	return cfg.FormatDSN()
}

// mysqlTool returns the first of names found on the PATH (MariaDB's own name, then MySQL's).
func mysqlTool(names ...string) string {
	for _, n := range names {
		if _, err := exec.LookPath(n); err == nil {
			return n
		}
	}
	return names[len(names)-1]
}

// run runs name with args and stdin, and returns its output; a failure fails the test with its
// error output.
func run(t testing.TB, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: %v: %s", name, err, stderr.String())
	}
	return out
}
