package main

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxkit/outboxkit/internal/testsupport"
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

// relayProcess is a running `outboxkit relay` whose JSON log lines are collected.
type relayProcess struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []map[string]any
	raw   strings.Builder
	more  chan struct{} // signalled on every new line
	done  chan struct{} // closed when stderr is drained
}

func startRelay(t *testing.T, dir string, args ...string) *relayProcess {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"relay"}, args...)...)
	cmd.Dir = dir
	cmd.Env = cleanEnv()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &relayProcess{cmd: cmd, more: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var rec map[string]any
			_ = json.Unmarshal(sc.Bytes(), &rec)
			p.mu.Lock()
			p.raw.WriteString(sc.Text() + "\n")
			if rec != nil {
				p.lines = append(p.lines, rec)
			}
			p.mu.Unlock()
			select {
			case p.more <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	return p
}

// waitLog returns the first log record whose msg is msg, waiting for it up to a minute (a
// bound against hangs, not a timing assertion).
func (p *relayProcess) waitLog(t *testing.T, msg string) map[string]any {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		p.mu.Lock()
		for _, rec := range p.lines {
			if rec["msg"] == msg {
				p.mu.Unlock()
				return rec
			}
		}
		p.mu.Unlock()
		select {
		case <-p.more:
		case <-p.done:
			p.mu.Lock()
			defer p.mu.Unlock()
			t.Fatalf("relay exited without logging %q; its log:\n%s", msg, p.raw.String())
		case <-deadline:
			p.mu.Lock()
			defer p.mu.Unlock()
			t.Fatalf("relay did not log %q within a minute; its log:\n%s", msg, p.raw.String())
		}
	}
}

func (p *relayProcess) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.raw.String()
}

// stop sends SIGTERM and returns the exit code.
func (p *relayProcess) stop(t *testing.T) int {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	return p.wait(t)
}

// wait waits for the process to exit (a minute at most) and returns its exit code.
func (p *relayProcess) wait(t *testing.T) int {
	t.Helper()
	waited := make(chan error, 1)
	go func() {
		<-p.done
		waited <- p.cmd.Wait()
	}()
	select {
	case err := <-waited:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		t.Fatalf("relay did not exit within a minute; its log:\n%s", p.log())
		return -1
	}
}

// consume reads topic from the Kafka cluster at addrs until every id was seen (by the event_id
// header), and checks each message's key.
func consume(t *testing.T, addrs []string, topic string, ids []uuid.UUID) {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	want := map[string]bool{}
	for _, id := range ids {
		want[id.String()] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for len(want) > 0 {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("%d events never reached topic %s: %v", len(want), topic, want)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			if !strings.HasPrefix(string(r.Key), "order-") {
				t.Errorf("record key %q is not the aggregate id", r.Key)
			}
			for _, h := range r.Headers {
				if h.Key == outbox.MetadataEventID {
					delete(want, string(h.Value))
				}
			}
		})
	}
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

// relayScenario migrates (through the migrate command, or relay --migrate), writes events, runs
// the relay with broker, checks delivery, /metrics and /healthz, a SIGTERM stop with exit 0, and
// that no lease is left owned.
func relayScenario(t *testing.T, broker string, kafkaAddrs func(logged []string) []string, migrateFlag bool) {
	db := testsupport.OpenPostgres(t)
	dsn := testsupport.PostgresDSN(t)
	table := testsupport.UniqueName("cli_relay")
	topic := testsupport.UniqueName("cli.events")
	dropTables(t, db, table)
	dir := writeConfig(t, pgConfig(dsn, table, broker))

	var relayArgs []string
	if migrateFlag {
		relayArgs = append(relayArgs, "--migrate")
	} else if res := cli(t, dir, "migrate"); res.code != 0 || !strings.Contains(res.stdout, "is up to date") {
		t.Fatalf("migrate: %s", res)
	}

	var ids []uuid.UUID
	if !migrateFlag {
		ids = writeEvents(t, db, table, topic, 5) // a backlog waiting for the relay
	}
	p := startRelay(t, dir, relayArgs...)
	ready := p.waitLog(t, "broker ready")
	httpAddr := p.waitLog(t, "serving /metrics and /healthz")["addr"].(string)
	p.waitLog(t, "forwarder started")
	ids = append(ids, writeEvents(t, db, table, topic, 4)...) // written while the relay runs

	var logged []string
	if addrs, ok := ready["addrs"].([]any); ok {
		for _, a := range addrs {
			logged = append(logged, a.(string))
		}
	}
	consume(t, kafkaAddrs(logged), topic, ids)

	for _, probe := range []string{"/healthz", "/livez", "/readyz"} {
		code, body := httpGet(t, "http://"+httpAddr+probe)
		if code != http.StatusOK || strings.TrimSpace(body) != "ok" {
			t.Errorf("%s = %d %q, want 200 ok", probe, code, body)
		}
	}
	// No admin token configured: the admin API and console are off, not open.
	for _, path := range []string{"/api/v1/backlog", "/console/"} {
		if code, _ := httpGet(t, "http://"+httpAddr+path); code != http.StatusNotFound {
			t.Errorf("%s without any admin token configured = %d, want 404", path, code)
		}
	}
	// The relayed counter is updated right after the broker's ack, which the consumer above saw;
	// scrape until it shows every event (bounded).
	var metrics string
	var code int
	want := fmt.Sprintf(`outboxkit_forwarder_relayed_total{table=%q,tenant="",topic=%q} %d`, table, topic, len(ids))
	for deadline := time.Now().Add(30 * time.Second); ; {
		code, metrics = httpGet(t, "http://"+httpAddr+"/metrics")
		if code == http.StatusOK && strings.Contains(metrics, want) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %q:\n%s", want, grepLines(metrics, "outboxkit_forwarder_relayed_total"))
	}
	if !strings.Contains(metrics, "go_goroutines") || !strings.Contains(metrics, "go_build_info{") {
		t.Errorf("/metrics lacks the Go runtime metrics or go_build_info")
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("relay exited with %d after SIGTERM, want 0; its log:\n%s", code, p.log())
	}
	if !strings.Contains(p.log(), "outboxkit relay stopped") {
		t.Errorf("relay log lacks its stop line:\n%s", p.log())
	}
	if n := count(t, db, "SELECT COUNT(*) FROM "+table+"_leases WHERE owner IS NOT NULL"); n != 0 {
		t.Errorf("%d leases still owned after SIGTERM", n)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM "+table); n != 0 {
		t.Errorf("%d rows left in the outbox after relaying", n)
	}
	if strings.Contains(p.log(), ":outboxkit@") {
		t.Errorf("the relay log shows the DSN password:\n%s", p.log())
	}
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

// `outboxkit relay` refuses broker kfake, from the file or from OUTBOXKIT_BROKER: an in-process
// cluster would acknowledge every event, and the relay would delete rows no one can read. It
// exits 2 naming kfake before it touches the table, whose events all stay pending. The admin
// commands, which publish nothing, still accept a file that says kfake.
func TestRelayRefusesKFake(t *testing.T) {
	t.Parallel()
	db := testsupport.OpenPostgres(t)
	kafkaPart := "broker: kafka\nkafka:\n  brokers: [" + strings.Join(testsupport.KafkaBrokers(t), ", ") + "]\n"
	cases := []struct {
		name, broker string
		env          []string
		want         string
	}{
		{"yaml", "broker: kfake", nil, "config outboxkit.yaml: broker: kfake is an in-process test cluster: the relay would delete events that no one can read"},
		{"environment", kafkaPart, []string{"OUTBOXKIT_BROKER=kfake"}, "config outboxkit.yaml: OUTBOXKIT_BROKER: kfake is an in-process test cluster"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			table := testsupport.UniqueName("cli_kfake")
			dropTables(t, db, table)
			dir := writeConfig(t, pgConfig(testsupport.PostgresDSN(t), table, tc.broker))
			// The admin commands publish nothing: a file that says kfake is fine for them.
			if res := cliWithInput(t, dir, "", tc.env, "migrate"); res.code != 0 {
				t.Fatalf("migrate: %s", res)
			}
			ids := writeEvents(t, db, table, testsupport.UniqueName("cli.kfake"), 5)
			if res := cliWithInput(t, dir, "", tc.env, "status"); res.code != 0 {
				t.Errorf("status: %s", res)
			}
			p := startRelayWithEnv(t, dir, tc.env)
			code, exited := p.waitFor(20 * time.Second)
			if !exited {
				_ = p.cmd.Process.Kill()
				_ = p.cmd.Wait()
			}
			if left := count(t, db, "SELECT COUNT(*) FROM "+table); left != len(ids) {
				t.Errorf("%d of %d events left in the outbox: the relay deleted rows it published into kfake", left, len(ids))
			}
			if !exited || code != 2 || !strings.Contains(p.log(), tc.want) {
				t.Fatalf("want exit 2 with %q; exited=%v code=%d; output:\n%s", tc.want, exited, code, p.log())
			}
		})
	}
}

// waitFor waits up to d for the process to exit and returns its exit code and whether it exited.
func (p *relayProcess) waitFor(d time.Duration) (int, bool) {
	waited := make(chan error, 1)
	go func() {
		<-p.done
		waited <- p.cmd.Wait()
	}()
	select {
	case err := <-waited:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode(), true
		}
		return 0, err == nil
	case <-time.After(d):
		return -1, false
	}
}

func TestRelayKafka(t *testing.T) {
	t.Parallel()
	brokers := testsupport.KafkaBrokers(t)
	relayScenario(t, fmt.Sprintf("broker: kafka\nkafka:\n  brokers: [%s]\n", strings.Join(brokers, ", ")),
		func([]string) []string { return brokers }, true)
}

func TestStatusAndDeadLetters(t *testing.T) {
	t.Parallel()
	db := testsupport.OpenPostgres(t)
	table := testsupport.UniqueName("cli_dead")
	topic := testsupport.UniqueName("cli.dead")
	dropTables(t, db, table)
	dir := writeConfig(t, pgConfig(testsupport.PostgresDSN(t), table, ""))
	if res := cli(t, dir, "migrate"); res.code != 0 {
		t.Fatalf("migrate: %s", res)
	}
	if res := cli(t, dir, "status"); res.code != 0 || !strings.Contains(res.stdout, "the outbox is empty") {
		t.Fatalf("status of an empty outbox: %s", res)
	}
	// A table that was never migrated: exit 1, pointing at the migrate command.
	missing := writeConfig(t, pgConfig(testsupport.PostgresDSN(t), testsupport.UniqueName("cli_missing"), ""))
	if res := cli(t, missing, "dead-letters", "list"); res.code != 1 || !strings.Contains(res.stderr, "run `outboxkit migrate`") {
		t.Errorf("dead-letters list on a missing table: %s", res)
	}
	ids := writeEvents(t, db, table, topic, 5)
	// Dead-letter three of them by hand, as the forwarder would after its last attempt.
	for i, id := range ids[:3] {
		if _, err := db.Exec("UPDATE "+table+" SET status = 2, attempts = 10, last_error = $1 WHERE event_id = $2",
			fmt.Sprintf("kafka: broker said no (%d)", i), id); err != nil {
			t.Fatal(err)
		}
	}

	res := cli(t, dir, "status")
	if res.code != 0 {
		t.Fatalf("status: %s", res)
	}
	if !strings.Contains(res.stdout, "TOPIC") || !strings.Contains(res.stdout, "OLDEST") {
		t.Errorf("status has no table header: %s", res)
	}
	if fields := strings.Fields(grepLines(res.stdout, topic)); len(fields) != 6 || fields[1] != "2" || fields[2] != "0" || fields[3] != "3" || fields[4] != "0" {
		t.Errorf("status row = %q, want %s 2 0 3 0 <age>", fields, topic)
	}
	res = cli(t, dir, "status", "--json")
	var status []topicStatusJSON
	if err := json.Unmarshal([]byte(res.stdout), &status); err != nil || res.code != 0 {
		t.Fatalf("status --json: %v\n%s", err, res)
	}
	if len(status) != 1 || status[0].Topic != topic || status[0].Pending != 2 || status[0].Dead != 3 ||
		status[0].OldestPending == nil || status[0].OldestPendingAgeSeconds == nil || *status[0].OldestPendingAgeSeconds < 0 {
		t.Errorf("status --json = %+v", status)
	}

	res = cli(t, dir, "dead-letters", "list")
	if res.code != 0 {
		t.Fatalf("dead-letters list: %s", res)
	}
	for i, id := range ids[:3] {
		line := grepLines(res.stdout, id.String())
		if !strings.Contains(line, topic) || !strings.Contains(line, fmt.Sprintf("broker said no (%d)", i)) || !strings.Contains(line, "order/order-") {
			t.Errorf("dead-letters list line of %s = %q", id, line)
		}
	}
	if strings.Contains(res.stdout, ids[3].String()) {
		t.Errorf("dead-letters list shows a pending event: %s", res)
	}
	res = cli(t, dir, "dead-letters", "list", "--json", "--limit", "2")
	var dead []deadLetterJSON
	if err := json.Unmarshal([]byte(res.stdout), &dead); err != nil || res.code != 0 {
		t.Fatalf("dead-letters list --json: %v\n%s", err, res)
	}
	if len(dead) != 2 || dead[0].EventID != ids[0].String() || dead[0].Attempts != 10 || dead[0].LastError != "kafka: broker said no (0)" {
		t.Errorf("dead-letters list --json --limit 2 = %+v", dead)
	}

	// replay: pending again, with fresh attempts; an id that is no dead letter is reported.
	res = cli(t, dir, "dead-letters", "replay", ids[0].String(), ids[3].String())
	if res.code != 0 || !strings.Contains(res.stdout, "replayed 1 of 2 events") || !strings.Contains(res.stderr, "1 of the given ids are not dead letters") {
		t.Errorf("dead-letters replay: %s", res)
	}
	var st, attempts int
	if err := db.QueryRow("SELECT status, attempts FROM "+table+" WHERE event_id = $1", ids[0]).Scan(&st, &attempts); err != nil {
		t.Fatal(err)
	}
	if st != 0 || attempts != 0 {
		t.Errorf("replayed event has status %d, attempts %d; want 0, 0", st, attempts)
	}
	// discard: gone for good.
	res = cli(t, dir, "dead-letters", "discard", ids[1].String())
	if res.code != 0 || !strings.Contains(res.stdout, "discarded 1 of 1 events") {
		t.Errorf("dead-letters discard: %s", res)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM "+table+" WHERE event_id = $1", ids[1]); n != 0 {
		t.Errorf("discarded event still in the table")
	}
	// --all.
	if res = cli(t, dir, "dead-letters", "discard", "--all"); res.code != 2 || !strings.Contains(res.stderr, "--yes") {
		t.Errorf("discard --all without --yes: %s", res)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM "+table+" WHERE status = 2"); n != 1 {
		t.Errorf("discard --all without --yes changed the table: %d dead left, want 1", n)
	}
	if res = cli(t, dir, "dead-letters", "replay", "--all"); res.code != 0 || !strings.Contains(res.stdout, "replayed 1 dead letters") {
		t.Errorf("replay --all: %s", res)
	}
	if _, err := db.Exec("UPDATE "+table+" SET status = 2 WHERE event_id = ANY($1)", []string{ids[3].String(), ids[4].String()}); err != nil {
		t.Fatal(err)
	}
	if res = cli(t, dir, "dead-letters", "discard", "--all", "--yes"); res.code != 0 || !strings.Contains(res.stdout, "discarded 2 dead letters") {
		t.Errorf("discard --all --yes: %s", res)
	}
	if n := count(t, db, "SELECT COUNT(*) FROM "+table); n != 2 {
		t.Errorf("%d rows left, want the 2 replayed ones", n)
	}
	if res = cli(t, dir, "dead-letters", "list"); res.code != 0 || !strings.Contains(res.stdout, "no dead letters") {
		t.Errorf("dead-letters list when empty: %s", res)
	}
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

func TestUnreachableDatabase(t *testing.T) {
	t.Parallel()
	dsn := fmt.Sprintf("postgres://relay:Sup3rSecretPw@%s/outboxkit?sslmode=disable&connect_timeout=2", closedPort(t))
	dir := writeConfig(t, pgConfig(dsn, "outbox_events", "broker: kafka\nkafka:\n  brokers: ["+strings.Join(testsupport.KafkaBrokers(t), ", ")+"]\n"))

	t.Run("relay", func(t *testing.T) {
		t.Parallel()
		p := startRelay(t, dir)
		// The HTTP endpoint is up while the forwarder retries the database: /healthz says 503.
		httpAddr := p.waitLog(t, "serving /metrics and /healthz")["addr"].(string)
		for _, probe := range []string{"/healthz", "/readyz"} {
			if code, body := httpGet(t, "http://"+httpAddr+probe); code != http.StatusServiceUnavailable {
				t.Errorf("%s with the database down = %d %q, want 503", probe, code, body)
			}
		}
		// Liveness never looks at a dependency: an orchestrator must not restart the relay for it.
		if code, body := httpGet(t, "http://"+httpAddr+"/livez"); code != http.StatusOK {
			t.Errorf("/livez with the database down = %d %q, want 200", code, body)
		}
		code := p.wait(t)
		log := p.log()
		if code != 1 {
			t.Fatalf("relay with an unreachable database: want exit 1, got %d; output:\n%s", code, log)
		}
		if !strings.Contains(log, "outboxkit: relay: forwarder: start on table outbox_events failed after") ||
			!strings.Contains(log, "connection refused") || !strings.Contains(log, "database not ready, retrying") {
			t.Errorf("relay's output does not say the database is unreachable:\n%s", log)
		}
		if strings.Contains(log, "Sup3rSecretPw") {
			t.Errorf("the DSN password was printed:\n%s", log)
		}
	})
	for _, args := range [][]string{{"status"}, {"migrate"}, {"relay", "--migrate"}, {"dead-letters", "list"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			res := cli(t, dir, args...)
			if res.code != 1 || !strings.Contains(res.stderr, "postgres database postgres://relay:xxxxx@127.0.0.1:") ||
				!strings.Contains(res.stderr, "unreachable") {
				t.Errorf("want exit 1 naming the unreachable database (password redacted), got %s", res)
			}
			if strings.Contains(res.stdout+res.stderr, "Sup3rSecretPw") {
				t.Errorf("the DSN password was printed: %s", res)
			}
		})
	}
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	const db = "database:\n  dialect: postgres\n  dsn: postgres://u:Sup3rSecretPw@127.0.0.1:1/db\n"
	cases := []struct {
		name   string
		config string // "" leaves no file
		args   []string
		want   string
	}{
		{"missing file", "", []string{"status"}, "outboxkit.yaml: no such file"},
		{"missing dsn", "database:\n  dialect: postgres\n", []string{"status"}, "database.dsn: missing"},
		{"bad batch size", db + "forwarder:\n  batch_size: -1\n", []string{"relay"}, "forwarder.batch_size: must be positive, got -1"},
		{"bad duration", db + "forwarder:\n  lease_ttl: 10\n", []string{"migrate"}, `forwarder.lease_ttl: must be a Go duration`},
		{"unknown key", db + "forwarder:\n  workerz: 2\n", []string{"status"}, "forwarder.workerz: unknown key"},
		{"unknown broker", db + "broker: activemq\n", []string{"relay"}, `broker: unknown value "activemq" (allowed: kafka, pulsar, nats, rabbitmq, kfake)`},
		{"missing broker", db, []string{"relay"}, "broker: missing"},
		{"relay on kfake", db + "broker: kfake\n", []string{"relay"}, "broker: kfake is an in-process test cluster"},
		{"kafka without brokers", db + "broker: kafka\n", []string{"relay"}, "kafka.brokers"},
		{"bad log level", db + "log:\n  level: chatty\n", []string{"relay"}, `log.level: unknown value "chatty"`},
		{"bad event id", db, []string{"dead-letters", "replay", "0190a5c4-7c1e-7d3a-9a53-3c8e2d3f1b2a", "not-a-uuid"}, `argument 2: "not-a-uuid" is not an event id`},
		{"no event id", db, []string{"dead-letters", "discard"}, "discard needs at least one event id (or --all)"},
		{"ids and --all", db, []string{"dead-letters", "replay", "--all", "0190a5c4-7c1e-7d3a-9a53-3c8e2d3f1b2a"}, "either event ids or --all"},
		{"bad limit", db, []string{"dead-letters", "list", "--limit", "0"}, "--limit: must be positive, got 0"},
		{"unknown flag", db, []string{"status", "--jsn"}, "unknown flag: --jsn"},
		{"unknown command", db, []string{"stauts"}, `unknown command "stauts"`},
		{"extra argument", db, []string{"status", "now"}, `unknown command "now"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if tc.config != "" {
				dir = writeConfig(t, tc.config)
			}
			res := cli(t, dir, tc.args...)
			if res.code != 2 {
				t.Errorf("want exit 2, got %s", res)
			}
			if !strings.Contains(res.stderr, tc.want) {
				t.Errorf("stderr lacks %q: %s", tc.want, res)
			}
			if !strings.Contains(res.stderr, "--help' for usage") {
				t.Errorf("stderr does not point to --help: %s", res)
			}
			if strings.Contains(res.stdout+res.stderr, "Sup3rSecretPw") {
				t.Errorf("the DSN password was printed: %s", res)
			}
		})
	}
}

func TestMigratePrint(t *testing.T) {
	t.Parallel()
	// --print connects to nothing: the DSN points at a closed port.
	for dialect, want := range map[string]string{
		"postgres": "CREATE TABLE IF NOT EXISTS printed_events",
		"mysql":    "CREATE TABLE IF NOT EXISTS printed_events",
		"sqlite":   "CREATE TABLE IF NOT EXISTS printed_events",
	} {
		dir := writeConfig(t, fmt.Sprintf("database:\n  dialect: %s\n  dsn: x@tcp(%s)/db\n  table: printed_events\n", dialect, closedPort(t)))
		res := cli(t, dir, "migrate", "--print")
		if res.code != 0 || !strings.Contains(res.stdout, want) || !strings.Contains(res.stdout, "-- migration 1:") {
			t.Errorf("migrate --print (%s): %s", dialect, res)
		}
	}
}

func TestMigrateAndStatusSQLite(t *testing.T) {
	t.Parallel()
	dir := writeConfig(t, "database:\n  dialect: sqlite\n  dsn: outbox.db\n")
	for range 2 { // idempotent
		if res := cli(t, dir, "migrate"); res.code != 0 || !strings.Contains(res.stdout, "outbox table outbox_events is up to date (sqlite)") {
			t.Fatalf("migrate: %s", res)
		}
	}
	if res := cli(t, dir, "status", "--json"); res.code != 0 || strings.TrimSpace(res.stdout) != "[]" {
		t.Errorf("status --json on an empty outbox: %s", res)
	}
}

// TestHelp checks that --help of every command explains every one of its flags.
func TestHelp(t *testing.T) {
	t.Parallel()
	root := (&app{}).rootCommand()
	type node struct {
		path  []string
		flags []string
	}
	var nodes []node
	var visit func(path []string, c *cobra.Command)
	visit = func(path []string, c *cobra.Command) {
		var flags []string
		c.Flags().VisitAll(func(f *pflag.Flag) { flags = append(flags, f.Name) })
		c.InheritedFlags().VisitAll(func(f *pflag.Flag) { flags = append(flags, f.Name) })
		nodes = append(nodes, node{path: path, flags: flags})
		for _, sub := range c.Commands() {
			if sub.Name() == "help" {
				continue
			}
			visit(append(append([]string(nil), path...), sub.Name()), sub)
		}
	}
	visit(nil, root)
	if len(nodes) < 8 {
		t.Fatalf("found %d commands, want root, relay, migrate, status, dead-letters and its three", len(nodes))
	}
	for _, n := range nodes {
		res := cli(t, t.TempDir(), append(n.path, "--help")...)
		if res.code != 0 {
			t.Errorf("%v --help: %s", n.path, res)
			continue
		}
		for _, f := range n.flags {
			if !strings.Contains(res.stdout, "--"+f+" ") {
				t.Errorf("%v --help does not mention --%s:\n%s", n.path, f, res.stdout)
			}
		}
	}
}

// outboxkit version and --version print the module version, the VCS revision when built in a
// git checkout, and the Go version.
func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		res := cli(t, t.TempDir(), args...)
		if out := strings.TrimSpace(res.stdout); res.code != 0 || !strings.HasPrefix(out, "outboxkit ") || !strings.Contains(out, " go1.") {
			t.Errorf("%v: %s, want \"outboxkit <version> ... go1.x\"", args, res)
		}
	}
}

func TestMigrateAndStatusMySQL(t *testing.T) {
	t.Parallel()
	db := testsupport.OpenMySQL(t)
	table := testsupport.UniqueName("cli_my")
	t.Cleanup(func() {
		for _, suffix := range []string{"", "_leases", "_relays", "_migrations", "_key_locks"} {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + table + suffix)
		}
	})
	dir := writeConfig(t, fmt.Sprintf("database:\n  dialect: mariadb\n  dsn: %s\n  table: %s\n", testsupport.MySQLDSN(t), table))
	if res := cli(t, dir, "migrate"); res.code != 0 || !strings.Contains(res.stdout, "is up to date (mysql)") {
		t.Fatalf("migrate: %s", res)
	}
	ids := writeEventsIn(t, db, outbox.MySQL, table, "my.topic", 2)
	if _, err := db.Exec("UPDATE "+table+" SET status = 2, attempts = 3, last_error = 'boom' WHERE event_id = ?", ids[0].String()); err != nil {
		t.Fatal(err)
	}
	res := cli(t, dir, "dead-letters", "list", "--json")
	var dead []deadLetterJSON
	if err := json.Unmarshal([]byte(res.stdout), &dead); err != nil || res.code != 0 {
		t.Fatalf("dead-letters list --json: %v\n%s", err, res)
	}
	if len(dead) != 1 || dead[0].EventID != ids[0].String() || dead[0].LastError != "boom" || dead[0].Attempts != 3 {
		t.Errorf("dead letters on MySQL: %+v", dead)
	}
	res = cli(t, dir, "status")
	if fields := strings.Fields(grepLines(res.stdout, "my.topic")); res.code != 0 || len(fields) != 6 || strings.Join(fields[:5], " ") != "my.topic 1 0 1 0" {
		t.Errorf("status on MySQL: %s", res)
	}
	if res := cli(t, dir, "dead-letters", "replay", ids[0].String()); res.code != 0 || !strings.Contains(res.stdout, "replayed 1 of 1") {
		t.Errorf("replay on MySQL: %s", res)
	}
}

func TestUnreachableKafka(t *testing.T) {
	t.Parallel()
	dir := writeConfig(t, pgConfig(testsupport.PostgresDSN(t), "outbox_events", "broker: kafka\nkafka:\n  brokers: ["+closedPort(t)+"]\n"))
	res := cli(t, dir, "relay")
	if res.code != 1 || !strings.Contains(res.stderr, "outboxkit: relay: broker kafka:") || !strings.Contains(res.stderr, "connection refused") {
		t.Errorf("relay with an unreachable Kafka: want exit 1 naming the broker, got %s", res)
	}
}

func TestUnreachablePulsar(t *testing.T) {
	t.Parallel()
	dir := writeConfig(t, pgConfig(testsupport.PostgresDSN(t), "outbox_events",
		"broker: pulsar\npulsar:\n  url: pulsar://"+closedPort(t)+"\n  operation_timeout: 3s\n  connection_timeout: 1s\n"))
	res := cli(t, dir, "relay")
	if res.code != 1 || !strings.Contains(res.stderr, "outboxkit: relay: broker pulsar:") {
		t.Errorf("relay with an unreachable Pulsar: want exit 1 naming the broker, got %s", res)
	}
}
