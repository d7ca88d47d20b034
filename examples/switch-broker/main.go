// Command switch-broker publishes a few keyed events through the outbox and the forwarder and
// consumes them back, on whichever broker its configuration file names. The program is the same
// for Kafka, Pulsar, NATS JetStream and the in-process kfake cluster: only the configuration differs.
//
//	go run ./examples/switch-broker -config examples/switch-broker/kafka.yaml
//	go run ./examples/switch-broker -config examples/switch-broker/pulsar.yaml
//	go run ./examples/switch-broker -config examples/switch-broker/nats.yaml
//	go run ./examples/switch-broker -config examples/switch-broker/kfake.yaml   # nothing to start
//
// kafka-avro.yaml and pulsar-avro.yaml add a schema_registry section: the program registers an
// Avro schema for the topic and the relay publishes every event encoded with it, in the
// Confluent wire format on Kafka and as bare Avro with the schema in Pulsar's own registry on
// Pulsar (OUTBOXKIT_SCHEMA_REGISTRY_URL overrides the registry's address):
//
//	go run ./examples/switch-broker -config examples/switch-broker/kafka-avro.yaml
//	go run ./examples/switch-broker -config examples/switch-broker/pulsar-avro.yaml
//
// The outbox is an SQLite database in a temporary directory, so the broker is the only moving
// part. OUTBOXKIT_* environment variables override the file (OUTBOXKIT_KAFKA_BROKERS,
// OUTBOXKIT_PULSAR_URL, even OUTBOXKIT_BROKER).
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"golang.org/x/sync/errgroup"
	_ "modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
)

// options are the command-line settings of one run.
type options struct {
	// ConfigPath is the broker configuration file. Required.
	ConfigPath string
	// Unique suffixes the topic and the consumer group with a random run id, so runs never
	// share a topic.
	Unique bool
	// LookupEnv reads the environment overrides (os.LookupEnv in main).
	LookupEnv func(string) (string, bool)
	// Timeout bounds the whole run.
	Timeout time.Duration
}

func main() {
	opts := options{LookupEnv: os.LookupEnv}
	flag.StringVar(&opts.ConfigPath, "config", "", "broker configuration file, e.g. examples/switch-broker/kafka.yaml (required)")
	flag.BoolVar(&opts.Unique, "unique", false, "use a topic and consumer group unique to this run")
	flag.DurationVar(&opts.Timeout, "timeout", time.Minute, "give up after this long")
	flag.Parse()
	if opts.ConfigPath == "" {
		fmt.Fprintln(os.Stderr, "switch-broker: -config is required, e.g. -config examples/switch-broker/kfake.yaml")
		flag.Usage()
		os.Exit(2)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, opts); err != nil {
		fmt.Fprintln(os.Stderr, "switch-broker:", err)
		os.Exit(1)
	}
}

// change is the payload of every event: which account, its per-account sequence number, and
// the amount.
type change struct {
	Account string `json:"account" avro:"account"`
	Seq     int    `json:"seq" avro:"seq"`
	Amount  int    `json:"amount" avro:"amount"`
}

// script is what the program publishes: two accounts' histories, interleaved.
var script = []struct {
	eventType string
	change    change
}{
	{"AccountOpened", change{"acct-1", 1, 0}},
	{"AccountOpened", change{"acct-2", 1, 0}},
	{"MoneyDeposited", change{"acct-1", 2, 100}},
	{"MoneyDeposited", change{"acct-2", 2, 250}},
	{"MoneyWithdrawn", change{"acct-1", 3, 40}},
	{"AccountClosed", change{"acct-2", 3, 0}},
}

// received is one consumed event.
type received struct {
	eventID, eventType, key string
	change                  change
}

// run relays the script's events through the broker opts.ConfigPath configures and checks that
// each arrives once, each account's in order, telling the story to out.
func run(ctx context.Context, out io.Writer, opts options) error {
	if opts.Timeout <= 0 {
		opts.Timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	// The only input that differs between brokers.
	cfg, err := loadConfig(opts)
	if err != nil {
		return err
	}
	topic, group := names(&cfg, opts.Unique)
	fmt.Fprintf(out, "broker: %s (from %s), topic %q, consumer %q\n", cfg.Broker, filepath.Base(opts.ConfigPath), topic, group)

	// The outbox: SQLite in a temporary directory.
	db, writer, closeDB, err := openOutbox(ctx)
	if err != nil {
		return err
	}
	defer closeDB()

	// Everything broker-specific is behind Build.
	brokers, err := brokerconfig.Build(ctx, cfg, watermill.NopLogger{})
	if err != nil {
		return fmt.Errorf("build broker %s: %w", cfg.Broker, err)
	}
	defer brokers.Close()

	// With a schema_registry section: the events' schema, and how the consumer reads them back.
	decode, err := setUpSchema(ctx, out, cfg, topic)
	if err != nil {
		return err
	}

	// The consumer.
	got := make(chan received, 4*len(script))
	router, err := newConsumer(brokers, topic, group, decode, got)
	if err != nil {
		return err
	}

	// The forwarder.
	fwd, err := forwarder.New(forwarder.Config{
		DB: db, Dialect: outbox.SQLite, Table: writer.Table().Events(), Publisher: brokers.Publisher(),
		MaxPollInterval: 100 * time.Millisecond, Logger: logger,
	})
	if err != nil {
		return fmt.Errorf("forwarder: %w", err)
	}

	// Both run until the example ends, or until one of them fails: that cancels running, and its
	// error is running's cause.
	runCtx, stop := context.WithCancel(ctx)
	relay, running := errgroup.WithContext(runCtx)
	relay.Go(func() error { return stoppedBy(running, "router", router.Run(running)) })
	relay.Go(func() error { return stoppedBy(running, "forwarder", fwd.Run(running)) })
	defer func() {
		stop()
		_ = relay.Wait()
	}()

	// The events, each in its own transaction, keyed by account.
	written, err := writeScript(ctx, db, writer, topic)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote %d events for 2 accounts to the outbox\n", len(script))

	byKey, err := consumeInOrder(running, out, got, written)
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	fmt.Fprintln(out, "per key, in order:")
	for _, k := range keys {
		fmt.Fprintf(out, "  %s: %s\n", k, strings.Join(byKey[k], ", "))
	}
	fmt.Fprintf(out, "all %d events delivered through %s, each account's events in commit order\n", len(script), cfg.Broker)
	return nil
}

// writeScript writes the script's events to topic, each in its own transaction, and returns
// their ids.
func writeScript(ctx context.Context, db *sql.DB, writer *outbox.Writer, topic string) (map[string]bool, error) {
	written := map[string]bool{}
	for _, s := range script {
		e, err := outbox.NewJSONEvent(topic, "account", s.change.Account, s.eventType, s.change)
		if err != nil {
			return nil, fmt.Errorf("event %s: %w", s.eventType, err)
		}
		if err := writeEvent(ctx, db, writer, &e); err != nil {
			return nil, err
		}
		written[e.ID.String()] = true
	}
	return written, nil
}

// loadConfig reads the broker configuration at opts.ConfigPath, with opts.LookupEnv's overrides.
func loadConfig(opts options) (brokerconfig.Config, error) {
	data, err := os.ReadFile(opts.ConfigPath)
	if err != nil {
		return brokerconfig.Config{}, fmt.Errorf("read broker configuration: %w", err)
	}
	lookup := opts.LookupEnv
	if lookup == nil {
		lookup = func(string) (string, bool) { return "", false }
	}
	cfg, err := brokerconfig.Parse(data, lookup)
	if err != nil {
		return brokerconfig.Config{}, fmt.Errorf("broker configuration %s: %w", opts.ConfigPath, err)
	}
	return cfg, nil
}

// names returns the topic and the consumer's group or subscription, with a random suffix when
// unique. On RabbitMQ it also sets cfg's consumer group to it: the publisher declares the
// queues of that group before its first message, so the consumer's queues keep the events
// relayed before it subscribes (queues declared later would miss an account's first events and
// the order check would see its #3 first).
func names(cfg *brokerconfig.Config, unique bool) (topic, group string) {
	topic, group = "accounts", cfg.Kafka.ConsumerGroup
	switch cfg.Broker {
	case brokerconfig.BrokerPulsar:
		group = cfg.Pulsar.SubscriptionName
	case brokerconfig.BrokerNATS:
		group = cfg.NATS.ConsumerGroup
	case brokerconfig.BrokerRabbitMQ:
		group = cfg.RabbitMQ.ConsumerGroup
	}
	if unique {
		suffix := "_" + randomHex(4)
		topic, group = topic+suffix, group+suffix
	}
	if cfg.Broker == brokerconfig.BrokerRabbitMQ {
		cfg.RabbitMQ.ConsumerGroup = group
	}
	return topic, group
}

// openOutbox opens an SQLite database in a new temporary directory, migrates its outbox, and
// returns it, the outbox writer and the function that closes it and removes the directory.
func openOutbox(ctx context.Context) (*sql.DB, *outbox.Writer, func(), error) {
	dir, err := os.MkdirTemp("", "outboxkit-switch-broker-")
	if err != nil {
		return nil, nil, nil, fmt.Errorf("create temporary directory: %w", err)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "outbox.db")+
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		os.RemoveAll(dir)
		return nil, nil, nil, fmt.Errorf("open SQLite: %w", err)
	}
	closeDB := func() {
		db.Close()
		os.RemoveAll(dir)
	}
	writer, err := outbox.NewWriter(outbox.Config{Dialect: outbox.SQLite})
	if err != nil {
		closeDB()
		return nil, nil, nil, fmt.Errorf("outbox writer: %w", err)
	}
	if err := outbox.Migrate(ctx, db, writer.Table()); err != nil {
		closeDB()
		return nil, nil, nil, fmt.Errorf("migrate outbox: %w", err)
	}
	return db, writer, closeDB, nil
}

// newConsumer returns a Watermill Router that hands every event of topic, read as group and
// decoded by decode, to got.
func newConsumer(brokers *brokerconfig.Brokers, topic, group string, decode decodeFunc, got chan<- received) (*message.Router, error) {
	sub, err := brokers.NewSubscriber(group)
	if err != nil {
		return nil, fmt.Errorf("subscriber: %w", err)
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 10 * time.Second}, watermill.NopLogger{})
	if err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	router.AddConsumerHandler("print", topic, sub, func(msg *message.Message) error {
		r := received{
			eventID:   msg.Metadata.Get(outbox.MetadataEventID),
			eventType: msg.Metadata.Get(outbox.MetadataEventType),
			key:       msg.Metadata.Get(outbox.MetadataAggregateID),
		}
		payload, err := decode(msg.Context(), msg.Payload)
		if err != nil {
			return fmt.Errorf("event %s: %w", r.eventID, err)
		}
		if err := json.Unmarshal(payload, &r.change); err != nil {
			return fmt.Errorf("event %s: bad payload %q: %w", r.eventID, msg.Payload, err)
		}
		select {
		case got <- r:
			return nil
		case <-msg.Context().Done():
			return msg.Context().Err() // nacked: redelivered later
		}
	})
	return router, nil
}

// stoppedBy names what stopped with err. A nil err is an error too unless running ended (the
// example stopping it): a Watermill Router returns nil once all its handlers stopped.
func stoppedBy(running context.Context, what string, err error) error {
	if err == nil && running.Err() == nil {
		err = errors.New("returned while the example was running")
	}
	if err != nil {
		return fmt.Errorf("%s stopped: %w", what, err)
	}
	return nil
}

// consumeInOrder reads got until every written event arrived once, checking that each account's
// events arrive in order, and returns each account's event types in arrival order. ctx ending
// first is an error (its cause says why).
func consumeInOrder(ctx context.Context, out io.Writer, got <-chan received, written map[string]bool) (map[string][]string, error) {
	seen := map[string]bool{}
	next := map[string]int{}
	byKey := map[string][]string{}
	for len(seen) < len(written) {
		select {
		case r := <-got:
			if !written[r.eventID] {
				fmt.Fprintf(out, "  ignoring event %s left on the topic by an earlier run\n", r.eventID)
				continue
			}
			if seen[r.eventID] {
				fmt.Fprintf(out, "  duplicate delivery of event %s ignored (at-least-once)\n", r.eventID)
				continue
			}
			seen[r.eventID] = true
			if r.key != r.change.Account {
				return nil, fmt.Errorf("event %s: key %q but account %q", r.eventID, r.key, r.change.Account)
			}
			if want := next[r.key] + 1; r.change.Seq != want {
				return nil, fmt.Errorf("account %s: event #%d arrived when #%d was due: per-key order broken", r.key, r.change.Seq, want)
			}
			next[r.key] = r.change.Seq
			byKey[r.key] = append(byKey[r.key], r.eventType)
			fmt.Fprintf(out, "  received key %s #%d %s (event %s)\n", r.key, r.change.Seq, r.eventType, r.eventID)
		case <-ctx.Done():
			return nil, fmt.Errorf("received %d of %d events: %w", len(seen), len(written), context.Cause(ctx))
		}
	}
	return byKey, nil
}

// writeEvent commits one event in its own transaction (in a real service, with business rows)
// and fills in its id.
func writeEvent(ctx context.Context, db *sql.DB, w *outbox.Writer, e *outbox.Event) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	events := []outbox.Event{*e}
	if err := w.WriteTx(ctx, tx, events...); err != nil {
		return fmt.Errorf("write %s of %s: %w", e.EventType, e.AggregateID, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit %s of %s: %w", e.EventType, e.AggregateID, err)
	}
	*e = events[0]
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
