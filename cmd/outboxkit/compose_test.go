package main

import (
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/relayconfig"
)

// composeFile is the part of docker-compose.yml the test checks.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
}

// composeService is the part of a compose service the test checks.
type composeService struct {
	Image       string            `yaml:"image"`
	Build       any               `yaml:"build"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Volumes     []string          `yaml:"volumes"`
	Ports       []string          `yaml:"ports"`
	DependsOn   map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
	Healthcheck struct {
		Test []string `yaml:"test"`
	} `yaml:"healthcheck"`
}

// TestDockerCompose checks what can be checked without Docker: the compose file parses, has the
// services with the images the project targets, and the relay's mounted configuration loads with
// the CLI's own loader and points at the compose services.
func TestDockerCompose(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	data, err := os.ReadFile(filepath.Join(root, "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose composeFile
	if err := yaml.Unmarshal(data, &compose); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	checkComposeServices(t, compose)
	relay, mounted := checkComposeRelay(t, compose)
	checkComposeRelayConfig(t, compose, relay, filepath.Join(root, mounted))
	checkDockerfile(t, root)
}

// checkComposeServices checks the images, environment, health checks and commands of the
// database and broker services.
func checkComposeServices(t *testing.T, compose composeFile) {
	images := map[string]string{
		"postgres": "postgres:15",
		"mysql":    "mysql:8",
		"kafka":    "apache/kafka:4.1.1",
		"pulsar":   "apachepulsar/pulsar:4.0.7",
	}
	for name, image := range images {
		svc, ok := compose.Services[name]
		if !ok {
			t.Errorf("service %s is missing", name)
			continue
		}
		if svc.Image != image {
			t.Errorf("service %s runs %q, want %q", name, svc.Image, image)
		}
	}
	pg := compose.Services["postgres"].Environment
	if pg["POSTGRES_USER"] != "outboxkit" || pg["POSTGRES_PASSWORD"] != "outboxkit" || pg["POSTGRES_DB"] != "outboxkit" {
		t.Errorf("postgres environment: %v", pg)
	}
	kafkaEnv := compose.Services["kafka"].Environment
	for _, key := range []string{"KAFKA_NODE_ID", "KAFKA_PROCESS_ROLES", "KAFKA_LISTENERS", "KAFKA_ADVERTISED_LISTENERS",
		"KAFKA_CONTROLLER_QUORUM_VOTERS", "KAFKA_CONTROLLER_LISTENER_NAMES", "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"} {
		if kafkaEnv[key] == "" {
			t.Errorf("kafka service lacks %s", key)
		}
	}
	if kafkaEnv["KAFKA_PROCESS_ROLES"] != "broker,controller" {
		t.Errorf("kafka is not a combined KRaft node: %q", kafkaEnv["KAFKA_PROCESS_ROLES"])
	}
	checkComposeHealth(t, compose)
	if pgCmd := strings.Join(compose.Services["postgres"].Command, " "); !strings.Contains(pgCmd, "wal_level=logical") {
		t.Errorf("postgres command %q: no wal_level=logical (the cdc source needs it)", pgCmd)
	}
	pulsarCmd := strings.Join(compose.Services["pulsar"].Command, " ")
	if !strings.Contains(pulsarCmd, "bin/apply-config-from-env.py conf/standalone.conf") ||
		!strings.Contains(pulsarCmd, "bin/pulsar standalone -nfw -nss") {
		t.Errorf("pulsar command %q: want the PULSAR_PREFIX_ settings applied, then a lean standalone", pulsarCmd)
	}
	checkPulsarListeners(t, compose.Services["pulsar"].Environment, compose.Services["pulsar"].Ports)
}

// checkComposeRelay checks the relay service and returns it with the host path of the
// configuration it mounts.
func checkComposeRelay(t *testing.T, compose composeFile) (composeService, string) {
	relay, ok := compose.Services["relay"]
	if !ok {
		t.Fatal("service relay is missing")
	}
	if relay.Build == nil {
		t.Error("relay is not built from the Dockerfile")
	}
	if got := strings.Join(relay.Command, " "); got != "relay --config /etc/outboxkit/outboxkit.yaml --migrate" {
		t.Errorf("relay command %q", got)
	}
	for _, dep := range []string{"postgres", "kafka"} {
		if relay.DependsOn[dep].Condition != "service_healthy" {
			t.Errorf("relay does not wait for a healthy %s", dep)
		}
	}
	var mounted string
	for _, v := range relay.Volumes {
		if host, rest, ok := strings.Cut(v, ":"); ok && strings.HasPrefix(rest, "/etc/outboxkit/outboxkit.yaml") {
			mounted = host
		}
	}
	if mounted != "./examples/compose/outboxkit.yaml" {
		t.Fatalf("relay mounts %q as its configuration, want ./examples/compose/outboxkit.yaml", mounted)
	}
	return relay, mounted
}

// checkComposeRelayConfig loads the relay's mounted configuration (path) with the CLI's own
// loader and checks that it points at the compose services.
func checkComposeRelayConfig(t *testing.T, compose composeFile, relay composeService, path string) {
	pg := compose.Services["postgres"].Environment
	kafkaEnv := compose.Services["kafka"].Environment
	cfg, err := relayconfig.Load(path, nil, relayconfig.Options{Broker: true})
	if err != nil {
		t.Fatalf("the relay's compose configuration does not load: %v", err)
	}
	dsn, err := url.Parse(cfg.Database.DSN)
	if err != nil {
		t.Fatal(err)
	}
	if pass, _ := dsn.User.Password(); dsn.Hostname() != "postgres" || dsn.User.Username() != pg["POSTGRES_USER"] ||
		pass != pg["POSTGRES_PASSWORD"] || strings.TrimPrefix(dsn.Path, "/") != pg["POSTGRES_DB"] {
		t.Errorf("database.dsn %s does not match the postgres service", relayconfig.RedactDSN(cfg.Database.DSN))
	}
	if cfg.Broker.Broker != brokerconfig.BrokerKafka {
		t.Errorf("broker %q, want kafka", cfg.Broker.Broker)
	}
	// The relay must use the listener Kafka advertises to the other containers.
	for _, b := range cfg.Broker.Kafka.Brokers {
		if !strings.Contains(kafkaEnv["KAFKA_ADVERTISED_LISTENERS"], "://"+b) {
			t.Errorf("kafka.brokers %s is not an advertised listener (%s)", b, kafkaEnv["KAFKA_ADVERTISED_LISTENERS"])
		}
	}
	if !strings.HasPrefix(cfg.HTTP.Listen, "0.0.0.0:") || !slices.ContainsFunc(relay.Ports, func(p string) bool {
		return strings.HasSuffix(p, ":"+strings.TrimPrefix(cfg.HTTP.Listen, "0.0.0.0:"))
	}) {
		t.Errorf("http.listen %q is not reachable through the relay's published ports %v", cfg.HTTP.Listen, relay.Ports)
	}
}

// checkDockerfile checks that the Dockerfile builds the CLI and runs it.
func checkDockerfile(t *testing.T, root string) {
	dockerfile, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"FROM golang:1.26 AS build", "./cmd/outboxkit", `ENTRYPOINT ["/usr/local/bin/outboxkit"]`} {
		if !strings.Contains(string(dockerfile), want) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}

// TestExampleConfig checks that the documented example configuration loads and lists every key
// of the CLI's own sections.
func TestExampleConfig(t *testing.T) {
	t.Parallel()
	cfg, err := relayconfig.Load("outboxkit.example.yaml", nil, relayconfig.Options{Broker: true})
	if err != nil {
		t.Fatalf("outboxkit.example.yaml: %v", err)
	}
	if cfg.HTTP.Listen != relayconfig.DefaultListen || cfg.Forwarder.BatchSize != 1000 || cfg.Broker.Broker != "kafka" {
		t.Errorf("example configuration: %+v", cfg)
	}
	data, err := os.ReadFile("outboxkit.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"dialect", "dsn", "table", "batch_size", "workers", "max_attempts", "initial_interval",
		"max_interval", "dead_letter_topic", "retention", "prune_interval", "lease_ttl", "tenants", "lease_group",
		"relay_id", "min_poll_interval", "max_poll_interval", "listen", "level", "format"} {
		if !strings.Contains(string(data), "\n  "+key+":") {
			t.Errorf("outboxkit.example.yaml does not show %s", key)
		}
	}
}

// checkComposeHealth: every service has a healthcheck, and every dependency waits for a healthy
// service (the relay's healthcheck is the binary's own probe: its image has no shell or curl).
func checkComposeHealth(t *testing.T, compose composeFile) {
	t.Helper()
	for name, svc := range compose.Services {
		if len(svc.Healthcheck.Test) < 2 || (svc.Healthcheck.Test[0] != "CMD" && svc.Healthcheck.Test[0] != "CMD-SHELL") {
			t.Errorf("service %s has no healthcheck command: %v", name, svc.Healthcheck.Test)
		}
		for dep, d := range svc.DependsOn {
			if _, ok := compose.Services[dep]; !ok {
				t.Errorf("service %s depends on %s, which does not exist", name, dep)
			}
			if d.Condition != "service_healthy" {
				t.Errorf("service %s waits for %s to be %q, want service_healthy", name, dep, d.Condition)
			}
		}
	}
	if got := strings.Join(compose.Services["relay"].Healthcheck.Test, " "); !strings.HasPrefix(got, "CMD /usr/local/bin/outboxkit probe --url http://127.0.0.1:9464/livez") {
		t.Errorf("relay healthcheck %q: want the binary probing its /livez", got)
	}
}

// checkPulsarListeners: Pulsar answers lookups with the address of the listener a client
// connected to, so the containers' listener must be pulsar:6650 and the host's localhost on a
// published port that reaches the host listener's bind port.
func checkPulsarListeners(t *testing.T, env map[string]string, ports []string) {
	t.Helper()
	listeners := map[string]string{} // name -> advertised URL
	for _, l := range strings.Split(env["PULSAR_PREFIX_advertisedListeners"], ",") {
		if name, u, ok := strings.Cut(l, ":"); ok {
			listeners[name] = u
		}
	}
	binds := map[string]string{}
	for _, l := range strings.Split(env["PULSAR_PREFIX_bindAddresses"], ",") {
		if name, u, ok := strings.Cut(l, ":"); ok {
			binds[name] = u
		}
	}
	internal := env["PULSAR_PREFIX_internalListenerName"]
	if listeners[internal] != "pulsar://pulsar:6650" || binds[internal] != "pulsar://0.0.0.0:6650" {
		t.Errorf("the internal listener %q is %q bound to %q, want pulsar://pulsar:6650 on 0.0.0.0:6650", internal, listeners[internal], binds[internal])
	}
	var external string
	for name, u := range listeners {
		if name != internal && strings.HasPrefix(u, "pulsar://localhost:") {
			external = name
		}
	}
	if external == "" {
		t.Fatalf("no listener advertises localhost for the host: %v", listeners)
	}
	hostPort := strings.TrimPrefix(listeners[external], "pulsar://localhost:")
	bindPort := binds[external][strings.LastIndexByte(binds[external], ':')+1:]
	if !slices.Contains(ports, hostPort+":"+bindPort) {
		t.Errorf("listener %s advertises localhost:%s, but no published port maps it to its bind port %s: %v",
			external, hostPort, bindPort, ports)
	}
}
