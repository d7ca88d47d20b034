package testsupport

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// EnvPostgresBin names the directory of PostgreSQL's server programs (initdb, pg_ctl) for
// PrivatePostgres; the default is scripts/services.sh's PG_BIN.
const EnvPostgresBin = "OUTBOXKIT_TEST_PG_BIN"

// DefaultPostgresBin is where scripts/services.sh finds PostgreSQL 15 (Debian's postgresql-15).
const DefaultPostgresBin = "/usr/lib/postgresql/15/bin"

// PrivatePostgres starts a PostgreSQL cluster of the test's own, with the binaries of the
// shared test service (initdb and pg_ctl from EnvPostgresBin), on a free loopback port, and
// returns its URL (user postgres, trust authentication, database postgres). It is for tests that
// change what the shared server must not (max_slot_wal_keep_size would invalidate every agent's
// slots there): settings are extra server settings ("name=value"); WAL segments are 1 MB, so a
// test reaches a WAL size limit quickly. The cluster is stopped (immediate) and removed with the
// test. Run as root, the server runs as the postgres user, as scripts/services.sh does.
func PrivatePostgres(t testing.TB, settings ...string) string {
	t.Helper()
	bin := env(EnvPostgresBin, DefaultPostgresBin)
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		Unavailable(t, "PostgreSQL's initdb ("+EnvPostgresBin+")", err)
	}
	dir, err := os.MkdirTemp("", "outboxkit-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	data := filepath.Join(dir, "data")
	asPostgres := os.Geteuid() == 0
	if asPostgres {
		if err := chownToPostgres(dir); err != nil {
			t.Fatal(err)
		}
	}
	cluster := privateCluster{bin: bin, data: data, asPostgres: asPostgres}
	if out, err := cluster.run("initdb", "-D", data, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--wal-segsize=1", "--no-sync"); err != nil {
		t.Fatalf("initdb of a private PostgreSQL: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	opts := []string{"-p " + strconv.Itoa(port), "-k " + data, "-c listen_addresses=127.0.0.1", "-c fsync=off",
		"-c wal_level=logical", "-c max_replication_slots=4", "-c max_wal_senders=4"}
	for _, s := range settings {
		opts = append(opts, "-c "+s)
	}
	logFile := filepath.Join(dir, "postgres.log")
	if out, err := cluster.run("pg_ctl", "-D", data, "-l", logFile, "-w", "-t", "120", "start", "-o", strings.Join(opts, " ")); err != nil {
		log, _ := os.ReadFile(logFile)
		t.Fatalf("start a private PostgreSQL on port %d: %v\n%s\n%s", port, err, out, log)
	}
	t.Cleanup(func() {
		if out, err := cluster.run("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop"); err != nil {
			t.Errorf("stop the private PostgreSQL: %v\n%s", err, out)
		}
	})
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
}

// privateCluster runs PostgreSQL's programs on one data directory.
type privateCluster struct {
	bin, data  string
	asPostgres bool
}

// run runs program with args, as the postgres user when asPostgres (initdb refuses root).
func (c privateCluster) run(program string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	path := filepath.Join(c.bin, program)
	if !c.asPostgres {
		return exec.CommandContext(ctx, path, args...).CombinedOutput()
	}
	quoted := make([]string, 0, len(args)+1)
	for _, a := range append([]string{path}, args...) {
		quoted = append(quoted, "'"+strings.ReplaceAll(a, "'", `'\''`)+"'")
	}
	return exec.CommandContext(ctx, "su", "postgres", "-s", "/bin/sh", "-c", strings.Join(quoted, " ")).CombinedOutput()
}

// chownToPostgres gives dir to the postgres user.
func chownToPostgres(dir string) error {
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("a private PostgreSQL run as root needs the postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(dir, uid, gid)
}

// freePort returns a loopback TCP port nothing listens on now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
