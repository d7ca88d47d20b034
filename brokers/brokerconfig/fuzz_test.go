package brokerconfig_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
)

// fuzzSecret is given through the environment; Parse's errors and the printed configuration
// must never contain it.
const fuzzSecret = "Fz-S3cret-7d1e9a"

// FuzzParse: any YAML document (with secrets in the environment) parses or fails without a
// panic, and neither the error nor the printed configuration shows a secret.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		"",
		"broker: kafka\nkafka:\n  brokers: [a:1]\n",
		"broker: kafka\nkafka:\n  brokers: [a:1]\n  sasl: {mechanism: SCRAM-SHA-512, username: u}\n",
		"broker: kafka\nkafka:\n  brokers: [a:1]\n  sasl: {mechanism: NOPE}\n",
		"broker: pulsar\npulsar:\n  url: pulsar://h:6650\n  tenant: 'a b'\n",
		"broker: pulsar\npulsar:\n  url: ftp://h\n  send_timeout: 5\n",
		"broker: rabbitmq\n",
		"broker: kfake\nkfake: {partitions: -1}\n",
		"broker: kafka\nkafka: {brokers: [a:1], brokerz: 1}\n",
		"broker: [kafka\n",
		"a: &x [*x]\n",
		"broker: kafka\nbroker: pulsar\n",
		"broker: kfake\nformat: cloudevents\ncloudevents: {source: /billing}\n",
		"broker: kfake\nformat: cloudevents\ncloudevents: {source: 'a b%'}\n",
	} {
		f.Add([]byte(seed))
	}
	env := map[string]string{
		"OUTBOXKIT_KAFKA_SASL_PASSWORD": fuzzSecret,
		"OUTBOXKIT_PULSAR_AUTH_TOKEN":   fuzzSecret,
	}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	f.Fuzz(func(t *testing.T, data []byte) {
		if bytes.Contains(data, []byte(fuzzSecret)) {
			return // the document itself shows the value elsewhere
		}
		cfg, err := brokerconfig.Parse(data, lookup)
		if err != nil {
			if strings.Contains(err.Error(), fuzzSecret) {
				t.Fatalf("error shows the secret: %v", err)
			}
			return
		}
		var buf bytes.Buffer
		slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "config", cfg)
		for name, out := range map[string]string{"String": cfg.String(), "%+v": fmt.Sprintf("%+v", cfg),
			"%#v": fmt.Sprintf("%#v", cfg), "slog": buf.String()} {
			if strings.Contains(out, fuzzSecret) {
				t.Fatalf("%s shows the secret: %s", name, out)
			}
		}
	})
}
