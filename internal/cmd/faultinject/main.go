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

func run() int {
	var (
		size       = flag.String("size", "small", "preset: small (3,000 events) or large (50,000 events); other flags override it")
		broker     = flag.String("broker", faultinject.Kafka, "kafka, kafka-cluster (three nodes, one restarted at a time), pulsar, nats or rabbitmq (a dedicated one, started by scripts/services.sh)")
		scenario   = flag.String("scenario", "faults", "faults (every fault, by the writers' progress) or pause (one relay SIGSTOPped for 3 x lease TTL)")
		database   = flag.String("db", "postgres", "database: postgres or mysql (MariaDB)")
		source     = flag.String("source", "polling", "the relays' forwarder.source: polling or cdc (PostgreSQL logical replication; -db postgres)")
		delivery   = flag.String("delivery", "at_least_once", "the relays' forwarder.delivery: at_least_once or exactly_once (kafka only; duplicates then fail the run)")
		dsn        = flag.String("dsn", "", "database DSN (default $OUTBOXKIT_PG_DSN or $OUTBOXKIT_MYSQL_DSN)")
		events     = flag.Int("events", 0, "events to commit")
		keys       = flag.Int("keys", 0, "aggregates the events are spread over")
		writers    = flag.Int("writers", 0, "concurrent writers")
		rate       = flag.Int("rate", -1, "committed events per second (0: unlimited)")
		relays     = flag.Int("relays", 3, "relay processes")
		kills      = flag.Int("kills", 0, "relay SIGKILLs")
		pauses     = flag.Int("pauses", 0, "relay SIGSTOP/SIGCONT pauses (every other one, the first included, longer than 3 x lease TTL)")
		noPauses   = flag.Bool("no-pauses", false, "do not pause relays")
		leaseTTL   = flag.Duration("lease-ttl", 2*time.Second, "the relays' lease TTL")
		rollback   = flag.Float64("rollback", 0.1, "share of transactions rolled back")
		downtime   = flag.Duration("broker-downtime", 0, "how long the broker stays down when restarted")
		noRestart  = flag.Bool("no-broker-restart", false, "do not restart the broker")
		restarts   = flag.Int("broker-restarts", 0, "how many times the broker is restarted (0: once; a kafka-cluster restarts one node at a time, in turn)")
		noCut      = flag.Bool("no-db-cut", false, "do not cut the relays' database connections")
		seed       = flag.Uint64("seed", 0, "random seed (0: random)")
		stateDir   = flag.String("state-dir", faultinject.DefaultStateDir, "state directory of the dedicated broker")
		binary     = flag.String("outboxkit", "", "outboxkit binary (default: build ./cmd/outboxkit)")
		keep       = flag.Bool("keep", false, "keep the tables, relay config and logs")
		keepBroker = flag.Bool("keep-broker", false, "leave the dedicated broker running")
		insts      = flag.Int("installations", 1, "services sharing the database and the broker, each in a schema of its own (search_path) with the default table outbox_events (postgres)")
		table      = flag.String("table", "", "the outbox table as database.table names it, e.g. OrdersOutbox or ShopApp.OrdersOutbox (default: a generated name)")
		poison     = flag.Int("poison", 0, "events over the broker's message limit among the writes, each must end dead-lettered within -max-attempts")
		poisonSize = flag.Int("poison-bytes", 0, "payload size of a poison event (default 2 MiB for kafka, 8 MiB for pulsar)")
		calm       = flag.Int("calm-events", 0, "events committed after every fault is over, the relays left alone (their steady path must carry them)")
		drain      = flag.Duration("drain-timeout", 0, "bound of the wait for the last events after the writes (default 3m, 10m with -size large)")
		attempts   = flag.Int("max-attempts", 0, "the relays' forwarder.max_attempts (default 1000; 3 with -poison)")
		pulsarPort = flag.Int("pulsar-port", faultinject.DefaultPulsarPort, "port of the dedicated Pulsar (its HTTP and bookie ports: -pulsar-port+1, +2, unless it is the default)")
		kafkaPort  = flag.Int("kafka-port", faultinject.DefaultKafkaPort, "port of the dedicated Kafka (with -kafka-port+1 for its controller); another one than the tests' lets a run go on beside them")
	)
	flag.Parse()
	dialect, err := outbox.ParseDialect(*database)
	if err != nil || (dialect != outbox.Postgres && dialect != outbox.MySQL) {
		fmt.Fprintf(os.Stderr, "faultinject: -db %q: want postgres or mysql\n", *database)
		return 2
	}
	if *dsn == "" {
		if dialect == outbox.MySQL {
			*dsn = envOr("OUTBOXKIT_MYSQL_DSN", "outboxkit:outboxkit@tcp(127.0.0.1:13306)/outboxkit?parseTime=true&multiStatements=true")
		} else {
			*dsn = envOr("OUTBOXKIT_PG_DSN", "postgres://outboxkit:outboxkit@127.0.0.1:15432/outboxkit?sslmode=disable")
		}
	}
	cfg := faultinject.Config{Dialect: dialect, DSN: *dsn, Delivery: *delivery, Source: *source, Binary: *binary, Relays: *relays, RollbackShare: *rollback,
		NoBrokerRestart: *noRestart, BrokerRestarts: *restarts, NoDBCut: *noCut, NoPauses: *noPauses, Pauses: *pauses, LeaseTTL: *leaseTTL,
		Seed: *seed, Keep: *keep, BrokerDowntime: *downtime, Logf: log.Printf,
		CalmEvents: *calm, Installations: *insts, Table: *table, PoisonEvents: *poison, PoisonBytes: *poisonSize, MaxAttempts: *attempts}
	if *poison > 0 && *attempts == 0 {
		cfg.MaxAttempts = 3
	}
	switch *size {
	case "small":
		cfg.Events, cfg.Keys, cfg.Writers, cfg.Kills, cfg.Rate = 3000, 200, 4, 6, 300
	case "large":
		cfg.Events, cfg.Keys, cfg.Writers, cfg.Kills, cfg.Rate = 50000, 500, 6, 20, 1000
		cfg.DrainTimeout = 10 * time.Minute
	default:
		fmt.Fprintf(os.Stderr, "faultinject: -size %q: want small or large\n", *size)
		return 2
	}
	if *drain > 0 {
		cfg.DrainTimeout = *drain
	}
	for _, o := range []struct {
		dst *int
		v   int
	}{{&cfg.Events, *events}, {&cfg.Keys, *keys},
		{&cfg.Writers, *writers}, {&cfg.Kills, *kills}} {
		if o.v > 0 {
			*o.dst = o.v
		}
	}
	if *rate >= 0 {
		cfg.Rate = *rate
	}
	root, err := faultinject.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg.Broker = faultinject.Broker{Kind: *broker, RepoRoot: root, StateDir: *stateDir,
		KafkaPort: *kafkaPort, KafkaControllerPort: *kafkaPort + 1}
	if *pulsarPort != faultinject.DefaultPulsarPort {
		cfg.Broker.PulsarPort, cfg.Broker.PulsarHTTPPort, cfg.Broker.PulsarBookiePort = *pulsarPort, *pulsarPort+1, *pulsarPort+2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var res faultinject.Result
	switch *scenario {
	case "faults":
		res, err = faultinject.Run(ctx, cfg)
	case "pause":
		if *events == 0 {
			cfg.Events = 0 // the scenario stops writing on its own
		}
		if *rate < 0 {
			cfg.Rate = 200
		}
		res, err = faultinject.RunPause(ctx, cfg)
	default:
		fmt.Fprintf(os.Stderr, "faultinject: -scenario %q: want faults or pause\n", *scenario)
		return 2
	}
	if !*keepBroker {
		log.Printf("stopping the dedicated %s", *broker)
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
	return fmt.Sprintf(", %d poison events dead-lettered within %d attempts (%d published)", res.Poison, res.MaxAttempts, res.PoisonPublished)
}
