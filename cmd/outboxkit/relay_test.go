package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

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
	for deadline := time.Now().Add(2 * time.Minute); ; { // a bound against a hang
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
			code, exited := p.waitFor(2 * time.Minute) // a bound against a hang: it exits at once
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

func TestRelayKafka(t *testing.T) {
	t.Parallel()
	brokers := testsupport.KafkaBrokers(t)
	relayScenario(t, fmt.Sprintf("broker: kafka\nkafka:\n  brokers: [%s]\n", strings.Join(brokers, ", ")),
		func([]string) []string { return brokers }, true)
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
