package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/outbox"
)

// binary is the outboxkit executable built once by TestMain.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "outboxkit-cli-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "outboxkit")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the outboxkit binary:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// cleanEnv is the test process's environment without OUTBOXKIT_* variables, so that the
// addresses scripts/services.sh exports (OUTBOXKIT_KAFKA_BROKERS, ...) do not override the
// configuration files the tests write, plus extra.
func cleanEnv(extra ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OUTBOXKIT_") {
			out = append(out, kv)
		}
	}
	return append(out, extra...)
}

type result struct {
	code           int
	stdout, stderr string
}

// cli runs the binary to completion in dir with args.
func cli(t *testing.T, dir string, args ...string) result {
	t.Helper()
	return cliWithInput(t, dir, "", nil, args...)
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// writeConfig writes a configuration file into a new directory and returns the directory.
func writeConfig(t *testing.T, content string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "outboxkit.yaml"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pgConfig is a configuration for the test PostgreSQL with the given outbox table and broker part.
func pgConfig(dsn, table, broker string) string {
	return fmt.Sprintf(`database:
  dialect: postgres
  dsn: %s
  table: %s
forwarder:
  batch_size: 100
  lease_ttl: 2s
  initial_interval: 100ms
  max_poll_interval: 200ms
http:
  listen: 127.0.0.1:0
log:
  level: info
  format: json
%s
`, dsn, table, broker)
}

// writeEvents commits events into the outbox table through outbox.Writer and returns their ids.
func writeEvents(t *testing.T, db *sql.DB, table, topic string, n int) []uuid.UUID {
	t.Helper()
	return writeEventsIn(t, db, outbox.Postgres, table, topic, n)
}

func writeEventsIn(t *testing.T, db *sql.DB, dialect outbox.Dialect, table, topic string, n int) []uuid.UUID {
	t.Helper()
	w, err := outbox.NewWriter(outbox.Config{Dialect: dialect, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	events := make([]outbox.Event, n)
	ids := make([]uuid.UUID, n)
	for i := range events {
		ids[i] = uuid.Must(uuid.NewV7())
		events[i] = outbox.Event{ID: ids[i], Topic: topic, AggregateType: "order",
			AggregateID: fmt.Sprintf("order-%d", i%3), EventType: "OrderPlaced", Payload: []byte(fmt.Sprintf(`{"n":%d}`, i))}
	}
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteTx(ctx, tx, events...); err != nil {
		_ = tx.Rollback()
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return ids
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	client := http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func count(t *testing.T, db *sql.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRow(query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

func dropTables(t *testing.T, db *sql.DB, table string) {
	t.Cleanup(func() {
		for _, suffix := range []string{"", "_leases", "_relays", "_migrations", "_key_locks"} {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + table + suffix + " CASCADE")
		}
		_, _ = db.Exec("DROP FUNCTION IF EXISTS " + table + "_notify()")
	})
}

func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// closedPort returns a loopback address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}
