// Package testsupport gives tests the addresses of the real services started by
// scripts/services.sh, and a fair verdict when one is missing: outside CI the test is
// skipped with a message saying how to start the services; with CI=true it fails,
// naming the service, so a missing service can never pass as a skipped test.
package testsupport

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	// Database drivers the tests open by name.
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// Environment variables read by this package, with the defaults of scripts/services.sh.
const (
	EnvPostgresDSN  = "OUTBOXKIT_TEST_PG_DSN"
	EnvMySQLDSN     = "OUTBOXKIT_TEST_MYSQL_DSN"
	EnvKafkaBrokers = "OUTBOXKIT_KAFKA_BROKERS"
	EnvPulsarURL    = "OUTBOXKIT_PULSAR_URL"
	EnvPulsarHTTP   = "OUTBOXKIT_TEST_PULSAR_HTTP"

	DefaultPostgresDSN  = "postgres://outboxkit:outboxkit@127.0.0.1:15432/outboxkit?sslmode=disable"
	DefaultMySQLDSN     = "outboxkit:outboxkit@tcp(127.0.0.1:13306)/outboxkit?parseTime=true&multiStatements=true"
	DefaultKafkaBrokers = "127.0.0.1:19092"
	DefaultPulsarURL    = "pulsar://127.0.0.1:6650"
	DefaultPulsarHTTP   = "http://127.0.0.1:8080"
)

const probeTimeout = 5 * time.Second

// InCI reports whether the tests run in CI (CI=true), where a missing service is a failure.
func InCI() bool {
	v := strings.ToLower(os.Getenv("CI"))
	return v == "true" || v == "1"
}

// Unavailable stops the test because service cannot be reached: a failure in CI, a skip elsewhere.
func Unavailable(t testing.TB, service string, err error) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s is unreachable and CI=true, so this is a failure: %v", service, err)
	}
	t.Skipf("%s is unreachable (%v); start the test services with `bash scripts/services.sh` "+
		"and load their addresses with `eval \"$(bash scripts/services.sh env)\"`", service, err)
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// PostgresDSN returns the URL of the test PostgreSQL database after checking that it answers.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	dsn := env(EnvPostgresDSN, DefaultPostgresDSN)
	if err := pingSQL("pgx", dsn); err != nil {
		Unavailable(t, "PostgreSQL ("+EnvPostgresDSN+")", err)
	}
	return dsn
}

// MySQLDSN returns the go-sql-driver DSN of the test MariaDB/MySQL database after checking that it answers.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	dsn := env(EnvMySQLDSN, DefaultMySQLDSN)
	if err := pingSQL("mysql", dsn); err != nil {
		Unavailable(t, "MariaDB ("+EnvMySQLDSN+")", err)
	}
	return dsn
}

// OpenPostgres opens the test PostgreSQL database through database/sql (pgx driver) and closes it with the test.
func OpenPostgres(t testing.TB) *sql.DB {
	t.Helper()
	return openSQL(t, "pgx", PostgresDSN(t))
}

// OpenMySQL opens the test MariaDB database through database/sql and closes it with the test.
func OpenMySQL(t testing.TB) *sql.DB {
	t.Helper()
	return openSQL(t, "mysql", MySQLDSN(t))
}

// OpenDSN opens dsn with driver through database/sql and closes it with the test: for a test
// database reached with settings of its own (a search_path, say).
func OpenDSN(t testing.TB, driver, dsn string) *sql.DB {
	t.Helper()
	return openSQL(t, driver, dsn)
}

func openSQL(t testing.TB, driver, dsn string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatalf("open %s: %v", driver, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func pingSQL(driver, dsn string) error {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	return db.PingContext(ctx)
}

// KafkaBrokers returns the addresses of the real Kafka broker after checking that it accepts connections.
func KafkaBrokers(t testing.TB) []string {
	t.Helper()
	brokers := strings.Split(env(EnvKafkaBrokers, DefaultKafkaBrokers), ",")
	if err := dial(brokers[0]); err != nil {
		Unavailable(t, "Kafka ("+EnvKafkaBrokers+")", err)
	}
	return brokers
}

// PulsarURL returns the pulsar:// service URL of the real Pulsar broker after checking that
// both its binary port and its admin API answer.
func PulsarURL(t testing.TB) string {
	t.Helper()
	u := env(EnvPulsarURL, DefaultPulsarURL)
	parsed, err := url.Parse(u)
	if err == nil {
		err = dial(parsed.Host)
	}
	if err == nil {
		err = httpOK(PulsarHTTPURL() + "/admin/v2/clusters")
	}
	if err != nil {
		Unavailable(t, "Pulsar ("+EnvPulsarURL+")", err)
	}
	return u
}

// PulsarHTTPURL returns the base URL of the Pulsar admin API (not checked).
func PulsarHTTPURL() string { return env(EnvPulsarHTTP, DefaultPulsarHTTP) }

func dial(addr string) error {
	conn, err := net.DialTimeout("tcp", addr, probeTimeout)
	if err != nil {
		return err
	}
	return conn.Close()
}

func httpOK(u string) error {
	client := http.Client{Timeout: probeTimeout}
	resp, err := client.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return &statusError{url: u, status: resp.Status}
	}
	return nil
}

type statusError struct{ url, status string }

func (e *statusError) Error() string { return "GET " + e.url + ": " + e.status }

// UniqueName returns prefix followed by random hex, usable as a table or topic name, so tests
// sharing one service never see each other's data.
func UniqueName(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return prefix + "_" + hex.EncodeToString(b[:])
}
