package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

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
		{"scheduled: bad event id", db, []string{"scheduled", "cancel", "0190a5c4-7c1e-7d3a-9a53-3c8e2d3f1b2a", "tomorrow"}, `argument 2: "tomorrow" is not an event id`},
		{"scheduled: no event id", db, []string{"scheduled", "cancel"}, "requires at least 1 arg"},
		{"scheduled: bad limit", db, []string{"scheduled", "list", "--limit", "-3"}, "--limit: must be positive, got -3"},
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
