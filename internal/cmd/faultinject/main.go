// Command faultinject runs outboxkit's fault-injection test (package internal/faultinject) at a
// chosen size: writers commit and roll back events on PostgreSQL, three `outboxkit relay`
// processes forward them to a dedicated Kafka or Pulsar while they are SIGKILLed, the broker is
// restarted and the relays' database connections are cut; an independent consumer checks the
// result. It prints a summary table and exits 1 on any loss, phantom or order violation (or an
// event without exactly one effect), 2 when the run itself could not be carried out.
//
//	go run ./internal/cmd/faultinject -size large -broker kafka
//
// The dedicated broker is started through scripts/services.sh (start-kafka / start-pulsar) with
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
)

func main() {
	os.Exit(run())
}

func run() int {
	var (
		size       = flag.String("size", "small", "preset: small (3,000 events) or large (50,000 events); other flags override it")
		broker     = flag.String("broker", faultinject.Kafka, "kafka or pulsar (a dedicated one, started by scripts/services.sh)")
		dsn        = flag.String("dsn", os.Getenv("OUTBOXKIT_PG_DSN"), "PostgreSQL URL (default $OUTBOXKIT_PG_DSN)")
		events     = flag.Int("events", 0, "events to commit")
		keys       = flag.Int("keys", 0, "aggregates the events are spread over")
		writers    = flag.Int("writers", 0, "concurrent writers")
		rate       = flag.Int("rate", -1, "committed events per second (0: unlimited)")
		relays     = flag.Int("relays", 3, "relay processes")
		kills      = flag.Int("kills", 0, "relay SIGKILLs")
		rollback   = flag.Float64("rollback", 0.1, "share of transactions rolled back")
		downtime   = flag.Duration("broker-downtime", 0, "how long the broker stays down when restarted")
		noRestart  = flag.Bool("no-broker-restart", false, "do not restart the broker")
		noCut      = flag.Bool("no-db-cut", false, "do not cut the relays' database connections")
		seed       = flag.Uint64("seed", 0, "random seed (0: random)")
		stateDir   = flag.String("state-dir", faultinject.DefaultStateDir, "state directory of the dedicated broker")
		binary     = flag.String("outboxkit", "", "outboxkit binary (default: build ./cmd/outboxkit)")
		keep       = flag.Bool("keep", false, "keep the tables, relay config and logs")
		keepBroker = flag.Bool("keep-broker", false, "leave the dedicated broker running")
	)
	flag.Parse()
	if *dsn == "" {
		*dsn = "postgres://outboxkit:outboxkit@127.0.0.1:15432/outboxkit?sslmode=disable"
	}
	cfg := faultinject.Config{PostgresDSN: *dsn, Binary: *binary, Relays: *relays, RollbackShare: *rollback,
		NoBrokerRestart: *noRestart, NoDBCut: *noCut, Seed: *seed, Keep: *keep, BrokerDowntime: *downtime,
		Logf: log.Printf}
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
	cfg.Broker = faultinject.Broker{Kind: *broker, RepoRoot: root, StateDir: *stateDir}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := faultinject.Run(ctx, cfg)
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
	fmt.Println("OK: no loss, no phantom, per-key order held, one effect per event")
	return 0
}
