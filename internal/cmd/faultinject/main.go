// Command faultinject runs outboxkit's fault-injection test (package internal/faultinject) at a
// chosen size: writers commit and roll back events on PostgreSQL or MariaDB, three `outboxkit
// relay` processes forward them to a dedicated Kafka or Pulsar while they are SIGKILLed and
// SIGSTOPped, the broker is restarted and the relays' database connections are cut; an
// independent consumer checks the result. It prints a summary table and exits 1 on any loss,
// phantom or order violation (or an event without exactly one effect, a deadlock logged by a
// relay, a paused relay whose partitions were not taken over in time), 2 when the run itself
// could not be carried out.
//
//	go run ./internal/cmd/faultinject -size large -broker kafka
//	go run ./internal/cmd/faultinject -db mysql
//	go run ./internal/cmd/faultinject -scenario pause -db mysql
//	go run ./internal/cmd/faultinject -installations 2 -delivery exactly_once -relays 2
//	go run ./internal/cmd/faultinject -source cdc -table ShopApp.OrdersOutbox
//	go run ./internal/cmd/faultinject -broker pulsar -poison 5 -no-broker-restart
//	go run ./internal/cmd/faultinject -schema avro -poison 4 -events 1200
//	go run ./internal/cmd/faultinject -scheduled 0.33 -events 1200
//	go run ./internal/cmd/faultinject -source wal -poison 4 -discard-at 0.7 -events 1500 -keys 100 -writers 3
//	go run ./internal/cmd/faultinject -scheduled 0.33 -due-grid 1s -delivery exactly_once -events 1200 -keys 50 -no-pauses
//
// The dedicated broker is started through scripts/services.sh (start-kafka, start-pulsar, start-nats, start-rabbitmq) with
// its own ports and state directory, and stopped at the end unless -keep-broker is given.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/outboxkit/outboxkit/internal/faultinject"
	"github.com/outboxkit/outboxkit/outbox"
)

func main() {
	os.Exit(run())
}

// flags are the command line's settings.
type flags struct {
	size, broker, scenario, database, source, delivery, dsn          string
	events, keys, writers, rate, relays, kills, pauses, restarts     int
	noPauses, noRestart, noCut, keep, keepBroker                     bool
	leaseTTL, downtime, drain, dueGrid                               time.Duration
	rollback, scheduled, discardAt                                   float64
	seed                                                             uint64
	stateDir, binary, table, schema, registry, walSlot               string
	insts, poison, poisonSize, calm, attempts, pulsarPort, kafkaPort int
}

// parseFlags reads the command line.
func parseFlags() flags {
	var f flags
	flag.StringVar(&f.size, "size", "small", "preset: small (3,000 events) or large (50,000 events); other flags override it")
	flag.StringVar(&f.broker, "broker", faultinject.Kafka, "kafka, kafka-cluster (three nodes, one restarted at a time), pulsar, nats or rabbitmq (a dedicated one, started by scripts/services.sh)")
	flag.StringVar(&f.scenario, "scenario", "faults", "faults (every fault, by the writers' progress) or pause (one relay SIGSTOPped for 3 x lease TTL)")
	flag.StringVar(&f.database, "db", "postgres", "database: postgres or mysql (MariaDB)")
	flag.StringVar(&f.source, "source", "polling", "the relays' forwarder.source: polling, cdc (PostgreSQL logical replication; -db postgres) or wal (events as logical decoding messages from Go, pgx and <table>_emit writers; -db postgres)")
	flag.StringVar(&f.walSlot, "wal-slot", "", "the wal source's slot, created with outboxkit wal-slot create and dropped at the end (default: a name of the run's own)")
	flag.Float64Var(&f.discardAt, "discard-at", 0, "with -poison: at this share of the writes, discard the poison events dead by then while the writers go on (0: after the writes)")
	flag.StringVar(&f.delivery, "delivery", "at_least_once", "the relays' forwarder.delivery: at_least_once or exactly_once (kafka only; duplicates then fail the run)")
	flag.StringVar(&f.dsn, "dsn", "", "database DSN (default $OUTBOXKIT_TEST_PG_DSN or $OUTBOXKIT_TEST_MYSQL_DSN)")
	flag.IntVar(&f.events, "events", 0, "events to commit")
	flag.IntVar(&f.keys, "keys", 0, "aggregates the events are spread over")
	flag.IntVar(&f.writers, "writers", 0, "concurrent writers")
	flag.IntVar(&f.rate, "rate", -1, "committed events per second (0: unlimited)")
	flag.IntVar(&f.relays, "relays", 3, "relay processes")
	flag.IntVar(&f.kills, "kills", 0, "relay SIGKILLs")
	flag.IntVar(&f.pauses, "pauses", 0, "relay SIGSTOP/SIGCONT pauses (every other one, the first included, longer than 3 x lease TTL)")
	flag.BoolVar(&f.noPauses, "no-pauses", false, "do not pause relays")
	flag.DurationVar(&f.leaseTTL, "lease-ttl", 2*time.Second, "the relays' lease TTL")
	flag.Float64Var(&f.rollback, "rollback", 0.1, "share of transactions rolled back")
	flag.DurationVar(&f.downtime, "broker-downtime", 0, "how long the broker stays down when restarted")
	flag.BoolVar(&f.noRestart, "no-broker-restart", false, "do not restart the broker")
	flag.IntVar(&f.restarts, "broker-restarts", 0, "how many times the broker is restarted (0: once; a kafka-cluster restarts one node at a time, in turn)")
	flag.BoolVar(&f.noCut, "no-db-cut", false, "do not cut the relays' database connections")
	flag.Uint64Var(&f.seed, "seed", 0, "random seed (0: random)")
	flag.StringVar(&f.stateDir, "state-dir", faultinject.DefaultStateDir, "state directory of the dedicated broker")
	flag.StringVar(&f.binary, "outboxkit", "", "outboxkit binary (default: build ./cmd/outboxkit)")
	flag.BoolVar(&f.keep, "keep", false, "keep the tables, relay config and logs")
	flag.BoolVar(&f.keepBroker, "keep-broker", false, "leave the dedicated broker running")
	flag.IntVar(&f.insts, "installations", 1, "services sharing the database and the broker, each in a schema of its own (search_path) with the default table outbox_events (postgres)")
	flag.StringVar(&f.table, "table", "", "the outbox table as database.table names it, e.g. OrdersOutbox or ShopApp.OrdersOutbox (default: a generated name)")
	flag.IntVar(&f.poison, "poison", 0, "events over the broker's message limit among the writes, each must end dead-lettered within -max-attempts")
	flag.StringVar(&f.schema, "schema", "", "avro: the relays encode every event with an Avro schema registered in -registry, the consumer decodes them, and -poison events break the schema instead (kafka, at least once)")
	flag.StringVar(&f.registry, "registry", envOr("OUTBOXKIT_TEST_SCHEMA_REGISTRY_URL", "http://127.0.0.1:18081/apis/ccompat/v7"), "the Confluent-compatible schema registry of -schema")
	flag.Float64Var(&f.scheduled, "scheduled", 0, "share of the transactions that also write an event scheduled 2-5 s ahead, some of them cancelled; the run then checks none arrives early or cancelled (kafka, polling)")
	flag.DurationVar(&f.dueGrid, "due-grid", 0, "with -scheduled: round every delivery time up to a multiple of this (events of one key come due together) and time each relay kill around such an instant")
	flag.IntVar(&f.poisonSize, "poison-bytes", 0, "payload size of a poison event (default 2 MiB for kafka, 8 MiB for pulsar)")
	flag.IntVar(&f.calm, "calm-events", 0, "events committed after every fault is over, the relays left alone (their steady path must carry them)")
	flag.DurationVar(&f.drain, "drain-timeout", 0, "bound of the wait for the last events after the writes (default 3m, 10m with -size large)")
	flag.IntVar(&f.attempts, "max-attempts", 0, "the relays' forwarder.max_attempts (default 1000; 3 with -poison, unless -source wal)")
	flag.IntVar(&f.pulsarPort, "pulsar-port", faultinject.DefaultPulsarPort, "port of the dedicated Pulsar (its HTTP and bookie ports: -pulsar-port+1, +2, unless it is the default)")
	flag.IntVar(&f.kafkaPort, "kafka-port", faultinject.DefaultKafkaPort, "port of the dedicated Kafka (with -kafka-port+1 for its controller); another one than the tests' lets a run go on beside them")
	flag.Parse()
	return f
}

// config is the run's configuration: the -size preset, then the flags that override it. The
// error names the bad flag.
func (f flags) config() (faultinject.Config, error) {
	dialect, err := outbox.ParseDialect(f.database)
	if err != nil || (dialect != outbox.Postgres && dialect != outbox.MySQL) {
		return faultinject.Config{}, fmt.Errorf("faultinject: -db %q: want postgres or mysql", f.database)
	}
	dsn := f.dsn
	if dsn == "" {
		if dialect == outbox.MySQL {
			dsn = envOr("OUTBOXKIT_TEST_MYSQL_DSN", "outboxkit:outboxkit@tcp(127.0.0.1:13306)/outboxkit?parseTime=true&multiStatements=true")
		} else {
			dsn = envOr("OUTBOXKIT_TEST_PG_DSN", "postgres://outboxkit:outboxkit@127.0.0.1:15432/outboxkit?sslmode=disable")
		}
	}
	cfg := faultinject.Config{Dialect: dialect, DSN: dsn, Delivery: f.delivery, Source: f.source, Binary: f.binary, Relays: f.relays, RollbackShare: f.rollback,
		NoBrokerRestart: f.noRestart, BrokerRestarts: f.restarts, NoDBCut: f.noCut, NoPauses: f.noPauses, Pauses: f.pauses, LeaseTTL: f.leaseTTL,
		Seed: f.seed, Keep: f.keep, BrokerDowntime: f.downtime, Logf: log.Printf,
		CalmEvents: f.calm, Installations: f.insts, Table: f.table, PoisonEvents: f.poison, PoisonBytes: f.poisonSize, MaxAttempts: f.attempts,
		Scheduled: f.scheduled, DueGrid: f.dueGrid, WALSlot: f.walSlot, DiscardAt: f.discardAt}
	if f.schema != "" {
		cfg.Schema, cfg.RegistryURL = f.schema, f.registry
	}
	// Oversized events may take a few attempts; a schema mismatch is permanent at the first, and
	// a low budget would dead-letter innocent events on a registry hiccup.
	// Not with wal: a broker outage parks every key, and the parked events spend attempts.
	if f.poison > 0 && f.attempts == 0 && f.schema == "" && f.source != "wal" {
		cfg.MaxAttempts = 3
	}
	switch f.size {
	case "small":
		cfg.Events, cfg.Keys, cfg.Writers, cfg.Kills, cfg.Rate = 3000, 200, 4, 6, 300
	case "large":
		cfg.Events, cfg.Keys, cfg.Writers, cfg.Kills, cfg.Rate = 50000, 500, 6, 20, 1000
		cfg.DrainTimeout = 10 * time.Minute
	default:
		return faultinject.Config{}, fmt.Errorf("faultinject: -size %q: want small or large", f.size)
	}
	if f.drain > 0 {
		cfg.DrainTimeout = f.drain
	}
	for _, o := range []struct {
		dst *int
		v   int
	}{{&cfg.Events, f.events}, {&cfg.Keys, f.keys}, {&cfg.Writers, f.writers}, {&cfg.Kills, f.kills}} {
		if o.v > 0 {
			*o.dst = o.v
		}
	}
	if f.rate >= 0 {
		cfg.Rate = f.rate
	}
	switch f.scenario {
	case "faults":
	case "pause":
		if f.events == 0 {
			cfg.Events = 0 // the scenario stops writing on its own
		}
		if f.rate < 0 {
			cfg.Rate = 200
		}
	default:
		return faultinject.Config{}, fmt.Errorf("faultinject: -scenario %q: want faults or pause", f.scenario)
	}
	root, err := faultinject.RepoRoot()
	if err != nil {
		return faultinject.Config{}, err
	}
	cfg.Broker = faultinject.Broker{Kind: f.broker, RepoRoot: root, StateDir: f.stateDir,
		KafkaPort: f.kafkaPort, KafkaControllerPort: f.kafkaPort + 1}
	if f.pulsarPort != faultinject.DefaultPulsarPort {
		cfg.Broker.PulsarPort, cfg.Broker.PulsarHTTPPort, cfg.Broker.PulsarBookiePort = f.pulsarPort, f.pulsarPort+1, f.pulsarPort+2
	}
	return cfg, nil
}

// run runs the scenario and prints its table: exit code 0 when every guarantee held, 1 when one
// broke, 2 when the run could not be carried out.
func run() int {
	f := parseFlags()
	cfg, err := f.config()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var res faultinject.Result
	if f.scenario == "pause" {
		res, err = faultinject.RunPause(ctx, cfg)
	} else {
		res, err = faultinject.Run(ctx, cfg)
	}
	if !f.keepBroker {
		log.Printf("stopping the dedicated %s", f.broker)
		if err := cfg.Broker.Stop(context.Background()); err != nil {
			log.Print(err)
		}
	}
	fmt.Print(res.Table())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := res.Err(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("OK: no loss, no phantom, per-key order held, one effect per event, no deadlock logged, paused relays taken over in time" +
		poisonOK(res))
	return 0
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// poisonOK is the end of the OK line for a run with poison events.
func poisonOK(res faultinject.Result) string {
	if res.Poison == 0 {
		return ""
	}
	s := fmt.Sprintf(", %d poison events dead-lettered within %d attempts (%d published)", res.Poison, res.MaxAttempts, res.PoisonPublished)
	if res.Schema != "" {
		s += fmt.Sprintf(", %d dead letters naming the field path, %d messages decoded through the registry", res.PoisonDeadLetters, res.Decoded)
	}
	return s
}
