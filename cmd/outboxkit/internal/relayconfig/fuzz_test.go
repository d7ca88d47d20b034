package relayconfig_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/relayconfig"
)

// fuzzSecret is the DSN password and the broker secrets, given through the environment.
const fuzzSecret = "Fz-S3cret-4b2c8e"

// FuzzParse: any configuration file parses or fails without a panic; neither the error, nor
// the printed configuration, nor a scrubbed error shows a secret.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"",
		"database:\n  dialect: postgres\n  table: outbox_events\nbroker: kfake\n",
		"database:\n  dialect: postgres\n  table: 'outbox\"; DROP TABLE users; --'\nbroker: kfake\n",
		"database: {dialect: oracle}\nforwarder: {batch_size: -1}\n",
		"database:\n  dialect: mysql\nforwarder:\n  workerz: 2\n",
		"database:\n  dialect: sqlite\nforwarder:\n  lease_ttl: 10\n  max_interval: 1ms\n  initial_interval: 1s\n",
		"database:\n  dialect: postgres\nhttp: {listen: ':x'}\nlog: {level: loud, format: xml}\n",
		"database:\n  dialect: postgres\nforwarder:\n  tenants: [a, a]\n  relay_id: ''\n",
		"database:\n  dialect: postgres\nbroker: kafka\nkafka: {brokers: [a:1], sasl: {mechanism: PLAIN, username: u}}\n",
		"database:\n  dialect: postgres\n  dialect: mysql\n",
		"- a\n- b\n",
	} {
		f.Add([]byte(seed), true)
	}
	env := map[string]string{
		relayconfig.EnvDatabaseDSN:      "postgres://relay:" + fuzzSecret + "@db:5432/app?sslmode=disable",
		"OUTBOXKIT_KAFKA_SASL_PASSWORD": fuzzSecret,
		"OUTBOXKIT_PULSAR_AUTH_TOKEN":   fuzzSecret,
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	f.Fuzz(func(t *testing.T, data []byte, withBroker bool) {
		if bytes.Contains(data, []byte(fuzzSecret)) {
			return
		}
		cfg, err := relayconfig.Parse(data, lookup, relayconfig.Options{Broker: withBroker})
		if err != nil {
			if strings.Contains(err.Error(), fuzzSecret) {
				t.Fatalf("error shows the secret: %v", err)
			}
			return
		}
		var buf bytes.Buffer
		slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "config", cfg)
		scrub := cfg.Scrubber()
		for name, out := range map[string]string{"String": cfg.String(), "%+v": fmt.Sprintf("%+v", cfg),
			"%#v": fmt.Sprintf("%#v", cfg), "slog": buf.String(),
			"scrubbed error": scrub("dial " + env[relayconfig.EnvDatabaseDSN] + ": password " + fuzzSecret)} {
			if strings.Contains(out, fuzzSecret) {
				t.Fatalf("%s shows the secret: %s", name, out)
			}
		}
	})
}
