package faultinject

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Defaults of the dedicated broker: other ports and another state directory than the shared
// test services, so stopping it never disturbs the tests of other packages.
const (
	DefaultStateDir            = "/var/tmp/outboxkit-fault"
	DefaultKafkaPort           = 29092
	DefaultKafkaControllerPort = 29093
	DefaultPulsarPort          = 26650
	DefaultPulsarHTTPPort      = 28080
	DefaultPulsarBookiePort    = 23181
	DefaultNATSPort            = 24222
	DefaultNATSMonitorPort     = 28222
	DefaultRabbitMQPort        = 25682
	DefaultRabbitMQTLSPort     = 25683
	DefaultRabbitMQDistPort    = 25692
	DefaultRabbitMQEPMDPort    = 24369
)

// Broker names accepted by Broker.Kind.
const (
	Kafka    = "kafka"
	Pulsar   = "pulsar"
	NATS     = "nats"
	RabbitMQ = "rabbitmq"
)

// kinds are the brokers scripts/services.sh can start as dedicated ones (start-<kind>).
var kinds = []string{Kafka, Pulsar, NATS, RabbitMQ, KafkaCluster}

// Broker is a dedicated Kafka, Pulsar, NATS (JetStream) or RabbitMQ started and stopped through
// the project's scripts/services.sh (start-<kind>, stop-<kind>).
type Broker struct {
	// Kind is Kafka, Pulsar, NATS or RabbitMQ.
	Kind string
	// RepoRoot is the module's root directory (holding scripts/services.sh).
	RepoRoot string
	// StateDir is the broker's state and log directory. Default DefaultStateDir.
	StateDir string
	// Ports; zero means the Default* constants above.
	KafkaPort, KafkaControllerPort                                    int
	PulsarPort, PulsarHTTPPort, PulsarBookiePort                      int
	NATSPort, NATSMonitorPort                                         int
	RabbitMQPort, RabbitMQTLSPort, RabbitMQDistPort, RabbitMQEPMDPort int

	// KafkaClusterPort and KafkaClusterControllerPort are the first client and controller ports
	// of a KafkaCluster's three nodes (cluster.go).
	KafkaClusterPort, KafkaClusterControllerPort int
}

func (b *Broker) setDefaults() {
	if b.StateDir == "" {
		b.StateDir = DefaultStateDir
	}
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&b.KafkaPort, DefaultKafkaPort)
	def(&b.KafkaControllerPort, DefaultKafkaControllerPort)
	def(&b.PulsarPort, DefaultPulsarPort)
	def(&b.PulsarHTTPPort, DefaultPulsarHTTPPort)
	def(&b.PulsarBookiePort, DefaultPulsarBookiePort)
	def(&b.NATSPort, DefaultNATSPort)
	def(&b.NATSMonitorPort, DefaultNATSMonitorPort)
	def(&b.RabbitMQPort, DefaultRabbitMQPort)
	def(&b.RabbitMQTLSPort, DefaultRabbitMQTLSPort)
	def(&b.RabbitMQDistPort, DefaultRabbitMQDistPort)
	def(&b.RabbitMQEPMDPort, DefaultRabbitMQEPMDPort)
	def(&b.KafkaClusterPort, DefaultKafkaClusterPort)
	def(&b.KafkaClusterControllerPort, DefaultKafkaClusterControllerPort)
}

// Addr is the address clients use: host:port for Kafka, a pulsar:// URL for Pulsar, a nats://
// URL for NATS, an amqp:// URL (with scripts/services.sh's user) for RabbitMQ.
func (b Broker) Addr() string {
	b.setDefaults()
	switch b.Kind {
	case KafkaCluster:
		return strings.Join(b.Addrs(), ",")
	case Pulsar:
		return fmt.Sprintf("pulsar://127.0.0.1:%d", b.PulsarPort)
	case NATS:
		return fmt.Sprintf("nats://127.0.0.1:%d", b.NATSPort)
	case RabbitMQ:
		return fmt.Sprintf("amqp://outboxkit:outboxkit@127.0.0.1:%d/", b.RabbitMQPort)
	}
	return fmt.Sprintf("127.0.0.1:%d", b.KafkaPort)
}

// Start starts the broker unless it already runs, and returns once it serves clients.
func (b Broker) Start(ctx context.Context) error { return b.script(ctx, "start-"+b.Kind) }

// Stop stops the broker (SIGTERM, then SIGKILL after 60 s) and returns once it is gone.
func (b Broker) Stop(ctx context.Context) error { return b.script(ctx, "stop-"+b.Kind) }

// Restart stops the broker, keeps it down for downtime, and starts it again.
func (b Broker) Restart(ctx context.Context, downtime time.Duration) error {
	if err := b.Stop(ctx); err != nil {
		return err
	}
	select {
	case <-time.After(downtime):
	case <-ctx.Done():
		return ctx.Err()
	}
	return b.Start(ctx)
}

func (b Broker) script(ctx context.Context, sub string, args ...string) error {
	b.setDefaults()
	if !slices.Contains(kinds, b.Kind) {
		return fmt.Errorf("faultinject: unknown broker %q (allowed: %s)", b.Kind, strings.Join(kinds, ", "))
	}
	script := filepath.Join(b.RepoRoot, "scripts", "services.sh")
	cmd := exec.CommandContext(ctx, "bash", append([]string{script, sub}, args...)...)
	cmd.Env = append(os.Environ(),
		"SERVICES_STATE_DIR="+b.StateDir,
		"SERVICES_LOG_DIR="+filepath.Join(b.StateDir, "logs"),
		"KAFKA_PORT="+strconv.Itoa(b.KafkaPort),
		"KAFKA_CONTROLLER_PORT="+strconv.Itoa(b.KafkaControllerPort),
		"PULSAR_PORT="+strconv.Itoa(b.PulsarPort),
		"PULSAR_HTTP_PORT="+strconv.Itoa(b.PulsarHTTPPort),
		"PULSAR_BOOKIE_PORT="+strconv.Itoa(b.PulsarBookiePort),
		"NATS_PORT="+strconv.Itoa(b.NATSPort),
		"NATS_MONITOR_PORT="+strconv.Itoa(b.NATSMonitorPort),
		"RABBITMQ_PORT="+strconv.Itoa(b.RabbitMQPort),
		"RABBITMQ_TLS_PORT="+strconv.Itoa(b.RabbitMQTLSPort),
		"RABBITMQ_DIST_PORT="+strconv.Itoa(b.RabbitMQDistPort),
		"RABBITMQ_EPMD_PORT="+strconv.Itoa(b.RabbitMQEPMDPort),
		"RABBITMQ_NODE_NAME=outboxkit-fault-"+strconv.Itoa(b.RabbitMQPort)+"@localhost",
		"KAFKA_CLUSTER_PORT="+strconv.Itoa(b.KafkaClusterPort),
		"KAFKA_CLUSTER_CONTROLLER_PORT="+strconv.Itoa(b.KafkaClusterControllerPort),
		"KAFKA_CLUSTER_DIR="+filepath.Join(b.StateDir, "kafka-cluster"),
	)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("faultinject: %s %s%s (state %s): %w: %s", script, sub, strings.Join(append([]string{""}, args...), " "), b.StateDir, err,
			strings.TrimSpace(out.String()))
	}
	return nil
}

// RepoRoot returns the root of the module containing the working directory (go env GOMOD).
func RepoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("faultinject: go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("faultinject: not inside the outboxkit module (go env GOMOD is %q)", mod)
	}
	return filepath.Dir(mod), nil
}

// BuildCLI builds the outboxkit binary (./cmd/outboxkit) into dir and returns its path.
func BuildCLI(ctx context.Context, repoRoot, dir string) (string, error) {
	bin := filepath.Join(dir, "outboxkit")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/outboxkit")
	cmd.Dir = repoRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("faultinject: go build ./cmd/outboxkit: %w: %s", err, out)
	}
	return bin, nil
}
