package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// Tokens of the admin relay: a read token and a write token, in token files.
const (
	readToken  = "viewer-secret-0123456789"
	writeToken = "ops-secret-9876543210abcdef"
)

// adminRelay is `outboxkit relay` on PostgreSQL and the shared Kafka with admin tokens, real
// traffic (a writer commits an event every 200 ms), and a parked key: an event above
// kafka.message_max_bytes, dead at its first attempt, with a later event of its key waiting.
type adminRelay struct {
	db         *sql.DB
	dir        string
	table      string
	topic      string
	addr       string
	big, later outbox.Event
	relay      *relayProcess
}

func startAdminRelay(t *testing.T, name string) *adminRelay {
	t.Helper()
	r := launchAdminRelay(t, name, "")
	deadline := time.Now().Add(time.Minute)
	for count(t, r.db, "SELECT COUNT(*) FROM "+r.table+" WHERE status = 2") != 1 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if n := count(t, r.db, "SELECT COUNT(*) FROM "+r.table+" WHERE status = 2 AND event_id = $1", r.big.ID); n != 1 {
		t.Fatalf("the oversized event is not dead after a minute; relay log:\n%s", r.relay.log())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { // real traffic while the test looks
		defer close(done)
		for n := 0; ctx.Err() == nil; n++ {
			writeEventsIn(t, r.db, outbox.Postgres, r.table, r.topic, 1)
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

// launchAdminRelay migrates a new table, writes the oversized event among others and starts the
// relay with forwarderExtra (YAML lines of the forwarder section) added to its configuration.
func launchAdminRelay(t *testing.T, name, forwarderExtra string) *adminRelay {
	t.Helper()
	r := &adminRelay{db: testsupport.OpenPostgres(t), table: testsupport.UniqueName("cli_" + name), topic: testsupport.UniqueName("cli." + name)}
	brokers := testsupport.KafkaBrokers(t)
	dropTables(t, r.db, r.table)
	cfg := pgConfig(testsupport.PostgresDSN(t), r.table, fmt.Sprintf("broker: kafka\nkafka:\n  brokers: [%s]\n  message_max_bytes: 8192\n",
		strings.Join(brokers, ", ")))
	cfg = strings.Replace(cfg, "forwarder:\n", "forwarder:\n  max_attempts: 3\n  max_interval: 500ms\n  dead_letter_topic: "+r.topic+".dead\n"+forwarderExtra, 1)
	cfg = strings.Replace(cfg, "  listen: 127.0.0.1:0\n", "  listen: 127.0.0.1:0\n  admin_read_tokens_file: read.tokens\n  admin_write_tokens_file: write.tokens\n", 1)
	r.dir = writeConfig(t, cfg)
	for file, content := range map[string]string{"read.tokens": "# viewers\nviewer:" + readToken + "\n", "write.tokens": "ops:" + writeToken + "\n"} {
		if err := os.WriteFile(filepath.Join(r.dir, file), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if res := cli(t, r.dir, "migrate"); res.code != 0 {
		t.Fatalf("migrate: %s", res)
	}
	payload := 20 << 10
	r.big, r.later = writeOversizedAmongOthers(t, r.db, r.table, r.topic, payload)
	r.relay = startRelay(t, r.dir)
	r.addr = r.relay.waitLog(t, "serving /metrics and /healthz")["addr"].(string)
	r.relay.waitLog(t, "forwarder started")
	return r
}

// call sends an admin API request with token ("" for none) and decodes a JSON answer into out.
func (r *adminRelay) call(t *testing.T, method, path, token string, body any, out any) int {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+r.addr+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %v\n%s", method, path, err, data)
		}
	}
	return resp.StatusCode
}

// status returns an event's status (-1 when it left the table).
func (r *adminRelay) status(t *testing.T, id uuid.UUID) int {
	t.Helper()
	st := -1
	if err := r.db.QueryRow("SELECT status FROM "+r.table+" WHERE event_id = $1", id).Scan(&st); err != nil && err != sql.ErrNoRows {
		t.Fatal(err)
	}
	return st
}

// addDeadLetter commits a new event of key aggregateID for tenant ("" for none), dead in the
// same transaction with the last error of like (so in like's failure group): the relay never
// sees it pending.
func (r *adminRelay) addDeadLetter(t *testing.T, tenant, aggregateID string, like uuid.UUID) uuid.UUID {
	t.Helper()
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: r.table})
	if err != nil {
		t.Fatal(err)
	}
	e := outbox.Event{ID: uuid.Must(uuid.NewV7()), Topic: r.topic, AggregateType: "order", AggregateID: aggregateID,
		TenantID: tenant, EventType: "OrderPlaced", Payload: []byte(`{}`)}
	tx, err := r.db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if err := w.WriteTx(context.Background(), tx, e); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("UPDATE "+r.table+" SET status = 2, attempts = 3, last_error = (SELECT last_error FROM "+r.table+
		" WHERE event_id = $1) WHERE event_id = $2", like, e.ID); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	return e.ID
}
