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

// The document and the database section: errors name the key, its line and the allowed values.
func TestParseErrors(t *testing.T) {
	checkParseErrors(t, []parseErrorCase{
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
		{"unknown database key", base + "  tabel: x\n", nil, Options{}, "database.tabel: unknown key (line 5; allowed: dialect, dsn, table, max_open_conns)"},
		{"database key twice", base + "  dsn: y\n", nil, Options{}, "database.dsn: set twice"},
		{"dsn not a scalar", "database:\n  dialect: postgres\n  dsn: [a]\n", nil, Options{}, "database.dsn: must be a single value, got a list"},
		{"env dialect", base, map[string]string{EnvDatabaseDialect: "db2"}, Options{}, `OUTBOXKIT_DATABASE_DIALECT (database.dialect): unknown value "db2"`},
		{"env table", base, map[string]string{EnvDatabaseTable: "a-b"}, Options{}, `database.table: "a-b"`},
	})
}

// The http and log sections.
func TestParseErrorsHTTPAndLog(t *testing.T) {
	checkParseErrors(t, []parseErrorCase{
		{"listen without port", base + "http:\n  listen: localhost\n", nil, Options{}, `http.listen: "localhost" is not a host:port address`},
		{"listen bad port", base + "http:\n  listen: localhost:http9\n", nil, Options{}, `http.listen: "localhost:http9" has an invalid port`},
		{"unknown http key", base + "http:\n  port: 9\n", nil, Options{}, "http.port: unknown key"},
		{"log level", base + "log:\n  level: loud\n", nil, Options{}, `log.level: unknown value "loud" (allowed: debug, info, warn, error)`},
		{"log format", base + "log:\n  format: xml\n", nil, Options{}, `log.format: unknown value "xml" (allowed: text, json)`},
		{"unknown log key", base + "log:\n  colour: true\n", nil, Options{}, "log.colour: unknown key"},
	})
}

// parseErrorCase is a document (with its environment and options) that Parse must refuse with
// an error containing want.
type parseErrorCase struct {
	name string
	doc  string
	env  map[string]string
	opts Options
	want string // substring of the error
}

// checkParseErrors parses each case's document and checks its error, which must never show the
// DSN password of base.
func checkParseErrors(t *testing.T, cases []parseErrorCase) {
	t.Helper()
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

// The HTTP server's timeouts: defaults when left out, a given value kept, zero or negative
// refused with the key named.
func TestHTTPTimeouts(t *testing.T) {
	cfg, err := Parse([]byte(base), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if h := cfg.HTTP; h.ReadTimeout != DefaultReadTimeout || h.WriteTimeout != DefaultWriteTimeout || h.IdleTimeout != DefaultIdleTimeout {
		t.Errorf("defaults: %+v", h)
	}
	cfg, err = Parse([]byte(base+"http:\n  read_timeout: 5s\n  write_timeout: 2m\n  idle_timeout: 1s\n"), nil, Options{})
	if err != nil || cfg.HTTP.ReadTimeout != 5*time.Second || cfg.HTTP.WriteTimeout != 2*time.Minute || cfg.HTTP.IdleTimeout != time.Second {
		t.Errorf("given timeouts: %+v, %v", cfg.HTTP, err)
	}
	for _, bad := range []string{"read_timeout: 0s", "write_timeout: -1s", "idle_timeout: soon"} {
		_, err := Parse([]byte(base+"http:\n  "+bad+"\n"), nil, Options{})
		key, _, _ := strings.Cut(bad, ":")
		if err == nil || !strings.Contains(err.Error(), "http."+key) {
			t.Errorf("http.%s: %v, want an error naming the key", bad, err)
		}
	}
}

// database.max_open_conns: DefaultMaxOpenConns when left out, a given value kept, zero refused.
func TestMaxOpenConns(t *testing.T) {
	cfg, err := Parse([]byte(base), nil, Options{})
	if err != nil || cfg.Database.MaxOpenConns != DefaultMaxOpenConns {
		t.Errorf("default: %d, %v", cfg.Database.MaxOpenConns, err)
	}
	cfg, err = Parse([]byte(base+"  max_open_conns: 7\n"), nil, Options{})
	if err != nil || cfg.Database.MaxOpenConns != 7 {
		t.Errorf("given 7: %d, %v", cfg.Database.MaxOpenConns, err)
	}
	if _, err := Parse([]byte(base+"  max_open_conns: 0\n"), nil, Options{}); err == nil || !strings.Contains(err.Error(), "database.max_open_conns") {
		t.Errorf("0: %v, want an error naming database.max_open_conns", err)
	}
}

// The admin listener's TLS settings: both files or neither, TLS only with admin_listen, a
// client CA only with TLS; each refusal names the key.
func TestAdminListenerSettings(t *testing.T) {
	for _, c := range []struct{ section, want string }{
		{"  admin_listen: 0.0.0.0:9443\n  admin_tls_cert_file: c.pem\n", "http.admin_tls_cert_file and http.admin_tls_key_file"},
		{"  admin_tls_cert_file: c.pem\n  admin_tls_key_file: k.pem\n", "set http.admin_listen too"},
		{"  admin_listen: 0.0.0.0:9443\n  admin_client_ca_file: ca.pem\n", "http.admin_client_ca_file"},
		{"  admin_listen: nowhere\n", "http.admin_listen"},
		{"  allowed_hosts: [relay.example:443]\n", "http.allowed_hosts[0]"},
		{"  admin_listen: 0.0.0.0:9443\n  admin_tls_cert_file: c.pem\n  admin_tls_key_file: k.pem\n  admin_client_ca_file: ca.pem\n", ""},
	} {
		_, err := Parse([]byte(base+"http:\n"+c.section), nil, Options{})
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%q: %v, want %q", c.section, err, c.want)
		}
	}
}
