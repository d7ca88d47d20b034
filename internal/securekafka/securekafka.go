// Package securekafka starts, for the tests that need it, the SASL_SSL (SCRAM-SHA-512) Kafka
// broker with ACLs of scripts/services.sh (start-kafka-secure, idempotent) and gives them its
// address, certificate files, users and passwords. A broker that cannot be started fails the
// test with CI=true and skips it elsewhere (testsupport.Unavailable).
package securekafka

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/internal/servicescript"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// Environment variables printed by `scripts/services.sh env`, with the script's defaults.
const (
	EnvBrokers         = "OUTBOXKIT_TEST_KAFKA_SECURE_BROKERS"
	EnvCAFile          = "OUTBOXKIT_TEST_KAFKA_SECURE_CA_FILE"
	EnvUntrustedCAFile = "OUTBOXKIT_TEST_KAFKA_SECURE_UNTRUSTED_CA_FILE"
	EnvSecretsDir      = "OUTBOXKIT_TEST_KAFKA_SECURE_SECRETS_DIR"

	DefaultBrokers    = "127.0.0.1:19094"
	DefaultDir        = "/var/tmp/outboxkit-services/kafka-secure"
	DefaultCAFile     = DefaultDir + "/tls/ca.pem"
	DefaultUntrusted  = DefaultDir + "/tls/untrusted-ca.pem"
	DefaultSecretsDir = DefaultDir + "/secrets"
)

// The broker's SASL mechanism, its users and what the ACLs of scripts/services/kafka-secure.sh
// let them do.
const (
	Mechanism = kafka.SASLScramSHA512
	// AdminUser is the super user.
	AdminUser = "admin"
	// RelayUser may write to (and create) topics starting with GrantedPrefix only.
	RelayUser = "relay"
	// ConsumerUser may read topics starting with GrantedPrefix or RefusedPrefix, in consumer
	// groups starting with GroupPrefix.
	ConsumerUser  = "consumer"
	GrantedPrefix = "granted-"
	RefusedPrefix = "refused-"
	GroupPrefix   = "secure-"
)

// Broker is the running secure broker.
type Broker struct {
	// Addr is the SASL_SSL listener (host:port).
	Addr string
	// CAFile is the PEM file of the CA that signed the broker's certificate.
	CAFile string
	// UntrustedCAFile is the PEM file of a CA that signed nothing the broker presents.
	UntrustedCAFile string
	// SecretsDir holds <user>.password.
	SecretsDir string
	script     servicescript.Script // with the overrides of its ports and directories (StartInstance)
}

// Instance is a secure broker of its own, apart from the shared one: its state directory and
// ports. Use one for a test that stops or restarts the broker.
type Instance struct {
	Dir                  string
	Port, ControllerPort int
}

// Start starts the secure broker through scripts/services.sh (a no-op when it runs) and
// returns it.
func Start(t testing.TB) Broker {
	t.Helper()
	script, err := servicescript.Find()
	if err != nil {
		t.Fatal(err)
	}
	b := Broker{
		Addr:            servicescript.Env(EnvBrokers, DefaultBrokers),
		CAFile:          servicescript.Env(EnvCAFile, DefaultCAFile),
		UntrustedCAFile: servicescript.Env(EnvUntrustedCAFile, DefaultUntrusted),
		SecretsDir:      servicescript.Env(EnvSecretsDir, DefaultSecretsDir),
		script:          script,
	}
	if err := b.run("start-kafka-secure"); err != nil {
		testsupport.Unavailable(t, "the secure Kafka broker (scripts/services.sh start-kafka-secure)", err)
	}
	return b
}

// StartInstance starts the secure broker inst (a no-op when it runs) and returns it. Stop it
// with Script("stop-kafka-secure").
func StartInstance(t testing.TB, inst Instance) Broker {
	t.Helper()
	script, err := servicescript.Find(
		"KAFKA_SECURE_DIR="+inst.Dir,
		"SERVICES_LOG_DIR="+filepath.Join(inst.Dir, "logs"),
		fmt.Sprintf("KAFKA_SECURE_PORT=%d", inst.Port),
		fmt.Sprintf("KAFKA_SECURE_CONTROLLER_PORT=%d", inst.ControllerPort),
	)
	if err != nil {
		t.Fatal(err)
	}
	b := Broker{
		Addr:            fmt.Sprintf("127.0.0.1:%d", inst.Port),
		CAFile:          filepath.Join(inst.Dir, "tls", "ca.pem"),
		UntrustedCAFile: filepath.Join(inst.Dir, "tls", "untrusted-ca.pem"),
		SecretsDir:      filepath.Join(inst.Dir, "secrets"),
		script:          script,
	}
	if err := os.MkdirAll(filepath.Join(inst.Dir, "logs"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := b.run("start-kafka-secure"); err != nil {
		testsupport.Unavailable(t, "the secure Kafka broker in "+inst.Dir+" (scripts/services.sh start-kafka-secure)", err)
	}
	return b
}

// Command returns the command line that runs `scripts/services.sh sub` for this broker, e.g.
// for Watermill's Features.RestartServiceCommand with "restart-kafka-secure".
func (b Broker) Command(sub string) []string { return b.script.Command(sub) }

// Script runs `scripts/services.sh sub` for this broker.
func (b Broker) Script(sub string) error { return b.run(sub) }

// Password returns the SCRAM password of user, read from its file.
func (b Broker) Password(t testing.TB, user string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(b.SecretsDir, user+".password"))
	if err != nil {
		t.Fatalf("securekafka: password of %s: %v", user, err)
	}
	return strings.TrimSpace(string(data))
}

// Config returns a Kafka configuration that reaches the broker over SASL_SSL as user, trusting
// the broker's CA.
func (b Broker) Config(t testing.TB, user string) kafka.Config {
	t.Helper()
	return kafka.Config{
		Brokers: []string{b.Addr},
		TLS:     kafka.TLSConfig{Enabled: true, CAFile: b.CAFile},
		SASL:    kafka.SASLConfig{Mechanism: Mechanism, Username: user, Password: b.Password(t, user)},
	}
}

// Grant lets the relay user write to (and create) topic, with Kafka's AclCommand
// (scripts/services.sh kafka-secure-grant).
func (b Broker) Grant(t testing.TB, topic string) {
	t.Helper()
	if err := b.run("kafka-secure-grant", topic, RelayUser); err != nil {
		t.Fatal(err)
	}
}

func (b Broker) run(args ...string) error { return b.script.Run(context.Background(), args...) }
