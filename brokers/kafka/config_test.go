package kafka_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/outboxkit/outboxkit/brokers/kafka"
)

func validConfig() kafka.Config {
	return kafka.Config{Brokers: []string{"127.0.0.1:9092"}}
}

func TestConfigValidateNamesTheBadField(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.pem")
	cases := []struct {
		name   string
		mutate func(*kafka.Config)
		want   string // substrings of the error: field and value
	}{
		{"no brokers", func(c *kafka.Config) { c.Brokers = nil }, "brokers: missing"},
		{"bad broker", func(c *kafka.Config) { c.Brokers = []string{"localhost"} }, `brokers[0]: "localhost"`},
		{"bad version", func(c *kafka.Config) { c.Version = "banana" }, `version: "banana"`},
		{"old version", func(c *kafka.Config) { c.Version = "1.0.0" }, `version: "1.0.0" is older than 2.1.0`},
		{"compression", func(c *kafka.Config) { c.Compression = "brotli" }, `compression: unknown value "brotli"`},
		{"partitioner", func(c *kafka.Config) { c.Partitioner = "random" }, `partitioner: unknown value "random"`},
		{"message max bytes", func(c *kafka.Config) { c.MessageMaxBytes = -1 }, "message_max_bytes: -1"},
		{"message max bytes too small", func(c *kafka.Config) { c.MessageMaxBytes = 100 }, "message_max_bytes: 100 is outside 512.."},
		{"message max bytes too large", func(c *kafka.Config) { c.MessageMaxBytes = 200 << 20 }, "message_max_bytes: 209715200"},
		{"producer retries", func(c *kafka.Config) { c.ProducerRetries = -2 }, "producer_retries: -2"},
		{"retry backoff", func(c *kafka.Config) { c.RetryBackoff = -time.Second }, "retry_backoff: -1s"},
		{"initial offset", func(c *kafka.Config) { c.InitialOffset = "latest" }, `initial_offset: unknown value "latest"`},
		{"nack resend sleep", func(c *kafka.Config) { c.NackResendSleep = -time.Second }, "nack_resend_sleep: -1s"},
		{"session timeout", func(c *kafka.Config) { c.SessionTimeout = -time.Second }, "session_timeout: -1s"},
		{"heartbeat interval", func(c *kafka.Config) { c.HeartbeatInterval = time.Minute }, "heartbeat_interval: 1m0s"},
		{"rebalance timeout", func(c *kafka.Config) { c.RebalanceTimeout = -time.Second }, "rebalance_timeout: -1s"},
		{"topic partitions", func(c *kafka.Config) { c.TopicPartitions = -3 }, "topic_partitions: -3"},
		{"replication", func(c *kafka.Config) { c.TopicReplicationFactor = -2 }, "topic_replication_factor: -2"},
		{"cert without key", func(c *kafka.Config) { c.TLS.CertFile = missing }, "tls.cert_file"},
		{"missing ca file", func(c *kafka.Config) { c.TLS.CAFile = missing }, "tls.ca_file: " + fmt.Sprintf("%q", missing)},
		{"missing cert files", func(c *kafka.Config) { c.TLS.CertFile, c.TLS.KeyFile = missing, missing }, "tls.cert_file: "},
		{"sasl mechanism", func(c *kafka.Config) { c.SASL = kafka.SASLConfig{Mechanism: "GSSAPI", Username: "u", Password: "p"} }, `sasl.mechanism: unknown value "GSSAPI"`},
		{"sasl without mechanism", func(c *kafka.Config) { c.SASL = kafka.SASLConfig{Username: "u", Password: "p"} }, "sasl.mechanism: missing"},
		{"sasl username", func(c *kafka.Config) { c.SASL = kafka.SASLConfig{Mechanism: "PLAIN", Password: "p"} }, "sasl.username: missing"},
		{"sasl password", func(c *kafka.Config) { c.SASL = kafka.SASLConfig{Mechanism: "SCRAM-SHA-512", Username: "u"} }, "sasl.password: missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			c.SetDefaults()
			tc.mutate(&c)
			err := c.Validate()
			if err == nil {
				t.Fatalf("Validate accepted %v", c)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not contain %q", err, tc.want)
			}
			// The same error comes out of the constructors.
			if _, err := kafka.NewPublisher(c, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewPublisher error %v does not contain %q", err, tc.want)
			}
			if _, err := kafka.NewSubscriber(c, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewSubscriber error %v does not contain %q", err, tc.want)
			}
		})
	}
}

// SaramaConfig is the subscriber's: protocol version, client id, offsets, SASL; it holds no
// producer settings any more (the publisher is franz-go, see TestKgoOptions).
func TestSaramaConfigDefaults(t *testing.T) {
	sc, err := validConfig().SaramaConfig()
	if err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"version", sc.Version, sarama.V2_8_0_0},
		{"initial offset", sc.Consumer.Offsets.Initial, sarama.OffsetOldest},
		{"client id", sc.ClientID, "outboxkit"},
		{"session timeout", sc.Consumer.Group.Session.Timeout, 10 * time.Second},
		{"tls", sc.Net.TLS.Enable, false},
		{"sasl", sc.Net.SASL.Enable, false},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}

	c := validConfig()
	c.InitialOffset, c.Version = kafka.OffsetNewest, "3.6.0"
	c.SASL = kafka.SASLConfig{Mechanism: kafka.SASLScramSHA256, Username: "u", Password: "p"}
	sc, err = c.SaramaConfig()
	if err != nil {
		t.Fatal(err)
	}
	if sc.Consumer.Offsets.Initial != sarama.OffsetNewest || sc.Version != sarama.V3_6_0_0 ||
		sc.Net.SASL.Mechanism != sarama.SASLTypeSCRAMSHA256 || sc.Net.SASL.SCRAMClientGeneratorFunc == nil {
		t.Errorf("settings not applied: offset %d, version %v, sasl %v", sc.Consumer.Offsets.Initial,
			sc.Version, sc.Net.SASL.Mechanism)
	}
}

func TestConfigRedactsPassword(t *testing.T) {
	const secret = "s3cr3t-Passw0rd"
	c := validConfig()
	c.SASL = kafka.SASLConfig{Mechanism: "PLAIN", Username: "alice", Password: secret}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("config", "kafka", c)
	outputs := map[string]string{
		"String": c.String(), "%v": fmt.Sprintf("%v", c), "%+v": fmt.Sprintf("%+v", c),
		"sasl %#v": fmt.Sprintf("%#v", c.SASL), "sasl %+v": fmt.Sprintf("%+v", c.SASL), "slog": buf.String(),
	}
	for name, out := range outputs {
		if strings.Contains(out, secret) {
			t.Errorf("%s shows the password: %s", name, out)
		}
		if !strings.Contains(out, "alice") || !strings.Contains(out, "REDACTED") {
			t.Errorf("%s lacks the username or the redaction mark: %s", name, out)
		}
	}
	c.SASL.Mechanism = "OAUTH"
	if err := c.Validate(); err == nil || strings.Contains(err.Error(), secret) {
		t.Errorf("validation error shows the password or is missing: %v", err)
	}
}

func TestTLSFilesAreLoaded(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := validConfig()
	c.TLS.CAFile = bad
	if _, err := c.SaramaConfig(); err == nil || !strings.Contains(err.Error(), "tls.ca_file") {
		t.Fatalf("a CA file without certificates must fail naming tls.ca_file, got %v", err)
	}
}
