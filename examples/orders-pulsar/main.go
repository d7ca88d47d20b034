// Command orders-pulsar is a small order service on PostgreSQL and Apache Pulsar built with
// outboxkit (examples/orders-kafka is the same service on Kafka):
//
//   - the write side saves each order and its OrderPlaced event in one database/sql transaction
//     (pgx's stdlib driver, outbox.Writer.WriteTx);
//   - the forwarder relays the outbox to Pulsar (the order id is the Pulsar key and ordering key), woken by PostgreSQL LISTEN/NOTIFY as soon as an
//     order commits;
//   - the shipping consumer (a Watermill Router) creates one shipment row per order through the
//     idempotent consumer (middleware.Inbox) on a key_shared subscription, wrapped in
//     middleware.RetryThenPoison;
//   - finally one event is delivered a second time, as happens when a relay crashes after the
//     broker's ack but before deleting the row, and the inbox acknowledges it without a second
//     shipment.
//
// Run it against the project's test services (bash scripts/services.sh) or your own:
//
//	go run ./examples/orders-pulsar -orders 5
//	go run ./examples/orders-pulsar -dsn postgres://... -config my-pulsar.yaml
//
// The broker configuration is config.yaml in this folder (embedded; -config reads another file),
// with OUTBOXKIT_* environment overrides such as OUTBOXKIT_PULSAR_URL. The PostgreSQL DSN comes
// from -dsn, else OUTBOXKIT_TEST_PG_DSN, else the test services' address.
package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"golang.org/x/sync/errgroup"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/middleware"
	"github.com/outboxkit/outboxkit/outbox"
)

//go:embed config.yaml
var defaultConfig []byte

// defaultDSN is the PostgreSQL started by scripts/services.sh.
const defaultDSN = "postgres://outboxkit:outboxkit@127.0.0.1:15432/outboxkit?sslmode=disable"

// options are the command-line settings of one run.
type options struct {
	// Orders is how many orders to place.
	Orders int
	// DSN is the PostgreSQL URL; "" means OUTBOXKIT_TEST_PG_DSN, else defaultDSN.
	DSN string
	// ConfigPath is a broker configuration file; "" means the embedded config.yaml.
	ConfigPath string
	// Unique suffixes every table, topic and consumer group with a random run id and drops the
	// tables at the end, so runs (and tests) never share state.
	Unique bool
	// LookupEnv reads the environment overrides (os.LookupEnv in main).
	LookupEnv func(string) (string, bool)
	// Timeout bounds the whole run.
	Timeout time.Duration
}

func main() {
	opts := options{LookupEnv: os.LookupEnv}
	flag.IntVar(&opts.Orders, "orders", 5, "number of orders to place")
	flag.StringVar(&opts.DSN, "dsn", "", "PostgreSQL URL (default $OUTBOXKIT_TEST_PG_DSN, else "+defaultDSN+")")
	flag.StringVar(&opts.ConfigPath, "config", "", "broker configuration file (default: the embedded config.yaml)")
	flag.BoolVar(&opts.Unique, "unique", false, "use tables, topic and consumer group unique to this run, and drop the tables at the end")
	flag.DurationVar(&opts.Timeout, "timeout", 2*time.Minute, "give up after this long")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, opts); err != nil {
		fmt.Fprintln(os.Stderr, "orders-pulsar:", err)
		os.Exit(1)
	}
}

// order is the business row, and the payload of its OrderPlaced event.
type order struct {
	ID         string `json:"order_id"`
	Customer   string `json:"customer"`
	TotalCents int    `json:"total_cents"`
}

// names are the tables, topic and consumer group of one run.
type names struct {
	orders, shipments, outbox, inbox, topic, poisonTopic, group string
}

func newNames(unique bool, group string) names {
	n := names{"orders", "shipments", outbox.DefaultTable, middleware.DefaultInboxTable, "orders", "orders_poison", group}
	if unique {
		s := "_" + randomHex(4)
		n = names{n.orders + s, n.shipments + s, n.outbox + s, n.inbox + s, n.topic + s, n.poisonTopic + s, n.group + s}
	}
	return n
}

// outcome is what the shipping consumer did with one delivery.
type outcome struct {
	orderID, eventID string
	duplicate        bool
}

// run places the orders, relays their events to the shipping consumer, delivers one again and
// checks that every order was shipped exactly once, telling the story to out.
func run(ctx context.Context, out io.Writer, opts options) error {
	if opts.Orders < 1 {
		return fmt.Errorf("-orders %d: need at least 1", opts.Orders)
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 2 * time.Minute
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = func(string) (string, bool) { return "", false }
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	// Configuration: the broker from YAML + environment, the database from -dsn or the environment.
	cfg, err := loadConfig(opts)
	if err != nil {
		return err
	}
	dsn := databaseDSN(opts)
	n := newNames(opts.Unique, cfg.Pulsar.SubscriptionName)
	fmt.Fprintf(out, "orders-pulsar: %d orders, PostgreSQL outbox %q, broker %s %s, topic %q, subscription %q\n\n",
		opts.Orders, n.outbox, cfg.Broker, cfg.Pulsar.URL, n.topic, n.group)

	// database/sql with pgx's driver, for the application, the forwarder and the inbox alike.
	db, err := sql.Open("pgx", dsn)
	if err != nil {
		return fmt.Errorf("open PostgreSQL: %w", err)
	}
	defer db.Close()
	if err := db.PingContext(ctx); err != nil {
		return fmt.Errorf("connect to PostgreSQL: %w", err)
	}

	writer, inbox, err := setupSchema(ctx, db, n)
	if err != nil {
		return err
	}
	if opts.Unique {
		defer dropTables(db, n, writer.Table())
	}

	brokers, err := brokerconfig.Build(ctx, cfg, watermill.NopLogger{})
	if err != nil {
		return fmt.Errorf("build broker %s: %w", cfg.Broker, err)
	}
	defer brokers.Close()

	// The shipping consumer.
	outcomes := make(chan outcome, 2*opts.Orders+16)
	var firstDelivery sync.Map // order id -> *message.Message, kept to deliver it again
	router, err := newShippingRouter(brokers, inbox, n, outcomes, &firstDelivery)
	if err != nil {
		return err
	}

	// The consumer and the forwarder (woken by LISTEN/NOTIFY on every committed outbox insert).
	running, stop, err := startRelay(ctx, db, dsn, writer.Table(), brokers, router, logger)
	if err != nil {
		return err
	}
	defer stop()

	// The application places the orders, each with its event in one transaction.
	ids, err := placeOrders(ctx, out, db, writer, n, opts.Orders)
	if err != nil {
		return err
	}

	// Every order is shipped exactly once, also when its event is delivered again.
	w := watcher{out: out, outcomes: outcomes, placed: map[string]bool{}}
	for _, id := range ids {
		w.placed[id] = true
	}
	if err := w.shipAll(running); err != nil {
		return err
	}
	if err := redeliver(running, out, brokers, n, w, &firstDelivery, ids[0]); err != nil {
		return err
	}
	return reportShipments(ctx, out, db, n, ids, inbox)
}

// startRelay runs the consumer's router and a forwarder of table until stop, or until one of them
// fails: that cancels running, and its error is running's cause.
func startRelay(ctx context.Context, db *sql.DB, dsn string, table outbox.Table, brokers *brokerconfig.Brokers,
	router *message.Router, logger *slog.Logger) (running context.Context, stop func(), err error) {
	runCtx, cancel := context.WithCancel(ctx)
	group, running := errgroup.WithContext(runCtx)
	stop = func() {
		cancel()
		_ = group.Wait()
	}
	fwd, err := forwarder.New(forwarder.Config{
		DB: db, Dialect: outbox.Postgres, Table: table.Events(), Publisher: brokers.Publisher(),
		Wakeups: forwarder.ListenPostgres(running, dsn, table, logger),
		Logger:  logger,
	})
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("forwarder: %w", err)
	}
	group.Go(func() error { return stoppedBy(running, "consumer", router.Run(running)) })
	group.Go(func() error { return stoppedBy(running, "forwarder", fwd.Run(running)) })
	return running, stop, nil
}

// databaseDSN is -dsn, else $OUTBOXKIT_TEST_PG_DSN, else the test services' database.
func databaseDSN(opts options) string {
	if opts.DSN != "" {
		return opts.DSN
	}
	if v, ok := opts.LookupEnv("OUTBOXKIT_TEST_PG_DSN"); ok && v != "" {
		return v
	}
	return defaultDSN
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

// placeOrders places count orders, each with its OrderPlaced event in one database/sql
// transaction, and returns their ids, unique to this run.
func placeOrders(ctx context.Context, out io.Writer, db *sql.DB, writer *outbox.Writer, n names, count int) ([]string, error) {
	runID := randomHex(3)
	var ids []string
	for i := 1; i <= count; i++ {
		o := order{ID: fmt.Sprintf("o-%s-%d", runID, i), Customer: fmt.Sprintf("customer-%d", i), TotalCents: 1000 + 250*i}
		eventID, err := placeOrder(ctx, db, writer, n, o)
		if err != nil {
			return nil, err
		}
		ids = append(ids, o.ID)
		fmt.Fprintf(out, "placed order %s and its OrderPlaced event %s in one database/sql transaction\n", o.ID, eventID)
	}
	return ids, nil
}

// watcher reads the shipping consumer's outcomes of this run's orders (placed) and tells them.
type watcher struct {
	out      io.Writer
	outcomes <-chan outcome
	placed   map[string]bool
}

// await tells each outcome until one that want accepts, and returns it; ctx ending first is an
// error naming what was awaited (ctx's cause says why).
func (w watcher) await(ctx context.Context, want func(outcome) bool, what string) (outcome, error) {
	for {
		select {
		case oc := <-w.outcomes:
			if !w.placed[oc.orderID] {
				continue // an event of an earlier run left in a shared table or topic
			}
			if oc.duplicate {
				fmt.Fprintf(w.out, "shipping: event %s of order %s already processed: acknowledged, no second shipment\n", oc.eventID, oc.orderID)
			} else {
				fmt.Fprintf(w.out, "shipping: order %s shipped (event %s)\n", oc.orderID, oc.eventID)
			}
			if want(oc) {
				return oc, nil
			}
		case <-ctx.Done():
			return outcome{}, fmt.Errorf("waiting for %s: %w", what, context.Cause(ctx))
		}
	}
}

// shipAll waits until every placed order was shipped.
func (w watcher) shipAll(ctx context.Context) error {
	shipped := map[string]bool{}
	for len(shipped) < len(w.placed) {
		oc, err := w.await(ctx, func(oc outcome) bool { return !oc.duplicate }, "the shipments")
		if err != nil {
			return err
		}
		shipped[oc.orderID] = true
	}
	fmt.Fprintf(w.out, "all %d orders shipped\n\n", len(w.placed))
	return nil
}

// redeliver publishes the first delivery of order id again (same event id, key and payload) and
// waits until the consumer has seen it.
func redeliver(ctx context.Context, out io.Writer, brokers *brokerconfig.Brokers, n names, w watcher, firstDelivery *sync.Map, id string) error {
	first, ok := firstDelivery.Load(id)
	if !ok {
		return fmt.Errorf("no delivery of order %s was recorded", id)
	}
	again := first.(*message.Message)
	againID := again.Metadata.Get(outbox.MetadataEventID)
	fmt.Fprintf(out, "redelivering event %s of order %s, as a relay that crashed after the broker's ack but before deleting the row would\n",
		againID, id)
	if err := brokers.Publisher().Publish(n.topic, again.Copy()); err != nil {
		return fmt.Errorf("publish the redelivery: %w", err)
	}
	_, err := w.await(ctx, func(oc outcome) bool { return oc.eventID == againID }, "the redelivery")
	return err
}

// reportShipments reads the shipments per order back from the database, and fails unless every
// order has exactly one.
func reportShipments(ctx context.Context, out io.Writer, db *sql.DB, n names, ids []string, inbox *middleware.Inbox) error {
	var counts []string
	exactlyOnce := true
	sort.Strings(ids)
	for _, id := range ids {
		c, err := countShipments(ctx, db, n, id)
		if err != nil {
			return err
		}
		exactlyOnce = exactlyOnce && c == 1
		counts = append(counts, fmt.Sprintf("%s=%d", id, c))
	}
	fmt.Fprintf(out, "\nshipments per order: %s\n", strings.Join(counts, " "))
	stats := inbox.Stats()
	fmt.Fprintf(out, "inbox: %d events processed, %d duplicates ignored\n", stats.Processed, stats.Duplicates)
	if !exactlyOnce {
		return errors.New("some order does not have exactly one shipment")
	}
	fmt.Fprintln(out, "exactly one shipment per order, despite the redelivery")
	return nil
}

// loadConfig reads the broker configuration: the file at opts.ConfigPath, or the embedded
// config.yaml, with the OUTBOXKIT_* environment overrides.
func loadConfig(opts options) (brokerconfig.Config, error) {
	data, source := defaultConfig, "embedded config.yaml"
	if opts.ConfigPath != "" {
		b, err := os.ReadFile(opts.ConfigPath)
		if err != nil {
			return brokerconfig.Config{}, fmt.Errorf("read broker configuration: %w", err)
		}
		data, source = b, opts.ConfigPath
	}
	cfg, err := brokerconfig.Parse(data, opts.LookupEnv)
	if err != nil {
		return brokerconfig.Config{}, fmt.Errorf("broker configuration %s: %w", source, err)
	}
	return cfg, nil
}

// setupSchema creates the business tables, the outbox and the inbox (all idempotent).
func setupSchema(ctx context.Context, db *sql.DB, n names) (*outbox.Writer, *middleware.Inbox, error) {
	for _, ddl := range []string{
		"CREATE TABLE IF NOT EXISTS " + n.orders + ` (
			id TEXT PRIMARY KEY, customer TEXT NOT NULL, total_cents INTEGER NOT NULL,
			created_at TIMESTAMPTZ NOT NULL DEFAULT now())`,
		// Deliberately no UNIQUE (order_id): the inbox, not a constraint, keeps the effect single.
		"CREATE TABLE IF NOT EXISTS " + n.shipments + ` (
			id BIGSERIAL PRIMARY KEY, order_id TEXT NOT NULL, event_id TEXT NOT NULL,
			created_at TIMESTAMPTZ NOT NULL DEFAULT now())`,
	} {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			return nil, nil, fmt.Errorf("create business tables: %w", err)
		}
	}
	writer, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: n.outbox})
	if err != nil {
		return nil, nil, fmt.Errorf("outbox writer: %w", err)
	}
	if err := outbox.Migrate(ctx, db, writer.Table()); err != nil {
		return nil, nil, fmt.Errorf("migrate outbox %s: %w", n.outbox, err)
	}
	inbox, err := middleware.NewInbox(middleware.InboxConfig{
		DB: db, Dialect: middleware.DialectPostgres, Table: n.inbox, ConsumerName: "shipping",
	}, watermill.NopLogger{})
	if err != nil {
		return nil, nil, fmt.Errorf("inbox: %w", err)
	}
	if err := inbox.Migrate(ctx); err != nil {
		return nil, nil, fmt.Errorf("migrate inbox %s: %w", n.inbox, err)
	}
	return writer, inbox, nil
}

// dropTables removes the tables of a -unique run.
func dropTables(db *sql.DB, n names, t outbox.Table) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, name := range []string{n.orders, n.shipments, n.inbox, t.Events(), t.Leases(), t.Relays(), t.Migrations()} {
		_, _ = db.ExecContext(ctx, "DROP TABLE IF EXISTS "+name)
	}
	// The notification function the outbox migration installed for the table.
	_, _ = db.ExecContext(ctx, "DROP FUNCTION IF EXISTS "+t.Events()+"_notify()")
}

// placeOrder saves o and its OrderPlaced event in one database/sql transaction.
func placeOrder(ctx context.Context, db *sql.DB, w *outbox.Writer, n names, o order) (string, error) {
	event, err := outbox.NewJSONEvent(n.topic, "order", o.ID, "OrderPlaced", o)
	if err != nil {
		return "", fmt.Errorf("order %s: event: %w", o.ID, err)
	}
	events := []outbox.Event{event}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("order %s: begin: %w", o.ID, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	if _, err := tx.ExecContext(ctx, "INSERT INTO "+n.orders+" (id, customer, total_cents) VALUES ($1, $2, $3)",
		o.ID, o.Customer, o.TotalCents); err != nil {
		return "", fmt.Errorf("order %s: insert: %w", o.ID, err)
	}
	if err := w.WriteTx(ctx, tx, events...); err != nil { // fills in the event id
		return "", fmt.Errorf("order %s: write event: %w", o.ID, err)
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("order %s: commit: %w", o.ID, err)
	}
	return events[0].ID.String(), nil
}

// newShippingRouter builds the consumer: RetryThenPoison around the inbox around the handler
// that creates a shipment. Each delivery's outcome goes to outcomes; the first delivery of each
// order is kept in firstDelivery.
func newShippingRouter(brokers *brokerconfig.Brokers, inbox *middleware.Inbox, n names,
	outcomes chan<- outcome, firstDelivery *sync.Map) (*message.Router, error) {
	sub, err := brokers.NewSubscriber(n.group)
	if err != nil {
		return nil, fmt.Errorf("subscriber: %w", err)
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 10 * time.Second}, watermill.NopLogger{})
	if err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	retry, err := middleware.RetryThenPoison(middleware.RetryPoisonConfig{
		Publisher: brokers.Publisher(), PoisonTopic: n.poisonTopic, MaxRetries: 3,
	})
	if err != nil {
		return nil, fmt.Errorf("retry middleware: %w", err)
	}
	router.AddMiddleware(retry)

	var shippedNow sync.Map // deliveries (*message.Message) whose handler ran, i.e. not duplicates
	ship := inbox.ConsumerHandler(func(ctx context.Context, tx *sql.Tx, msg *message.Message) error {
		var o order
		if err := json.Unmarshal(msg.Payload, &o); err != nil || o.ID == "" {
			return middleware.Permanent(fmt.Errorf("event %s: bad payload %q: %v", msg.UUID, msg.Payload, err))
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO "+n.shipments+" (order_id, event_id) VALUES ($1, $2)",
			o.ID, msg.Metadata.Get(outbox.MetadataEventID)); err != nil {
			return fmt.Errorf("order %s: insert shipment: %w", o.ID, err)
		}
		shippedNow.Store(msg, true)
		return nil
	})
	router.AddConsumerHandler("shipping", n.topic, sub, func(msg *message.Message) error {
		if err := ship(msg); err != nil {
			shippedNow.Delete(msg)
			return err
		}
		_, handled := shippedNow.LoadAndDelete(msg)
		oc := outcome{orderID: msg.Metadata.Get(outbox.MetadataAggregateID), eventID: msg.Metadata.Get(outbox.MetadataEventID), duplicate: !handled}
		if handled {
			firstDelivery.LoadOrStore(oc.orderID, msg.Copy())
		}
		select {
		case outcomes <- oc:
		default: // nobody is waiting for this outcome (an older run's event): drop it
		}
		return nil
	})
	return router, nil
}

func countShipments(ctx context.Context, db *sql.DB, n names, orderID string) (int, error) {
	var c int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+n.shipments+" WHERE order_id = $1", orderID).Scan(&c); err != nil {
		return 0, fmt.Errorf("count shipments of %s: %w", orderID, err)
	}
	return c, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
