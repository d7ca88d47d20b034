// Command relaybench measures outboxkit's forwarder against Watermill's stock forwarder
// (watermill-sql subscriber + components/forwarder) and against a ceiling relay (the simplest
// batched relay that could exist: claim-and-delete 1,000 rows, one franz-go produce, commit),
// side by side, on the same databases (PostgreSQL, MariaDB) and the same Kafka, with the same
// events, and prints a table: throughput draining a pre-filled backlog for each number of
// aggregate ids, commit-to-consume latency at a steady rate, and the CPU time and peak RSS of
// each relay process (each relay runs as a child process).
//
//	go run ./internal/cmd/relaybench -events 20000
//	go run ./internal/cmd/relaybench -events 20000 -keys 1,10,1000 -dbs postgres,mysql -repeat 3 -svg docs/benchmarks-keys.svg
//	go run ./internal/cmd/relaybench -only write -repeat 3   # the write-side table alone (PostgreSQL)
//	go run ./internal/cmd/relaybench -dbs postgres -payloads 256 -events 100000 -keys 1,1000 -relays outboxkit -source cdc,wal -repeat 3   # issue 39's target table (waltargets.go)
//	go run ./internal/cmd/relaybench -only scheduled -dbs postgres -repeat 3   # scheduled events (sched.go)
//
// With RELAYBENCH_CPUPROFILE=<dir>, every relay child writes a CPU profile of its run to
// <dir>/<relay>-<table>.pprof.
//
// The files of this command, by job: main.go (flags), run.go (the run: drains, steady rates,
// write side, report), backlog.go (filling the outbox, consuming from Kafka, the drain and
// steady scenarios), child.go (the relay child processes), ceiling.go (the ceiling relay),
// table.go (the printed tables and the noise report), plot.go (the SVG plot).
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// The relays relaybench knows.
const (
	relayOutboxkit = "outboxkit"
	// relayExactlyOnce is the outboxkit forwarder with Delivery exactly_once (-delivery).
	relayExactlyOnce = "outboxkit-eo"
	relayStock       = "stock"
	relayCeiling     = "ceiling"
	// relayPulsar, relayNATS and relayRabbitMQ are the outboxkit forwarder publishing to Pulsar
	// (brokers/pulsar, -pulsar), NATS JetStream (brokers/nats, -nats) and RabbitMQ
	// (brokers/rabbitmq, -rabbitmq) instead of Kafka.
	relayPulsar   = "outboxkit-pulsar"
	relayNATS     = "outboxkit-nats"
	relayRabbitMQ = "outboxkit-rabbitmq"
	// relayAvro and relayProtobuf are the outboxkit forwarder on Kafka encoding every event with
	// the Avro or Protobuf schema registered for its topic (brokers/schema, -registry).
	relayAvro     = "outboxkit-avro"
	relayProtobuf = "outboxkit-protobuf"
)

// sqlWriteTransactions is how many transactions of each size and writer measureSQLWriteCost times.
const sqlWriteTransactions = 500

// onlyWrite is the value of -only that runs the write-side table alone.
const onlyWrite = "write"

type options struct {
	pgDSN     string
	mysqlDSN  string
	brokers   []string
	pulsarURL string
	natsURL   string
	rabbitMQ  string
	registry  string // the schema registry of the schema relays
	events    int
	keys      []int
	dbs       []database
	payloads  []int
	rate      int
	seconds   int
	// steadyRelays are the numbers of relay processes of the latency run, one run each;
	// writers is how many concurrent writers share its rate.
	steadyRelays []int
	writers      int
	relays       []string
	repeat       int
	workers      int
	batch        int
	batchMiB     float64
	units        int
	compress     string
	svg          string
	relaysSVG    string
	only         string // "" for the whole run, onlyWrite or onlyScheduled
	// guardVariants adds the slot guard's variants to the write-side table (-only write).
	guardVariants bool
	future        int    // events scheduled for tomorrow beside the due ones (-only scheduled)
	skipWrites    bool   // -write-side=false: no write-side tables
	baseline      string // a relaybench binary of another commit, whose forwarder relays run beside (baseline.go)
	command       string // the command line, printed with the results
}

// database is one database the relays are measured on.
type database struct {
	name    string // postgres or mysql: the value of -dbs and of the child's -db
	label   string // as printed
	dialect outbox.Dialect
	driver  string // database/sql driver name
	dsn     string
}

func main() {
	role := flag.String("role", "", "internal: run as a relay child (outboxkit, stock or ceiling)")
	table := flag.String("table", "", "internal: outbox table or forwarder topic of the child")
	childDB := flag.String("db", "postgres", "internal: the child's database (postgres or mysql)")
	var o options
	flag.StringVar(&o.pgDSN, "pg", envOr(testsupport.EnvPostgresDSN, testsupport.DefaultPostgresDSN), "PostgreSQL URL")
	flag.StringVar(&o.mysqlDSN, "mysql", envOr(testsupport.EnvMySQLDSN, testsupport.DefaultMySQLDSN), "MariaDB/MySQL DSN (go-sql-driver/mysql)")
	brokers := flag.String("kafka", envOr(testsupport.EnvKafkaBrokers, testsupport.DefaultKafkaBrokers), "Kafka brokers")
	flag.StringVar(&o.pulsarURL, "pulsar", envOr(testsupport.EnvPulsarURL, testsupport.DefaultPulsarURL), "Pulsar service URL (relay outboxkit-pulsar)")
	flag.StringVar(&o.natsURL, "nats", envOr(testsupport.EnvNATSURL, testsupport.DefaultNATSURL), "NATS server (relay outboxkit-nats)")
	flag.StringVar(&o.rabbitMQ, "rabbitmq", envOr(testsupport.EnvRabbitMQURL, testsupport.DefaultRabbitMQURL), "RabbitMQ URL (relay outboxkit-rabbitmq)")
	flag.StringVar(&o.registry, "registry", envOr(testsupport.EnvSchemaRegistryURL, testsupport.DefaultSchemaRegistryURL), "Confluent-compatible schema registry (relays outboxkit-avro, outboxkit-protobuf)")
	flag.IntVar(&o.events, "events", 20000, "events in the backlog each relay drains")
	keys := flag.String("keys", "1,10,1000", "numbers of distinct aggregate ids, one drain each")
	dbs := flag.String("dbs", "postgres,mysql", "databases to measure on (postgres, mysql)")
	payloads := flag.String("payloads", "256,4096", "payload sizes in bytes")
	flag.IntVar(&o.rate, "rate", 1000, "events/s of the steady-rate latency run (0 skips it)")
	flag.IntVar(&o.seconds, "seconds", 10, "duration of the latency run")
	steadyRelays := flag.String("steady-relays", "1", "numbers of relay processes sharing the outbox in the latency run, one run each (e.g. 1,3)")
	flag.IntVar(&o.writers, "writers", 1, "concurrent writers sharing the latency run's rate")
	relays := flag.String("relays", "outboxkit,stock,ceiling", "relays to measure (outboxkit, outboxkit-sql: outboxkit draining events written by plain SQL, with the write cost beside outbox.Writer; stock, ceiling, cdc-ceiling, outboxkit-pulsar, outboxkit-nats, outboxkit-rabbitmq, outboxkit-avro, outboxkit-protobuf: the forwarder encoding with the registry, every drain's payloads then JSON; -source cdc adds outboxkit-cdc, and cdc-ceiling when ceiling is measured; cdc-ceiling needs -source cdc; wal-ceiling: a relay that only decodes the wal source's messages (written by outbox.Writer in ModeWAL) and produces them, PostgreSQL)")
	source := flag.String("source", "polling", "sources measured beside polling, a list: cdc measures the outboxkit relay with the cdc source too (relay outboxkit-cdc, PostgreSQL), with pg_recvlogical's decode ceiling on the same rows and the write-side cost; wal the wal source (relays outboxkit-wal, wal-ceiling and outboxkit-wal-eo, PostgreSQL) and prints issue 39's target table; e.g. -source cdc,wal")
	delivery := flag.String("delivery", "at_least_once", "at_least_once, or exactly_once to measure the outboxkit relay with exactly-once delivery too (relay outboxkit-eo; with -source cdc also outboxkit-cdc-eo), beside at-least-once")
	flag.IntVar(&o.repeat, "repeat", 1, "measure every drain this many times (interleaved) and print the median and spread")
	flag.IntVar(&o.workers, "workers", 0, "outboxkit forwarder Workers (0: its default)")
	flag.IntVar(&o.batch, "batch", 0, "outboxkit forwarder BatchSize (0: its default)")
	flag.Float64Var(&o.batchMiB, "batch-mib", 0, "outboxkit forwarder MaxBatchBytes in MiB (0: its default)")
	flag.IntVar(&o.units, "units", 0, "outboxkit-eo forwarder TransactionalUnits (0: its default)")
	flag.StringVar(&o.compress, "compression", "", "Kafka compression for all relays (none, gzip, snappy, lz4, zstd; empty: brokers/kafka's default, lz4)")
	flag.StringVar(&o.svg, "svg", "", "write an SVG plot of events/s against the number of keys to this file")
	flag.StringVar(&o.relaysSVG, "relays-svg", "", "write an SVG plot of each relay's drain events/s and steady-rate latency distribution to this file")
	flag.StringVar(&o.baseline, "baseline", "", "a relaybench binary built from another commit: each outboxkit forwarder relay is also drained with that binary's relay (named <relay>@base), alternately in every repetition, and the relay CPU per event compared (scripts/cpu-compare.sh)")
	writeSide := flag.Bool("write-side", true, "measure the write side when the run has the cdc relay or outboxkit-sql (false: drains only)")
	flag.StringVar(&o.only, "only", "", "write: measure only the write-side table (PostgreSQL, no Kafka), -repeat times; scheduled: only the scheduled-events table (due events beside -future scheduled ones, a burst coming due at once, lateness at -rate scheduled events/s for -seconds)")
	flag.BoolVar(&o.guardVariants, "guard-variants", false, "-only write: also measure other ways of guarding the wal writer's emit by its slot (guardvariants.go) beside its own statement and the bare emit")
	flag.IntVar(&o.future, "future", 1_000_000, "events scheduled for tomorrow beside the due ones (-only scheduled)")
	flag.Parse()
	if flag.NArg() > 0 {
		fatalf("unexpected argument %q (all settings are flags; see -h)", flag.Arg(0))
	}
	o.skipWrites = !*writeSide
	o.command = "relaybench " + strings.Join(os.Args[1:], " ")
	relayList, err := withModeRelays(*relays, *delivery, *source)
	if err != nil {
		fatalf("%v", err)
	}
	if err := o.parse(*brokers, *keys, *dbs, *payloads, relayList); err != nil {
		fatalf("%v", err)
	}
	if o.steadyRelays, err = parseInts("-steady-relays", *steadyRelays, 1, "a number of relays of at least 1"); err != nil {
		fatalf("%v", err)
	}
	if o.writers < 1 {
		fatalf("-writers: %d is not a positive number of writers", o.writers)
	}
	if contains(o.relays, relayCDCCeiling) && !contains(o.relays, relayCDC) {
		fatalf("-relays: %s is printed beside outboxkit-cdc and pg_recvlogical: add -source cdc", relayCDCCeiling)
	}
	if *role != "" {
		db, err := o.database(*childDB)
		if err != nil {
			fatalf("-db: %v", err)
		}
		if err := runRelay(*role, db, *table, o); err != nil {
			fatalf("%s relay on %s: %v", *role, db.label, err)
		}
		return
	}
	if err := run(o); err != nil {
		fatalf("%v", err)
	}
}

// parse validates the flags and fills the list fields of o. Every error names the flag and the
// value it refuses.
// withModeRelays adds to the -relays list the relays that -delivery and -source measure besides.
func withModeRelays(relays, delivery, source string) (string, error) {
	switch delivery {
	case "at_least_once":
	case "exactly_once":
		relays += "," + relayExactlyOnce
	default:
		return "", fmt.Errorf("-delivery: %q is not at_least_once or exactly_once", delivery)
	}
	for _, src := range splitList(source) {
		switch src {
		case "polling":
		case "cdc":
			relays += "," + relayCDC
			if strings.Contains(","+relays+",", ","+relayCeiling+",") {
				relays += "," + relayCDCCeiling
			}
			if delivery == "exactly_once" {
				relays += "," + relayCDCExactlyOnce
			}
		case "wal":
			// The wal source's target table (waltargets.go) sets its drain beside the wal
			// ceiling and its exactly-once drain beside at-least-once.
			relays += "," + relayWAL + "," + relayWALCeiling + "," + relayWALExactlyOnce
		default:
			return "", fmt.Errorf("-source: %q is not polling, cdc or wal", src)
		}
	}
	return relays, nil
}

// parse reads the list flags into o, then checks the other settings: the error names the bad flag
// and value.
func (o *options) parse(brokers, keys, dbs, payloads, relays string) error {
	for _, b := range strings.Split(brokers, ",") {
		if b = strings.TrimSpace(b); b != "" {
			o.brokers = append(o.brokers, b)
		}
	}
	if len(o.brokers) == 0 {
		return fmt.Errorf("-kafka: %q names no broker", brokers)
	}
	var err error
	if o.keys, err = parseInts("-keys", keys, 1, "a number of aggregate ids of at least 1"); err != nil {
		return err
	}
	if o.payloads, err = parseInts("-payloads", payloads, 16, "a size of at least 16 bytes"); err != nil {
		return err
	}
	for _, name := range splitList(dbs) {
		db, err := o.database(name)
		if err != nil {
			return fmt.Errorf("-dbs: %w", err)
		}
		if !containsDB(o.dbs, db.name) {
			o.dbs = append(o.dbs, db)
		}
	}
	if len(o.dbs) == 0 {
		return fmt.Errorf("-dbs: %q names no database", dbs)
	}
	for _, r := range splitList(relays) {
		switch r {
		case relayOutboxkit, relayExactlyOnce, relayCDC, relayCDCExactlyOnce, relayWAL, relayWALExactlyOnce, relayStock, relayCeiling, relayCDCCeiling, relayWALCeiling,
			relayPulsar, relayNATS, relayRabbitMQ, relaySQLWriters, relayAvro, relayProtobuf:
			if !contains(o.relays, r) {
				o.relays = append(o.relays, r)
			}
		default:
			return fmt.Errorf("-relays: %q is not a relay (want outboxkit, outboxkit-sql, stock, ceiling, wal-ceiling, outboxkit-pulsar, outboxkit-nats, outboxkit-rabbitmq, outboxkit-avro or outboxkit-protobuf)", r)
		}
	}
	if len(o.relays) == 0 {
		return fmt.Errorf("-relays: %q names no relay", relays)
	}
	if o.baseline != "" {
		if err := checkBaseline(o.baseline); err != nil {
			return err
		}
		o.relays = withBaseline(o.relays)
	}
	return o.checkSettings(dbs)
}

// checkSettings checks the numeric settings, the compression, -only and the plots' paths; dbs is
// the -dbs flag as given.
func (o *options) checkSettings(dbs string) error {
	switch {
	case o.events < 1:
		return fmt.Errorf("-events: %d is not a positive number of events", o.events)
	case o.rate < 0:
		return fmt.Errorf("-rate: %d is negative (0 skips the latency run)", o.rate)
	case o.rate > 0 && o.seconds < 1:
		return fmt.Errorf("-seconds: %d is not a positive duration in seconds", o.seconds)
	case o.repeat < 1:
		return fmt.Errorf("-repeat: %d is not a positive number of repetitions", o.repeat)
	case o.workers < 0:
		return fmt.Errorf("-workers: %d is negative (0: the forwarder's default)", o.workers)
	case o.batchMiB < 0:
		return fmt.Errorf("-batch-mib: %v is negative (0: the forwarder's default)", o.batchMiB)
	case o.batch < 0:
		return fmt.Errorf("-batch: %d is negative (0: the forwarder's default)", o.batch)
	}
	if _, err := compressionCodec(o.compress); err != nil {
		return fmt.Errorf("-compression: %w", err)
	}
	switch o.only {
	case "":
	case onlyWrite:
		if !containsDB(o.dbs, "postgres") {
			return fmt.Errorf("-only %s: the write side is measured on PostgreSQL, -dbs %q names none", onlyWrite, dbs)
		}
		o.dbs = []database{o.dbs[slices.IndexFunc(o.dbs, func(d database) bool { return d.name == "postgres" })]}
	case onlyScheduled:
		if o.rate < 1 || o.future < 0 {
			return fmt.Errorf("-only %s: -rate %d and -future %d: want a positive rate and a number of future events", onlyScheduled, o.rate, o.future)
		}
	default:
		return fmt.Errorf("-only: %q is not a part of the run (want %s or %s)", o.only, onlyWrite, onlyScheduled)
	}
	if o.guardVariants && o.only != onlyWrite {
		return fmt.Errorf("-guard-variants: measured in the write-side table alone, give -only %s with it", onlyWrite)
	}
	for _, f := range [][2]string{{"-svg", o.svg}, {"-relays-svg", o.relaysSVG}} {
		if f[1] == "" {
			continue
		}
		if o.only != "" {
			return fmt.Errorf("%s %q: -only %s draws no plot", f[0], f[1], o.only)
		}
		if dir := filepath.Dir(f[1]); !isDir(dir) {
			return fmt.Errorf("%s: %q: directory %q does not exist", f[0], f[1], dir)
		}
	}
	return nil
}

// database returns the database named by a -dbs entry.
func (o *options) database(name string) (database, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "postgres", "postgresql", "pg":
		return database{name: "postgres", label: "PostgreSQL", dialect: outbox.Postgres, driver: "pgx", dsn: o.pgDSN}, nil
	case "mysql", "mariadb":
		return database{name: "mysql", label: "MariaDB", dialect: outbox.MySQL, driver: "mysql", dsn: o.mysqlDSN}, nil
	}
	return database{}, fmt.Errorf("%q is not a database (want postgres or mysql)", name)
}

func parseInts(flagName, list string, least int, want string) ([]int, error) {
	var out []int
	for _, s := range splitList(list) {
		n, err := strconv.Atoi(s)
		if err != nil || n < least {
			return nil, fmt.Errorf("%s: %q is not %s", flagName, s, want)
		}
		if !contains(out, n) {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: %q is empty", flagName, list)
	}
	return out, nil
}

func splitList(list string) []string {
	var out []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

func contains[T comparable](list []T, v T) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

func containsDB(list []database, name string) bool {
	for _, d := range list {
		if d.name == name {
			return true
		}
	}
	return false
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "relaybench: "+format+"\n", args...)
	os.Exit(1)
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

func maxInt(list []int) int {
	m := list[0]
	for _, v := range list[1:] {
		m = max(m, v)
	}
	return m
}
