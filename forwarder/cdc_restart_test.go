package forwarder_test

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// pgBin is where Debian's PostgreSQL 15 binaries are (scripts/services.sh uses the same).
const pgBin = "/usr/lib/postgresql/15/bin"

// dedicatedPostgres is a PostgreSQL instance of the test's own, on a free port and a data
// directory of its own, run as the postgres user: it can be restarted without disturbing the
// shared test database.
type dedicatedPostgres struct {
	t       testing.TB
	dir     string
	port    int
	logfile string
}

func startDedicatedPostgres(t testing.TB) *dedicatedPostgres {
	t.Helper()
	if _, err := os.Stat(filepath.Join(pgBin, "initdb")); err != nil {
		testsupport.Unavailable(t, "PostgreSQL 15 binaries ("+pgBin+")", err)
	}
	dir, err := os.MkdirTemp("", "outboxkit-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	p := &dedicatedPostgres{t: t, dir: dir, port: port, logfile: filepath.Join(dir, "postgres.log")}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("chown", "postgres:postgres", dir).CombinedOutput(); err != nil {
		testsupport.Unavailable(t, "a postgres user to run a dedicated PostgreSQL", fmt.Errorf("%v: %s", err, out))
	}
	p.pgUser(filepath.Join(pgBin, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "outboxkit", "--auth=trust", "-E", "UTF8")
	p.ctl("start")
	t.Cleanup(func() { p.ctl("stop", "-m", "immediate") })
	return p
}

// pgUser runs a PostgreSQL program as the postgres user and fails the test if it fails.
func (p *dedicatedPostgres) pgUser(args ...string) {
	p.t.Helper()
	cmd := exec.Command("su", "postgres", "-s", "/bin/sh", "-c", shellQuote(args))
	if out, err := cmd.CombinedOutput(); err != nil {
		log, _ := os.ReadFile(p.logfile)
		p.t.Fatalf("%s: %v: %s\n%s", strings.Join(args, " "), err, out, log)
	}
}

func (p *dedicatedPostgres) ctl(action string, extra ...string) {
	p.t.Helper()
	args := []string{filepath.Join(pgBin, "pg_ctl"), "-D", filepath.Join(p.dir, "data"), "-l", p.logfile, "-w", "-t", "60", action}
	args = append(args, extra...)
	if action != "stop" {
		args = append(args, "-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c wal_level=logical -c max_replication_slots=4 -c fsync=off",
			p.port, p.dir))
	}
	p.pgUser(args...)
}

func (p *dedicatedPostgres) dsn() string {
	return fmt.Sprintf("postgres://outboxkit@127.0.0.1:%d/postgres?sslmode=disable", p.port)
}

func shellQuote(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(quoted, " ")
}

// TestCDCPostgresRestartMidStream: the relay streams from a dedicated PostgreSQL that is
// restarted (fast shutdown: every connection, the walsender included, is cut) while events are
// written. The relay reconnects and resumes from the slot's confirmed position: every event
// arrives, in per-key order.
func TestCDCPostgresRestartMidStream(t *testing.T) {
	brokers := testsupport.KafkaBrokers(t)
	pg := startDedicatedPostgres(t)
	db, err := sql.Open("pgx", pg.dsn())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: "restart_outbox", DisableKeyLocks: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(context.Background(), db, w.Table()); err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, dialect: outbox.Postgres, db: db, writer: w, brokers: brokers,
		topic: testsupport.UniqueName("restart"), source: "cdc"}
	cfg := h.config(h.publisher())
	cfg.CDC.DSN = pg.dsn()
	h.start(cfg)
	h.waitForStream()

	keys := keysNamed("r", 20)
	const perKey = 40
	restarted := make(chan struct{})
	go func() {
		time.Sleep(400 * time.Millisecond)
		pg.ctl("restart", "-m", "fast")
		close(restarted)
	}()
	for n := range perKey {
		events := make([]outbox.Event, 0, len(keys))
		for _, k := range keys {
			events = append(events, h.event(k, n))
		}
		// Retry the same events (the same ids) until a commit succeeds: a commit cut by the
		// restart may have happened, and then the consumer sees the retried ids once.
		for attempt := 0; ; attempt++ {
			if err := h.tryWrite(events...); err == nil {
				break
			} else if attempt == 300 {
				t.Fatalf("write round %d: %v", n, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
	}
	<-restarted
	got := consumeDistinct(t, brokers, h.topic, perKey*len(keys), 90*time.Second)
	dups := checkDelivery(t, got, keys, perKey)
	t.Logf("%d events across a PostgreSQL restart, %d duplicates", len(got)-dups, dups)
}
