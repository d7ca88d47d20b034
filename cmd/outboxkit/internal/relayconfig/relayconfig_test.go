package relayconfig

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
)

const base = `
database:
  dialect: postgres
  dsn: postgres://relay:s3cret-pw@db:5432/app
`

func env(vars map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

func TestParseFull(t *testing.T) {
	doc := `
database:
  dialect: postgresql
  dsn: postgres://relay:s3cret-pw@db:5432/app
  table: app.events
forwarder:
  batch_size: 200
  max_batch_bytes: 1048576
  workers: 4
  max_attempts: 7
  unlimited_retries: true
  initial_interval: 250ms
  max_interval: 1m
  dead_letter_topic: app.dead
  retention: 24h
  prune_interval: 30s
  lease_ttl: 15s
  tenants: [acme, ""]
  lease_group: eu
  relay_id: relay-1
  min_poll_interval: 5ms
  max_poll_interval: 2s
http:
  listen: 0.0.0.0:9000
log:
  level: debug
  format: json
broker: kafka
kafka:
  brokers: [k1:9092, k2:9092]
  sasl:
    mechanism: PLAIN
    username: relay
    password: kafka-secret
`
	cfg, err := Parse([]byte(doc), nil, Options{Broker: true})
	if err != nil {
		t.Fatal(err)
	}
	want := Forwarder{BatchSize: 200, MaxBatchBytes: 1 << 20, UnlimitedRetries: true, Workers: 4, MaxAttempts: 7, InitialInterval: 250 * time.Millisecond,
		MaxInterval: time.Minute, DeadLetterTopic: "app.dead", Retention: 24 * time.Hour, PruneInterval: 30 * time.Second,
		LeaseTTL: 15 * time.Second, Tenants: []string{"acme", ""}, LeaseGroup: "eu", RelayID: "relay-1",
		MinPollInterval: 5 * time.Millisecond, MaxPollInterval: 2 * time.Second}
	if fmt.Sprint(cfg.Forwarder) != fmt.Sprint(want) {
		t.Errorf("forwarder section:\n got %+v\nwant %+v", cfg.Forwarder, want)
	}
	if cfg.Database.Dialect != outbox.Postgres || cfg.Database.Table != "app.events" {
		t.Errorf("database section: %v", cfg.Database)
	}
	if cfg.HTTP.Listen != "0.0.0.0:9000" || cfg.Log.Level != slog.LevelDebug || cfg.Log.Format != "json" {
		t.Errorf("http/log sections: %+v %+v", cfg.HTTP, cfg.Log)
	}
	if cfg.Broker.Broker != "kafka" || strings.Join(cfg.Broker.Kafka.Brokers, ",") != "k1:9092,k2:9092" ||
		cfg.Broker.Kafka.SASL.Password != "kafka-secret" {
		t.Errorf("broker part: %+v", cfg.Broker.Kafka)
	}

	var fc forwarder.Config
	cfg.Forwarder.Apply(&fc)
	if fc.BatchSize != 200 || fc.Workers != 4 || fc.MaxAttempts != 7 || fc.InitialInterval != 250*time.Millisecond ||
		fc.MaxInterval != time.Minute || fc.DeadLetterTopic != "app.dead" || fc.Retention != 24*time.Hour ||
		fc.PruneInterval != 30*time.Second || fc.LeaseTTL != 15*time.Second || len(fc.Tenants) != 2 ||
		fc.LeaseGroup != "eu" || fc.RelayID != "relay-1" || fc.MinPollInterval != 5*time.Millisecond ||
		fc.MaxPollInterval != 2*time.Second || fc.MaxBatchBytes != 1<<20 || !fc.UnlimitedRetries {
		t.Errorf("Apply: %+v", fc)
	}

	printed := fmt.Sprintf("%v %+v %#v %s", cfg, cfg, cfg, cfg.Database)
	for _, secret := range []string{"s3cret-pw", "kafka-secret"} {
		if strings.Contains(printed, secret) {
			t.Errorf("printed configuration shows the secret %q: %s", secret, printed)
		}
	}
	if !strings.Contains(printed, "postgres://relay:xxxxx@db:5432/app") {
		t.Errorf("printed configuration lacks the redacted DSN: %s", printed)
	}
}

func TestParseDefaults(t *testing.T) {
	cfg, err := Parse([]byte(base), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Database.Table != outbox.DefaultTable || cfg.HTTP.Listen != DefaultListen ||
		cfg.Log.Level != slog.LevelInfo || cfg.Log.Format != "text" || cfg.Broker.Broker != "" {
		t.Errorf("defaults: %+v", cfg)
	}
	if fmt.Sprint(cfg.Forwarder) != fmt.Sprint(Forwarder{}) {
		t.Errorf("forwarder defaults should be left to the forwarder (zero), got %+v", cfg.Forwarder)
	}
	// An explicit empty listen address disables the endpoint; a null one keeps the default.
	cfg, err = Parse([]byte(base+"http:\n  listen: \"\"\n"), nil, Options{})
	if err != nil || cfg.HTTP.Listen != "" {
		t.Errorf("listen \"\": %q, %v", cfg.HTTP.Listen, err)
	}
	cfg, err = Parse([]byte(base+"http:\n  listen:\n"), nil, Options{})
	if err != nil || cfg.HTTP.Listen != DefaultListen {
		t.Errorf("listen null: %q, %v", cfg.HTTP.Listen, err)
	}
	// The admin commands ignore the broker part, but its keys still have to be known ones.
	if _, err := Parse([]byte(base+"broker: rabbitmq\n"), nil, Options{}); err != nil {
		t.Errorf("broker part without Options.Broker: %v", err)
	}
}

func TestParseEnvironment(t *testing.T) {
	doc := "database:\n  dialect: mysql\n  dsn: file-dsn\n  table: from_file\nbroker: kfake\n"
	cfg, err := Parse([]byte(doc), env(map[string]string{
		EnvDatabaseDSN:            "postgres://u:envpw@h/db",
		EnvDatabaseDialect:        "pgx",
		EnvDatabaseTable:          "from_env",
		"OUTBOXKIT_BROKER":        "kafka",
		"OUTBOXKIT_KAFKA_BROKERS": "k:9092",
	}), Options{Broker: true})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Database.DSN != "postgres://u:envpw@h/db" || cfg.Database.Dialect != outbox.Postgres ||
		cfg.Database.Table != "from_env" || cfg.Broker.Broker != "kafka" || cfg.Broker.Kafka.Brokers[0] != "k:9092" {
		t.Errorf("environment overrides not applied: %+v", cfg)
	}
	// A configuration can come from the environment alone.
	cfg, err = Parse(nil, env(map[string]string{EnvDatabaseDSN: "x.db", EnvDatabaseDialect: "sqlite"}), Options{})
	if err != nil || cfg.Database.Dialect != outbox.SQLite {
		t.Errorf("environment only: %+v, %v", cfg, err)
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		env  map[string]string
		opts Options
		want string // substring of the error
	}{
		{"invalid YAML", "database: [", nil, Options{}, "invalid YAML"},
		{"document not a mapping", "- a\n- b\n", nil, Options{}, "the document must be a mapping"},
		{"unknown section", base + "databse: {}\n", nil, Options{}, "databse: unknown section (line 5"},
		{"section set twice", base + "database: {}\n", nil, Options{}, "database: set twice"},
		{"section not a mapping", "database: postgres\n", nil, Options{}, `database: must be a mapping of keys, got the value "postgres"`},
		{"missing dialect", "database:\n  dsn: x\n", nil, Options{}, "database.dialect: missing"},
		{"empty file", "", nil, Options{}, "database.dialect: missing"},
		{"unknown dialect", "database:\n  dialect: oracle\n  dsn: x\n", nil, Options{}, `database.dialect: unknown value "oracle"`},
		{"missing dsn", "database:\n  dialect: postgres\n", nil, Options{}, "database.dsn: missing"},
		{"bad table", base + "  table: drop table;\n", nil, Options{}, `database.table: "drop table;" is not a valid table name`},
		{"unknown database key", base + "  tabel: x\n", nil, Options{}, "database.tabel: unknown key (line 5; allowed: dialect, dsn, table)"},
		{"database key twice", base + "  dsn: y\n", nil, Options{}, "database.dsn: set twice"},
		{"dsn not a scalar", "database:\n  dialect: postgres\n  dsn: [a]\n", nil, Options{}, "database.dsn: must be a single value, got a list"},
		{"env dialect", base, map[string]string{EnvDatabaseDialect: "db2"}, Options{}, `OUTBOXKIT_DATABASE_DIALECT (database.dialect): unknown value "db2"`},
		{"env table", base, map[string]string{EnvDatabaseTable: "a-b"}, Options{}, `database.table: "a-b"`},

		{"batch_size negative", base + "forwarder:\n  batch_size: -1\n", nil, Options{}, "forwarder.batch_size: must be positive, got -1"},
		{"max_batch_bytes zero", base + "forwarder:\n  max_batch_bytes: 0\n", nil, Options{}, "forwarder.max_batch_bytes: must be positive, got 0"},
		{"unlimited_retries not a bool", base + "forwarder:\n  unlimited_retries: sometimes\n", nil, Options{}, `forwarder.unlimited_retries: must be true or false, got "sometimes"`},
		{"batch_size too large", base + "forwarder:\n  batch_size: 5000\n", nil, Options{}, "forwarder.batch_size: must be at most 4000, got 5000"},
		{"batch_size not an integer", base + "forwarder:\n  batch_size: many\n", nil, Options{}, `forwarder.batch_size: must be an integer, got "many"`},
		{"workers negative", base + "forwarder:\n  workers: -2\n", nil, Options{}, "forwarder.workers: must be positive, got -2"},
		{"workers too many", base + "forwarder:\n  workers: 65\n", nil, Options{}, "forwarder.workers: must be at most 64"},
		{"max_attempts negative", base + "forwarder:\n  max_attempts: -3\n", nil, Options{}, "forwarder.max_attempts: must be positive, got -3"},
		{"duration without unit", base + "forwarder:\n  initial_interval: 5\n", nil, Options{}, `forwarder.initial_interval: must be a Go duration such as 500ms, 30s or 5m, got "5"`},
		{"duration garbage", base + "forwarder:\n  max_interval: soon\n", nil, Options{}, `forwarder.max_interval: must be a Go duration`},
		{"zero batch_size", base + "forwarder:\n  batch_size: 0\n", nil, Options{}, "forwarder.batch_size: must be positive, got 0 (line 6"},
		{"zero workers", base + "forwarder:\n  workers: 0\n", nil, Options{}, "forwarder.workers: must be positive, got 0"},
		{"zero max_attempts", base + "forwarder:\n  max_attempts: 0\n", nil, Options{}, "forwarder.max_attempts: must be positive, got 0"},
		{"negative retention", base + "forwarder:\n  retention: -1h\n", nil, Options{}, "forwarder.retention: must not be negative, got -1h0m0s"},
		{"zero initial_interval", base + "forwarder:\n  initial_interval: 0s\n", nil, Options{}, "forwarder.initial_interval: must be positive, got 0s"},
		{"negative max_interval", base + "forwarder:\n  max_interval: -1m\n", nil, Options{}, "forwarder.max_interval: must be positive, got -1m0s"},
		{"negative prune_interval", base + "forwarder:\n  prune_interval: -1s\n", nil, Options{}, "forwarder.prune_interval: must be positive, got -1s"},
		{"zero lease_ttl", base + "forwarder:\n  lease_ttl: 0s\n", nil, Options{}, "forwarder.lease_ttl: must be positive, got 0s"},
		{"negative min_poll_interval", base + "forwarder:\n  min_poll_interval: -1s\n", nil, Options{}, "forwarder.min_poll_interval: must be positive, got -1s"},
		{"zero max_poll_interval", base + "forwarder:\n  max_poll_interval: 0ms\n", nil, Options{}, "forwarder.max_poll_interval: must be positive, got 0s"},
		{"short lease_ttl", base + "forwarder:\n  lease_ttl: 100ms\n", nil, Options{}, "forwarder.lease_ttl: must be at least 1s, got 100ms"},
		{"max_poll below min_poll", base + "forwarder:\n  min_poll_interval: 2s\n", nil, Options{}, "forwarder.max_poll_interval: 1s is below forwarder.min_poll_interval 2s"},
		{"max_interval below initial", base + "forwarder:\n  initial_interval: 10m\n", nil, Options{}, "forwarder.max_interval: 5m0s is below forwarder.initial_interval 10m0s"},
		{"lease_group too long", base + "forwarder:\n  lease_group: " + strings.Repeat("g", 192) + "\n", nil, Options{}, "forwarder.lease_group: must be at most 191 bytes, got 192"},
		{"relay_id too long", base + "forwarder:\n  relay_id: " + strings.Repeat("r", 192) + "\n", nil, Options{}, "forwarder.relay_id: must be at most 191 bytes, got 192"},
		{"tenants not a list", base + "forwarder:\n  tenants: acme\n", nil, Options{}, `forwarder.tenants: must be a list of strings, got the value "acme"`},
		{"tenant not a string", base + "forwarder:\n  tenants: [[a]]\n", nil, Options{}, "forwarder.tenants[0]: must be a string, got a list"},
		{"tenant twice", base + "forwarder:\n  tenants: [a, b, a]\n", nil, Options{}, `forwarder.tenants[2]: "a" is listed twice`},
		{"unknown forwarder key", base + "forwarder:\n  batchsize: 10\n", nil, Options{}, "forwarder.batchsize: unknown key (line 6; allowed: batch_size,"},
		{"renamed forwarder key", base + "forwarder:\n  initial_backoff: 1s\n", nil, Options{}, "forwarder.initial_backoff: renamed forwarder.initial_interval (line 6; see CHANGELOG.md)"},

		{"listen without port", base + "http:\n  listen: localhost\n", nil, Options{}, `http.listen: "localhost" is not a host:port address`},
		{"listen bad port", base + "http:\n  listen: localhost:http9\n", nil, Options{}, `http.listen: "localhost:http9" has an invalid port`},
		{"unknown http key", base + "http:\n  port: 9\n", nil, Options{}, "http.port: unknown key"},
		{"log level", base + "log:\n  level: loud\n", nil, Options{}, `log.level: unknown value "loud" (allowed: debug, info, warn, error)`},
		{"log format", base + "log:\n  format: xml\n", nil, Options{}, `log.format: unknown value "xml" (allowed: text, json)`},
		{"unknown log key", base + "log:\n  colour: true\n", nil, Options{}, "log.colour: unknown key"},

		{"missing broker", base, nil, Options{Broker: true}, "broker: missing"},
		{"unknown broker", base + "broker: activemq\n", nil, Options{Broker: true}, `broker: unknown value "activemq" (allowed: kafka, pulsar, nats, rabbitmq, kfake)`},
		{"kafka without brokers", base + "broker: kafka\n", nil, Options{Broker: true}, "kafka.brokers"},
		{"unknown kafka key", base + "broker: kafka\nkafka:\n  brokers: [k:1]\n  compresion: lz4\n", nil, Options{}, "kafka.compresion: unknown key (line 8; allowed: brokers,"},
		{"unknown nested kafka key", base + "kafka:\n  sasl:\n    pasword: x\n", nil, Options{}, "kafka.sasl.pasword: unknown key (line 7"},
		{"unknown pulsar key", base + "pulsar:\n  ur1: pulsar://x\n", nil, Options{}, "pulsar.ur1: unknown key"},
		{"kafka bad value", base + "broker: kafka\nkafka:\n  brokers: [k:1]\n  compression: brotli\n", nil, Options{Broker: true}, `kafka.compression: unknown value "brotli"`},
		// brokerconfig's own YAML errors keep the line numbers of the original file.
		{"broker type error keeps line", base + "forwarder:\n  workers: 1\nbroker: kfake\nkfake:\n  partitions: many\n", nil, Options{Broker: true}, "line 9"},
		{"pulsar without url", base + "broker: pulsar\n", nil, Options{Broker: true}, "pulsar.url"},
		{"broker env", base + "broker: kafka\n", map[string]string{"OUTBOXKIT_KAFKA_BROKERS": "", "OUTBOXKIT_KAFKA_MESSAGE_MAX_BYTES": "lots"}, Options{Broker: true}, "OUTBOXKIT_KAFKA_MESSAGE_MAX_BYTES (kafka.message_max_bytes)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var lookup func(string) (string, bool)
			if tc.env != nil {
				lookup = env(tc.env)
			}
			_, err := Parse([]byte(tc.doc), lookup, tc.opts)
			if err == nil {
				t.Fatalf("no error, want one containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q\ndoes not contain %q", err, tc.want)
			}
			for _, secret := range []string{"s3cret-pw"} {
				if strings.Contains(err.Error(), secret) {
					t.Errorf("error shows the DSN password: %v", err)
				}
			}
		})
	}
}

func TestLoadMissingFile(t *testing.T) {
	_, err := Load(t.TempDir()+"/nope.yaml", nil, Options{})
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Fatalf("Load of a missing file: %v", err)
	}
}

func TestRedactDSN(t *testing.T) {
	cases := []struct{ in, want string }{
		{"postgres://relay:s3cret@db:5432/app?sslmode=disable", "postgres://relay:xxxxx@db:5432/app?sslmode=disable"},
		{"postgres://relay@db/app?password=s3cret&sslmode=disable", "postgres://relay@db/app?password=xxxxx&sslmode=disable"},
		{"postgres://db/app", "postgres://db/app"},
		{"host=db user=relay password=s3cret dbname=app", "host=db user=relay password=xxxxx dbname=app"},
		{"host=db password='s3 cret' dbname=app", "host=db password=xxxxx dbname=app"},
		{"relay:s3cret@tcp(db:3306)/app?parseTime=true", "relay:xxxxx@tcp(db:3306)/app?parseTime=true"},
		{"relay:p@ss@tcp(db:3306)/app", "relay:xxxxx@tcp(db:3306)/app"},
		{"relay@tcp(db:3306)/app", "relay@tcp(db:3306)/app"},
		{"/var/lib/outbox.db", "/var/lib/outbox.db"},
		{"file:outbox.db?_pragma=busy_timeout(5000)", "file:outbox.db?_pragma=busy_timeout(5000)"},
		{"postgres://u:%zz@h/db", "(unparsable DSN, hidden)"},
	}
	for _, tc := range cases {
		if got := RedactDSN(tc.in); got != tc.want {
			t.Errorf("RedactDSN(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestScrubber(t *testing.T) {
	cfg, err := Parse([]byte(`
database:
  dialect: postgres
  dsn: postgres://relay:s3cret-pw@db:5432/app
broker: kafka
kafka:
  brokers: [k:9092]
  sasl: {mechanism: PLAIN, username: relay, password: kafka-secret}
`), nil, Options{Broker: true})
	if err != nil {
		t.Fatal(err)
	}
	scrub := cfg.Scrubber()
	for in, want := range map[string]string{
		"cannot parse `postgres://relay:s3cret-pw@db:5432/app`": "cannot parse `postgres://relay:xxxxx@db:5432/app`",
		"dial postgres://other:pw2@h failed":                    "dial postgres://other:xxxxx@h failed",
		"auth failed for password=s3cret-pw":                    "auth failed for password=xxxxx",
		"sasl: kafka-secret rejected, s3cret-pw too":            "sasl: xxxxx rejected, xxxxx too",
		"relay relay connected to db":                           "relay relay connected to db",
	} {
		if got := scrub(in); got != want {
			t.Errorf("scrub(%q) = %q, want %q", in, got, want)
		}
	}
	// A password equal to a public value (here the user name) is not replaced everywhere, only
	// in DSN-shaped text, so ordinary messages stay readable.
	cfg, err = Parse([]byte("database:\n  dialect: postgres\n  dsn: postgres://outboxkit:outboxkit@db/outboxkit\n"), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	scrub = cfg.Scrubber()
	if got := scrub("table outboxkit_events: postgres://outboxkit:outboxkit@db/outboxkit"); got != "table outboxkit_events: postgres://outboxkit:xxxxx@db/outboxkit" {
		t.Errorf("scrub with a password equal to the user name: %q", got)
	}
}

func TestParseFlowStyleAndAnchors(t *testing.T) {
	// A document in flow style cannot have its lines blanked; it is re-encoded for brokerconfig.
	cfg, err := Parse([]byte(`{database: {dialect: sqlite, dsn: x.db}, broker: kfake, kfake: {partitions: 2}}`), nil, Options{Broker: true})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Broker.Broker != "kfake" || cfg.Broker.KFake.Partitions != 2 || cfg.Database.Dialect != outbox.SQLite {
		t.Errorf("flow document: %+v", cfg)
	}
	// Aliases are followed in the CLI's own sections.
	cfg, err = Parse([]byte(base+"forwarder:\n  lease_ttl: &ttl 20s\n  max_interval: *ttl\n"), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Forwarder.LeaseTTL != 20*time.Second || cfg.Forwarder.MaxInterval != 20*time.Second {
		t.Errorf("aliases: %+v", cfg.Forwarder)
	}
}

func TestParseCloudEventsFormat(t *testing.T) {
	doc := "database:\n  dialect: postgres\n  dsn: postgres://x\nbroker: kfake\nformat: cloudevents\ncloudevents:\n  source: /orders-service\n"
	cfg, err := Parse([]byte(doc), nil, Options{Broker: true})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Broker.Format != "cloudevents" || cfg.Broker.CloudEvents.Source != "/orders-service" {
		t.Fatalf("format %q, source %q", cfg.Broker.Format, cfg.Broker.CloudEvents.Source)
	}
	_, err = Parse([]byte("database:\n  dialect: postgres\n  dsn: postgres://x\nbroker: kfake\nformat: xml\n"), nil, Options{Broker: true})
	if err == nil || !strings.Contains(err.Error(), `"xml"`) {
		t.Fatalf("format xml: %v", err)
	}
}

func TestParseDelivery(t *testing.T) {
	base := "database:\n  dialect: postgres\n  dsn: postgres://x\n"
	kafkaDoc := base + "broker: kafka\nkafka:\n  brokers: [127.0.0.1:9092]\nforwarder:\n  delivery: exactly_once\n  checkpoint_topic: app.checkpoints\n  transactional_id_prefix: app/outbox\n"
	cfg, err := Parse([]byte(kafkaDoc), nil, Options{Broker: true})
	if err != nil {
		t.Fatal(err)
	}
	var fc forwarder.Config
	cfg.Forwarder.Apply(&fc)
	if fc.Delivery != forwarder.ExactlyOnce || fc.CheckpointTopic != "app.checkpoints" || fc.TransactionalIDPrefix != "app/outbox" {
		t.Errorf("Apply: delivery %q, checkpoint topic %q, prefix %q", fc.Delivery, fc.CheckpointTopic, fc.TransactionalIDPrefix)
	}
	env := map[string]string{EnvForwarderDelivery: " at_least_once "}
	cfg, err = Parse([]byte(kafkaDoc), func(k string) (string, bool) { v, ok := env[k]; return v, ok }, Options{Broker: true})
	if err != nil || cfg.Forwarder.Delivery != "at_least_once" {
		t.Errorf("%s override: delivery %q, error %v", EnvForwarderDelivery, cfg.Forwarder.Delivery, err)
	}
	for _, c := range []struct{ doc, want string }{
		{base + "forwarder:\n  delivery: twice\n", `forwarder.delivery: unknown value "twice" (allowed: at_least_once, exactly_once; or set OUTBOXKIT_FORWARDER_DELIVERY)`},
		{base + "broker: pulsar\npulsar:\n  url: pulsar://127.0.0.1:6650\nforwarder:\n  delivery: exactly_once\n", `forwarder.delivery: "exactly_once" needs broker kafka (or kfake), not "pulsar"`},
		{base + "broker: nats\nnats:\n  urls: [nats://127.0.0.1:4222]\nforwarder:\n  delivery: exactly_once\n", `forwarder.delivery: "exactly_once" needs broker kafka (or kfake), not "nats": JetStream has no transaction`},
		{base + "broker: rabbitmq\nrabbitmq:\n  url: amqp://127.0.0.1:5672/\nforwarder:\n  delivery: exactly_once\n", `forwarder.delivery: "exactly_once" needs broker kafka (or kfake), not "rabbitmq": RabbitMQ has no transaction`},
	} {
		_, err := Parse([]byte(c.doc), nil, Options{Broker: true})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got error %v, want it to contain %q", c.doc, err, c.want)
		}
	}
}

func TestParseSource(t *testing.T) {
	base := "database:\n  dialect: postgres\n  dsn: postgres://x\n"
	cfg, err := Parse([]byte(base+"forwarder:\n  source: cdc\n"), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var fc forwarder.Config
	cfg.Forwarder.Apply(&fc)
	if fc.Source != forwarder.SourceCDC {
		t.Errorf("Apply: source %q, want cdc", fc.Source)
	}
	cfg, err = Parse([]byte(base+"forwarder:\n  source: cdc\n  delivery: exactly_once\n"), nil, Options{})
	if err != nil || cfg.Forwarder.Source != "cdc" || cfg.Forwarder.Delivery != "exactly_once" {
		t.Errorf("source cdc with delivery exactly_once: source %q, delivery %q, error %v", cfg.Forwarder.Source, cfg.Forwarder.Delivery, err)
	}
	env := map[string]string{EnvForwarderSource: " polling "}
	cfg, err = Parse([]byte(base+"forwarder:\n  source: cdc\n"), func(k string) (string, bool) { v, ok := env[k]; return v, ok }, Options{})
	if err != nil || cfg.Forwarder.Source != "polling" {
		t.Errorf("%s override: source %q, error %v", EnvForwarderSource, cfg.Forwarder.Source, err)
	}
	for _, c := range []struct{ doc, want string }{
		{base + "forwarder:\n  source: wal\n", `forwarder.source: unknown value "wal" (allowed: polling, cdc; or set OUTBOXKIT_FORWARDER_SOURCE)`},
		{"database:\n  dialect: mysql\n  dsn: u:p@tcp(h)/db\nforwarder:\n  source: cdc\n", `forwarder.source: cdc needs database.dialect postgres, not mysql`},
	} {
		_, err := Parse([]byte(c.doc), nil, Options{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got error %v, want it to contain %q", c.doc, err, c.want)
		}
	}
}

// CheckRelay refuses broker kfake and names where it came from: the file or OUTBOXKIT_BROKER.
// Parse itself accepts kfake (the admin commands, which publish nothing, use it).
func TestCheckRelayRefusesKFake(t *testing.T) {
	cases := []struct {
		name, doc string
		env       map[string]string
		want      string // "" = accepted
	}{
		{"kafka", base + "broker: kafka\nkafka:\n  brokers: [k:9092]\n", nil, ""},
		{"pulsar", base + "broker: pulsar\npulsar:\n  url: pulsar://p:6650\n", nil, ""},
		{"kfake in the file", base + "broker: kfake\n", nil, "broker: kfake is an in-process test cluster: the relay would delete events that no one can read; use kafka or pulsar"},
		{"kfake upper case", base + "broker: KFake\n", nil, "broker: kfake is an in-process test cluster"},
		{"kfake from the environment", base + "broker: kafka\nkafka:\n  brokers: [k:9092]\n", map[string]string{"OUTBOXKIT_BROKER": " kfake "}, "OUTBOXKIT_BROKER: kfake is an in-process test cluster"},
		{"environment overrides kfake", base + "broker: kfake\nkafka:\n  brokers: [k:9092]\n", map[string]string{"OUTBOXKIT_BROKER": "kafka"}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tc.doc), env(tc.env), Options{Broker: true})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			err = CheckRelay(cfg, env(tc.env))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("CheckRelay: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("CheckRelay: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// Warnings names Pulsar's hostname verification opt-out, and nothing for a default configuration.
func TestWarnings(t *testing.T) {
	doc := base + "broker: pulsar\npulsar:\n  url: pulsar+ssl://p:6651\n"
	cfg, err := Parse([]byte(doc), nil, Options{Broker: true})
	if err != nil {
		t.Fatal(err)
	}
	if w := cfg.Warnings(); len(w) != 0 {
		t.Errorf("default configuration: warnings %q", w)
	}
	cfg, err = Parse([]byte(doc+"  tls_skip_hostname_verification: true\n"), nil, Options{Broker: true})
	if err != nil {
		t.Fatal(err)
	}
	if w := cfg.Warnings(); len(w) != 1 || !strings.Contains(w[0], "TLS hostname verification is OFF") {
		t.Errorf("tls_skip_hostname_verification: warnings %q", w)
	}
}
