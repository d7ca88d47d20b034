// Package relayconfig loads the outboxkit CLI's configuration file: the database, forwarder,
// http and log sections, plus the broker part (broker, kafka, pulsar, nats, rabbitmq, kfake) that
// brokers/brokerconfig parses, with environment overrides, defaults and validation. Every error
// names the bad key by its YAML path; the DSN password and broker secrets never appear in errors.
package relayconfig

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
)

// Environment variables that override the database section (the broker part has brokerconfig's
// own, listed by brokerconfig.EnvNames).
const (
	EnvDatabaseDSN     = "OUTBOXKIT_DATABASE_DSN"
	EnvDatabaseDialect = "OUTBOXKIT_DATABASE_DIALECT"
	EnvDatabaseTable   = "OUTBOXKIT_DATABASE_TABLE"
	// EnvForwarderDelivery overrides forwarder.delivery.
	EnvForwarderDelivery = "OUTBOXKIT_FORWARDER_DELIVERY"
	// EnvForwarderSource overrides forwarder.source.
	EnvForwarderSource = "OUTBOXKIT_FORWARDER_SOURCE"
)

// DefaultListen is the default address of the relay's /metrics and /healthz endpoints.
const DefaultListen = "127.0.0.1:9464"

// Config is the whole CLI configuration.
type Config struct {
	Database  Database
	Forwarder Forwarder
	HTTP      HTTP
	Log       Log
	// Broker is the broker part, parsed by brokerconfig. It is zero when the configuration was
	// loaded without it (Options.Broker false).
	Broker brokerconfig.Config
}

// Database is the database section.
type Database struct {
	// Dialect is postgres, mysql or sqlite (aliases: postgresql, pgx, mariadb, sqlite3). Required.
	Dialect outbox.Dialect
	// DSN is the driver's data source name: a secret, printed only through RedactDSN. Required.
	DSN string
	// Table is the outbox table. Default: outbox.DefaultTable.
	Table string
}

// Forwarder is the forwarder section. Zero values keep the forwarder's defaults (see
// forwarder.Config); Apply copies the set ones.
type Forwarder struct {
	// Source is polling (the default) or cdc (PostgreSQL logical replication on the database
	// DSN; see docs/cdc.md).
	Source string
	// Delivery is at_least_once (the default) or exactly_once (not with broker pulsar; see
	// docs/exactly-once.md).
	Delivery              string
	CheckpointTopic       string
	TransactionalIDPrefix string
	BatchSize             int
	MaxBatchBytes         int
	Workers               int
	MaxAttempts           int
	UnlimitedRetries      bool
	InitialInterval       time.Duration
	MaxInterval           time.Duration
	DeadLetterTopic       string
	Retention             time.Duration
	PruneInterval         time.Duration
	LeaseTTL              time.Duration
	PublishStallAfter     time.Duration
	Tenants               []string
	LeaseGroup            string
	RelayID               string
	MinPollInterval       time.Duration
	MaxPollInterval       time.Duration
}

// HTTP is the http section.
type HTTP struct {
	// Listen is the address of /metrics and /healthz. Default: DefaultListen; "" disables them.
	Listen string
	// AdminReadTokensFile and AdminWriteTokensFile name files of "name:token" lines: bearer
	// tokens of the admin API and console (read scope; write scope, which may also act). With no
	// token (no file, no OUTBOXKIT_ADMIN_*_TOKENS variable) the API and console are off.
	AdminReadTokensFile  string
	AdminWriteTokensFile string
}

// Log is the log section.
type Log struct {
	// Level is debug, info, warn or error. Default: info.
	Level slog.Level
	// Format is text or json. Default: text.
	Format string
}

// Options says what Load and Parse read besides the database, forwarder, http and log sections.
type Options struct {
	// Broker parses and validates the broker part (the relay needs it; the admin commands do not,
	// and then ignore it).
	Broker bool
}

// Load reads the YAML file at path; see Parse.
func Load(path string, lookupEnv func(string) (string, bool), opts Options) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("config: %w", err)
	}
	cfg, err := Parse(data, lookupEnv, opts)
	if err != nil {
		return Config{}, fmt.Errorf("config %s: %w", path, err)
	}
	return cfg, nil
}

// Parse decodes the configuration, applies the environment overrides (lookupEnv is usually
// os.LookupEnv; nil ignores the environment), fills the defaults and validates the result.
// Unknown keys, at any depth, are errors.
func Parse(data []byte, lookupEnv func(string) (string, bool), opts Options) (Config, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return Config{}, fmt.Errorf("invalid YAML: %w", err)
	}
	var top *yaml.Node
	if doc.Kind == yaml.DocumentNode && len(doc.Content) > 0 {
		top = resolve(doc.Content[0])
	}
	var cfg Config
	cfg.HTTP.Listen = DefaultListen
	var (
		listenSet   bool
		brokerNodes []*yaml.Node
	)
	if top != nil && !isNull(top) {
		if top.Kind != yaml.MappingNode {
			return Config{}, fmt.Errorf("the document must be a mapping of sections (database, forwarder, http, log, broker, ...), got %s", kindName(top))
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(top.Content); i += 2 {
			k, v := top.Content[i], resolve(top.Content[i+1])
			if seen[k.Value] {
				return Config{}, fmt.Errorf("%s: set twice (line %d)", k.Value, k.Line)
			}
			seen[k.Value] = true
			var err error
			switch k.Value {
			case "database":
				err = decodeMapping(v, "database", []field{
					{key: "dialect", target: (*string)(&cfg.Database.Dialect)},
					{key: "dsn", target: &cfg.Database.DSN},
					{key: "table", target: &cfg.Database.Table},
				})
			case "forwarder":
				f := &cfg.Forwarder
				err = decodeMapping(v, "forwarder", []field{
					{key: "batch_size", target: &f.BatchSize, positive: true},
					{key: "max_batch_bytes", target: &f.MaxBatchBytes, positive: true},
					{key: "unlimited_retries", target: &f.UnlimitedRetries},
					{key: "workers", target: &f.Workers, positive: true},
					{key: "max_attempts", target: &f.MaxAttempts, positive: true},
					{key: "initial_interval", target: &f.InitialInterval, positive: true},
					{key: "max_interval", target: &f.MaxInterval, positive: true},
					{key: "dead_letter_topic", target: &f.DeadLetterTopic},
					{key: "retention", target: &f.Retention},
					{key: "prune_interval", target: &f.PruneInterval, positive: true},
					{key: "lease_ttl", target: &f.LeaseTTL, positive: true},
					{key: "publish_stall_after", target: &f.PublishStallAfter, positive: true},
					{key: "tenants", target: &f.Tenants},
					{key: "lease_group", target: &f.LeaseGroup},
					{key: "relay_id", target: &f.RelayID},
					{key: "min_poll_interval", target: &f.MinPollInterval, positive: true},
					{key: "max_poll_interval", target: &f.MaxPollInterval, positive: true},
					{key: "delivery", target: &f.Delivery},
					{key: "source", target: &f.Source},
					{key: "checkpoint_topic", target: &f.CheckpointTopic},
					{key: "transactional_id_prefix", target: &f.TransactionalIDPrefix},
				})
			case "http":
				err = decodeMapping(v, "http", []field{{key: "listen", target: &cfg.HTTP.Listen, set: &listenSet},
					{key: "admin_read_tokens_file", target: &cfg.HTTP.AdminReadTokensFile},
					{key: "admin_write_tokens_file", target: &cfg.HTTP.AdminWriteTokensFile}})
			case "log":
				var level, format string
				err = decodeMapping(v, "log", []field{{key: "level", target: &level}, {key: "format", target: &format}})
				if err == nil {
					err = cfg.Log.parse(level, format)
				}
			case "broker", "kafka", "pulsar", "nats", "rabbitmq", "kfake", "format", "cloudevents":
				err = checkKnownKeys(v, k.Value, brokerFieldType(k.Value))
				brokerNodes = append(brokerNodes, k)
			default:
				err = fmt.Errorf("%s: unknown section (line %d; allowed: database, forwarder, http, log, broker, format, cloudevents, kafka, pulsar, nats, rabbitmq, kfake)", k.Value, k.Line)
			}
			if err != nil {
				return Config{}, err
			}
		}
	}
	if !listenSet {
		cfg.HTTP.Listen = DefaultListen // absent or null; an explicit "" disables the endpoint
	}
	if cfg.Log.Format == "" {
		cfg.Log.Format = "text"
	}
	if err := cfg.Database.applyEnv(lookupEnv); err != nil {
		return Config{}, err
	}
	if lookupEnv != nil {
		if v, ok := lookupEnv(EnvForwarderDelivery); ok {
			cfg.Forwarder.Delivery = strings.TrimSpace(v)
		}
		if v, ok := lookupEnv(EnvForwarderSource); ok {
			cfg.Forwarder.Source = strings.TrimSpace(v)
		}
	}
	if err := cfg.validate(); err != nil {
		return Config{}, nameEnvInError(err, lookupEnv)
	}
	if opts.Broker {
		brokerYAML, err := brokerDocument(data, top, brokerNodes)
		if err != nil {
			return Config{}, err
		}
		if cfg.Broker, err = brokerconfig.Parse(brokerYAML, lookupEnv); err != nil {
			return Config{}, err
		}
		if reason, refused := exactlyOnceRefused[cfg.Broker.Broker]; refused && cfg.Forwarder.Delivery == string(forwarder.ExactlyOnce) {
			return Config{}, nameEnvInError(fmt.Errorf("forwarder.delivery: %q needs broker kafka (or kfake), not %q: %s (docs/exactly-once.md)",
				cfg.Forwarder.Delivery, cfg.Broker.Broker, reason), lookupEnv)
		}
	}
	return cfg, nil
}

// exactlyOnceRefused gives, per broker without the exactly-once delivery mode, why.
var exactlyOnceRefused = map[string]string{
	brokerconfig.BrokerPulsar: "Pulsar transactions cannot fence a paused relay's commit",
	brokerconfig.BrokerNATS: "JetStream has no transaction spanning the records and a checkpoint, and its " +
		"duplicate window only bounds duplicates in time",
	brokerconfig.BrokerRabbitMQ: "RabbitMQ has no transaction spanning the messages and a checkpoint (AMQP transactions " +
		"are per channel and cannot fence a paused relay), and no broker-side deduplication",
}

// CheckRelay returns an error if cfg, loaded with Options.Broker, cannot serve the relay command:
// today, broker kfake. The relay removes a row once the broker acknowledged it, and an
// in-process kfake cluster acknowledges every record and forgets it when the process exits, so
// a relay on kfake would delete events that no one can read. The quickstart and the tests use
// kfake through the library (brokerconfig.Build), where the reader shares the process; the admin
// commands, which publish nothing, accept it too. lookupEnv (usually os.LookupEnv) tells whether
// the value came from brokerconfig.EnvBroker, so the error names where to fix it.
func CheckRelay(cfg Config, lookupEnv func(string) (string, bool)) error {
	if cfg.Broker.Broker != brokerconfig.BrokerKFake {
		return nil
	}
	source := "broker"
	if lookupEnv != nil {
		if v, ok := lookupEnv(brokerconfig.EnvBroker); ok && strings.EqualFold(strings.TrimSpace(v), brokerconfig.BrokerKFake) {
			source = brokerconfig.EnvBroker
		}
	}
	return fmt.Errorf("%s: kfake is an in-process test cluster: the relay would delete events that no one can read; "+
		"use kafka or pulsar (the quickstart and tests use kfake through the library)", source)
}

// Warnings returns the unsafe settings of cfg that the relay logs at warn level when it starts:
// today, Pulsar TLS hostname verification turned off.
func (c Config) Warnings() []string {
	var out []string
	if c.Broker.Broker == brokerconfig.BrokerPulsar && c.Broker.Pulsar.TLSSkipHostnameVerification {
		out = append(out, "pulsar.tls_skip_hostname_verification is true: TLS hostname verification is OFF, any "+
			"certificate signed by a trusted CA is accepted for any host, and the token goes to whoever presents one")
	}
	return out
}

// brokerDocument returns the YAML that brokerconfig.Parse reads: the original text with the
// lines of the CLI's own sections blanked, so brokerconfig's errors keep the file's line
// numbers. A document written in flow style ({...} on one line) is re-encoded instead.
func brokerDocument(data []byte, top *yaml.Node, brokerKeys []*yaml.Node) ([]byte, error) {
	if top == nil || len(brokerKeys) == 0 {
		return nil, nil
	}
	if top.Style&yaml.FlowStyle != 0 {
		m := &yaml.Node{Kind: yaml.MappingNode}
		for i := 0; i+1 < len(top.Content); i += 2 {
			if slices.Contains(brokerKeys, top.Content[i]) {
				m.Content = append(m.Content, top.Content[i], top.Content[i+1])
			}
		}
		out, err := yaml.Marshal(m)
		if err != nil {
			return nil, fmt.Errorf("broker sections: %w", err)
		}
		return out, nil
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	// Each top-level key owns the lines from its own up to the next top-level key.
	for i := 0; i+1 < len(top.Content); i += 2 {
		k := top.Content[i]
		if slices.Contains(brokerKeys, k) {
			continue
		}
		end := len(lines) // exclusive, 1-based line numbers: lines[k.Line-1 : end]
		if i+2 < len(top.Content) {
			end = top.Content[i+2].Line - 1
		}
		for l := k.Line - 1; l < end && l < len(lines); l++ {
			lines[l] = []byte("\n")
		}
	}
	return bytes.Join(lines, nil), nil
}

// brokerFieldType returns the Go type brokerconfig decodes a top-level broker key into.
func brokerFieldType(key string) reflect.Type {
	t := reflect.TypeOf(brokerconfig.Config{})
	for i := range t.NumField() {
		if yamlName(t.Field(i)) == key {
			return t.Field(i).Type
		}
	}
	return nil
}

func yamlName(f reflect.StructField) string {
	tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if tag == "" {
		return strings.ToLower(f.Name)
	}
	return tag
}

// checkKnownKeys reports the first mapping key under n that the struct type t does not have,
// by its YAML path. brokerconfig rejects unknown keys too (yaml.v3's KnownFields), but its
// message names the Go type rather than the key's path; this check runs first to name the path.
func checkKnownKeys(n *yaml.Node, path string, t reflect.Type) error {
	n = resolve(n)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil || t.Kind() != reflect.Struct || n.Kind != yaml.MappingNode {
		return nil // scalars, lists and type mismatches are left to brokerconfig
	}
	fields := map[string]reflect.Type{}
	var names []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || f.Tag.Get("yaml") == "-" {
			continue
		}
		name := yamlName(f)
		fields[name] = f.Type
		names = append(names, name)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		ft, ok := fields[k.Value]
		if !ok {
			return fmt.Errorf("%s.%s: unknown key (line %d; allowed: %s)", path, k.Value, k.Line, strings.Join(names, ", "))
		}
		if err := checkKnownKeys(n.Content[i+1], path+"."+k.Value, ft); err != nil {
			return err
		}
	}
	return nil
}

func (l *Log) parse(level, format string) error {
	switch strings.ToLower(strings.TrimSpace(level)) {
	case "", "info":
		l.Level = slog.LevelInfo
	case "debug":
		l.Level = slog.LevelDebug
	case "warn", "warning":
		l.Level = slog.LevelWarn
	case "error":
		l.Level = slog.LevelError
	default:
		return fmt.Errorf("log.level: unknown value %q (allowed: debug, info, warn, error)", level)
	}
	switch f := strings.ToLower(strings.TrimSpace(format)); f {
	case "", "text", "json":
		l.Format = f
	default:
		return fmt.Errorf("log.format: unknown value %q (allowed: text, json)", format)
	}
	return nil
}

func (d *Database) applyEnv(lookup func(string) (string, bool)) error {
	if lookup == nil {
		return nil
	}
	if v, ok := lookup(EnvDatabaseDialect); ok {
		dialect, err := outbox.ParseDialect(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("%s (database.dialect): unknown value %q (allowed: postgres, mysql, sqlite)", EnvDatabaseDialect, v)
		}
		d.Dialect = dialect
	}
	if v, ok := lookup(EnvDatabaseDSN); ok {
		d.DSN = strings.TrimSpace(v)
	}
	if v, ok := lookup(EnvDatabaseTable); ok {
		d.Table = strings.TrimSpace(v)
	}
	return nil
}

// validate fills the defaults of the database section and checks every section.
func (c *Config) validate() error {
	d := &c.Database
	if d.Dialect == "" {
		return fmt.Errorf("database.dialect: missing (allowed: postgres, mysql, sqlite; or set %s)", EnvDatabaseDialect)
	}
	dialect, err := outbox.ParseDialect(string(d.Dialect))
	if err != nil {
		return fmt.Errorf("database.dialect: unknown value %q (allowed: postgres, mysql, sqlite)", d.Dialect)
	}
	d.Dialect = dialect
	if d.DSN == "" {
		return fmt.Errorf("database.dsn: missing (or set %s)", EnvDatabaseDSN)
	}
	if d.Table == "" {
		d.Table = outbox.DefaultTable
	}
	if _, err := outbox.NewTable(d.Dialect, d.Table); err != nil {
		return fmt.Errorf("database.table: %q is not a valid table name (letters, digits and underscores, optionally schema.table, at most 48 characters)", d.Table)
	}
	if err := c.Forwarder.validate(); err != nil {
		return err
	}
	if forwarder.Source(c.Forwarder.Source) == forwarder.SourceCDC && d.Dialect != outbox.Postgres {
		return fmt.Errorf("forwarder.source: %s needs database.dialect postgres, not %s", c.Forwarder.Source, d.Dialect)
	}
	if c.HTTP.Listen != "" {
		if _, port, err := net.SplitHostPort(c.HTTP.Listen); err != nil {
			return fmt.Errorf("http.listen: %q is not a host:port address (use \"\" to disable the endpoint)", c.HTTP.Listen)
		} else if p, err := strconv.Atoi(port); err != nil || p < 0 || p > 65535 {
			return fmt.Errorf("http.listen: %q has an invalid port", c.HTTP.Listen)
		}
	}
	return nil
}

// The forwarder's defaults (see forwarder.Config), used for the checks that relate two fields.
const (
	defaultMinPoll         = 10 * time.Millisecond
	defaultMaxPoll         = time.Second
	defaultInitialInterval = 500 * time.Millisecond
	defaultMaxInterval     = 5 * time.Minute
	defaultLeaseTTL        = 10 * time.Second
	maxBatchSize           = 4000
	maxIDLength            = 191
)

func (f *Forwarder) validate() error {
	switch forwarder.Source(f.Source) {
	case "", forwarder.SourcePolling, forwarder.SourceCDC:
	default:
		return fmt.Errorf("forwarder.source: unknown value %q (allowed: %s, %s; or set %s)",
			f.Source, forwarder.SourcePolling, forwarder.SourceCDC, EnvForwarderSource)
	}
	switch forwarder.Delivery(f.Delivery) {
	case "", forwarder.AtLeastOnce, forwarder.ExactlyOnce:
	default:
		return fmt.Errorf("forwarder.delivery: unknown value %q (allowed: %s, %s; or set %s)",
			f.Delivery, forwarder.AtLeastOnce, forwarder.ExactlyOnce, EnvForwarderDelivery)
	}
	positiveInts := []struct {
		path  string
		value int
	}{
		{"forwarder.batch_size", f.BatchSize}, {"forwarder.max_batch_bytes", f.MaxBatchBytes},
		{"forwarder.workers", f.Workers}, {"forwarder.max_attempts", f.MaxAttempts},
	}
	for _, p := range positiveInts {
		if p.value < 0 {
			return fmt.Errorf("%s: must be positive, got %d", p.path, p.value)
		}
	}
	if f.BatchSize > maxBatchSize {
		return fmt.Errorf("forwarder.batch_size: must be at most %d, got %d", maxBatchSize, f.BatchSize)
	}
	if f.Workers > outbox.Partitions {
		return fmt.Errorf("forwarder.workers: must be at most %d (the number of partitions), got %d", outbox.Partitions, f.Workers)
	}
	durations := []struct {
		path  string
		value time.Duration
	}{
		{"forwarder.initial_interval", f.InitialInterval}, {"forwarder.max_interval", f.MaxInterval},
		{"forwarder.retention", f.Retention}, {"forwarder.prune_interval", f.PruneInterval},
		{"forwarder.lease_ttl", f.LeaseTTL}, {"forwarder.min_poll_interval", f.MinPollInterval},
		{"forwarder.max_poll_interval", f.MaxPollInterval},
	}
	for _, d := range durations {
		if d.value < 0 {
			return fmt.Errorf("%s: must not be negative, got %v", d.path, d.value)
		}
	}
	if f.LeaseTTL != 0 && f.LeaseTTL < time.Second {
		return fmt.Errorf("forwarder.lease_ttl: must be at least 1s, got %v", f.LeaseTTL)
	}
	minPoll, maxPoll := or(f.MinPollInterval, defaultMinPoll), or(f.MaxPollInterval, defaultMaxPoll)
	if maxPoll < minPoll {
		return fmt.Errorf("forwarder.max_poll_interval: %v is below forwarder.min_poll_interval %v", maxPoll, minPoll)
	}
	initial, maxB := or(f.InitialInterval, defaultInitialInterval), or(f.MaxInterval, defaultMaxInterval)
	if maxB < initial {
		return fmt.Errorf("forwarder.max_interval: %v is below forwarder.initial_interval %v", maxB, initial)
	}
	if len(f.LeaseGroup) > maxIDLength {
		return fmt.Errorf("forwarder.lease_group: must be at most %d bytes, got %d", maxIDLength, len(f.LeaseGroup))
	}
	if len(f.RelayID) > maxIDLength {
		return fmt.Errorf("forwarder.relay_id: must be at most %d bytes, got %d", maxIDLength, len(f.RelayID))
	}
	seen := map[string]bool{}
	for i, t := range f.Tenants {
		if seen[t] {
			return fmt.Errorf("forwarder.tenants[%d]: %q is listed twice", i, t)
		}
		seen[t] = true
	}
	return nil
}

func or(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}

// Apply copies the set fields of the section into c, leaving the forwarder's defaults for the
// others.
func (f Forwarder) Apply(c *forwarder.Config) {
	c.Source = forwarder.Source(f.Source)
	c.Delivery = forwarder.Delivery(f.Delivery)
	c.CheckpointTopic = f.CheckpointTopic
	c.TransactionalIDPrefix = f.TransactionalIDPrefix
	c.BatchSize = f.BatchSize
	c.MaxBatchBytes = int64(f.MaxBatchBytes)
	c.UnlimitedRetries = f.UnlimitedRetries
	c.Workers = f.Workers
	c.MaxAttempts = f.MaxAttempts
	c.InitialInterval = f.InitialInterval
	c.MaxInterval = f.MaxInterval
	c.DeadLetterTopic = f.DeadLetterTopic
	c.Retention = f.Retention
	c.PruneInterval = f.PruneInterval
	c.LeaseTTL = f.LeaseTTL
	c.PublishStallAfter = f.PublishStallAfter
	c.Tenants = slices.Clone(f.Tenants)
	c.LeaseGroup = f.LeaseGroup
	c.RelayID = f.RelayID
	c.MinPollInterval = f.MinPollInterval
	c.MaxPollInterval = f.MaxPollInterval
}

// field binds one key of a section to the Go value it fills.
type field struct {
	key    string
	target any   // *string, *int, *bool, *time.Duration or *[]string
	set    *bool // optional: records that the key was present
	// positive rejects an explicit zero or negative number or duration (leaving the key out
	// keeps the default).
	positive bool
}

// renamedKey returns the new path of a key an earlier version read, so that an old file fails
// with the key to write instead of a bare "unknown key".
func renamedKey(path string) (string, bool) {
	switch path {
	case "forwarder.initial_backoff":
		return "forwarder.initial_interval", true
	case "forwarder.max_backoff":
		return "forwarder.max_interval", true
	}
	return "", false
}

// decodeMapping fills fields from the mapping node n found at path. It is a small decoder of
// its own, rather than yaml.v3's Decode with KnownFields, so that every error (an unknown key,
// a duplicate, a value of the wrong type) names the key by its YAML path instead of a Go type.
func decodeMapping(n *yaml.Node, path string, fields []field) error {
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("%s: must be a mapping of keys, got %s (line %d)", path, kindName(n), n.Line)
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], resolve(n.Content[i+1])
		p := path + "." + k.Value
		if seen[k.Value] {
			return fmt.Errorf("%s: set twice (line %d)", p, k.Line)
		}
		seen[k.Value] = true
		idx := slices.IndexFunc(fields, func(f field) bool { return f.key == k.Value })
		if to, ok := renamedKey(p); ok && idx < 0 {
			return fmt.Errorf("%s: renamed %s (line %d; see CHANGELOG.md)", p, to, k.Line)
		}
		if idx < 0 {
			names := make([]string, len(fields))
			for j, f := range fields {
				names[j] = f.key
			}
			return fmt.Errorf("%s: unknown key (line %d; allowed: %s)", p, k.Line, strings.Join(names, ", "))
		}
		f := fields[idx]
		if isNull(v) {
			continue
		}
		if err := decodeValue(v, p, f.target); err != nil {
			return err
		}
		if f.positive {
			switch t := f.target.(type) {
			case *int:
				if *t <= 0 {
					return fmt.Errorf("%s: must be positive, got %d (line %d; leave it out for the default)", p, *t, v.Line)
				}
			case *time.Duration:
				if *t <= 0 {
					return fmt.Errorf("%s: must be positive, got %v (line %d; leave it out for the default)", p, *t, v.Line)
				}
			}
		}
		if f.set != nil {
			*f.set = true
		}
	}
	return nil
}

func decodeValue(v *yaml.Node, path string, target any) error {
	if list, ok := target.(*[]string); ok {
		if v.Kind != yaml.SequenceNode {
			return fmt.Errorf("%s: must be a list of strings, got %s (line %d)", path, kindName(v), v.Line)
		}
		*list = nil
		for i, item := range v.Content {
			item = resolve(item)
			if item.Kind != yaml.ScalarNode {
				return fmt.Errorf("%s[%d]: must be a string, got %s (line %d)", path, i, kindName(item), item.Line)
			}
			*list = append(*list, item.Value)
		}
		return nil
	}
	if v.Kind != yaml.ScalarNode {
		return fmt.Errorf("%s: must be a single value, got %s (line %d)", path, kindName(v), v.Line)
	}
	raw := strings.TrimSpace(v.Value)
	switch t := target.(type) {
	case *string:
		*t = raw
	case *int:
		n, err := strconv.Atoi(raw)
		if err != nil {
			return fmt.Errorf("%s: must be an integer, got %q (line %d)", path, v.Value, v.Line)
		}
		*t = n
	case *bool:
		switch strings.ToLower(raw) {
		case "true", "yes", "on":
			*t = true
		case "false", "no", "off":
			*t = false
		default:
			return fmt.Errorf("%s: must be true or false, got %q (line %d)", path, v.Value, v.Line)
		}
	case *time.Duration:
		d, err := time.ParseDuration(raw)
		if err != nil {
			return fmt.Errorf("%s: must be a Go duration such as 500ms, 30s or 5m, got %q (line %d)", path, v.Value, v.Line)
		}
		*t = d
	default:
		return fmt.Errorf("%s: internal error: cannot decode into %T", path, target)
	}
	return nil
}

// resolve follows an alias to its anchored node.
func resolve(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == 0 || (n.Kind == yaml.ScalarNode && n.Tag == "!!null")
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("the value %q", n.Value)
	default:
		return "nothing"
	}
}
