// Command cqrs shows Watermill's CQRS components on top of the transactional outbox, in one
// process with nothing to install: the application publishes typed events through a
// *cqrs.EventBus built by outboxkit's eventbus package, which writes them into an SQLite outbox
// inside the order's own transaction; outboxkit's forwarder relays them to an in-process
// Kafka-protocol cluster (franz-go's kfake); a cqrs.EventGroupProcessor hands them, typed, to the
// handlers of a read model.
//
//	go run ./examples/cqrs
//
// Order o-1 is placed and paid: one transaction writes the order row, OrderPlaced and OrderPaid.
// Order o-2's payment is declined and its transaction rolled back, so its two events never
// exist. Order o-3 is placed and not yet paid. All order events share the topic "orders" and are
// keyed by order id, so the read model sees each order's events in commit order.
package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/components/cqrs"
	"github.com/ThreeDotsLabs/watermill/message"
	"golang.org/x/sync/errgroup"
	_ "modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
	"github.com/outboxkit/outboxkit/outbox/eventbus"
)

// brokerYAML is the broker configuration: the in-process kfake cluster. "broker: kafka" (or
// pulsar) with addresses is the only change a real deployment needs.
const brokerYAML = `
broker: kfake
kafka:
  consumer_group: read-model
`

// topic receives every order event: one topic per aggregate keeps an order's events in order.
const topic = "orders"

// runTimeout bounds the whole demo, so a broken setup fails instead of hanging.
const runTimeout = 60 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, ""); err != nil {
		fmt.Fprintln(os.Stderr, "cqrs:", err)
		os.Exit(1)
	}
}

// OrderPlaced is published when an order is saved.
type OrderPlaced struct {
	OrderID    string `json:"order_id"`
	Customer   string `json:"customer"`
	TotalCents int    `json:"total_cents"`
}

// AggregateID makes OrderPlaced an eventbus.Event: the order id is the ordering key.
func (e OrderPlaced) AggregateID() string { return e.OrderID }

// AggregateType names the aggregate.
func (e OrderPlaced) AggregateType() string { return "order" }

// OrderPaid is published when an order's payment is captured.
type OrderPaid struct {
	OrderID   string `json:"order_id"`
	PaymentID string `json:"payment_id"`
}

// AggregateID makes OrderPaid an eventbus.Event.
func (e OrderPaid) AggregateID() string { return e.OrderID }

// AggregateType names the aggregate.
func (e OrderPaid) AggregateType() string { return "order" }

// run executes the demo and writes its story to out. dir holds the SQLite file; "" means a new
// temporary directory, removed at the end.
func run(ctx context.Context, out io.Writer, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	db, closeDB, err := openDatabase(dir)
	if err != nil {
		return err
	}
	defer closeDB()
	fmt.Fprintln(out, "outboxkit + Watermill CQRS: typed events through the outbox (SQLite) to in-process Kafka (kfake)")

	// 1. Schema, outbox writer, and the event bus on top of it. The marshaler encodes the events
	// on both sides: the bus and the consumer's processor.
	marshaler := cqrs.JSONMarshaler{GenerateName: cqrs.StructName}
	writer, bus, err := setup(ctx, db, marshaler)
	if err != nil {
		return err
	}

	// 2. The application: each order's row and events in one transaction.
	if err := placeOrders(ctx, out, db, bus, writer.Table()); err != nil {
		return err
	}

	// 3. The broker, from configuration.
	cfg, err := brokerconfig.Parse([]byte(brokerYAML), nil)
	if err != nil {
		return fmt.Errorf("broker configuration: %w", err)
	}
	brokers, err := brokerconfig.Build(ctx, cfg, watermill.NopLogger{})
	if err != nil {
		return fmt.Errorf("build broker %s: %w", cfg.Broker, err)
	}
	defer brokers.Close()

	// 4. The consumer: a read model fed by a cqrs.EventGroupProcessor (one subscriber for the
	// topic, one typed handler per event).
	received := make(chan string, 16)
	router, err := newReadModel(brokers, marshaler, received)
	if err != nil {
		return err
	}

	// 5. The forwarder relays committed outbox rows and deletes each after the broker's ack.
	fwd, err := forwarder.New(forwarder.Config{
		DB: db, Dialect: outbox.SQLite, Table: writer.Table().Events(), Publisher: brokers.Publisher(),
		MaxPollInterval: 100 * time.Millisecond, // SQLite has no LISTEN/NOTIFY: poll often
		Logger:          logger,
	})
	if err != nil {
		return fmt.Errorf("forwarder: %w", err)
	}
	// Both run until the demo ends, or until one of them fails: that cancels running, and its
	// error is running's cause.
	runCtx, stop := context.WithCancel(ctx)
	relay, running := errgroup.WithContext(runCtx)
	relay.Go(func() error { return stoppedBy(running, "router", router.Run(running)) })
	relay.Go(func() error { return stoppedBy(running, "forwarder", fwd.Run(running)) })
	defer func() {
		stop()
		_ = relay.Wait()
	}()
	fmt.Fprintf(out, "forwarder relaying to topic %q; read model consuming as group %q\n", topic, cfg.Kafka.ConsumerGroup)

	// 6. Wait for the three committed events (delivery is at least once: duplicates are named).
	n, err := awaitEvents(running, out, received, 3)
	if err != nil {
		return err
	}
	if err := waitOutboxEmpty(ctx, db, writer.Table()); err != nil {
		return err
	}
	fmt.Fprintf(out, "\noutbox is empty: the read model received %d events, none of order o-2\n\n", n)
	fmt.Fprint(out, `What happened:
  - eventbus.New built a Watermill *cqrs.EventBus whose Publish writes into the outbox, in the
    transaction carried by the context (eventbus.WithTx): the events commit or roll back with the order.
  - Order o-2's transaction was rolled back, so its OrderPlaced and OrderPaid never existed.
  - The forwarder published the committed events to Kafka (here kfake), keyed by order id.
  - A cqrs.EventGroupProcessor decoded each message by its cqrs name into *OrderPlaced or *OrderPaid
    and called the typed handler; o-1's events arrived in the order they were written.
`)
	return nil
}

// openDatabase opens the SQLite file shop.db in dir (a new temporary directory when dir is ""),
// and returns it and the function that closes it and removes the temporary directory.
func openDatabase(dir string) (*sql.DB, func(), error) {
	cleanup := func() {}
	if dir == "" {
		tmp, err := os.MkdirTemp("", "outboxkit-cqrs-")
		if err != nil {
			return nil, nil, fmt.Errorf("create temporary directory: %w", err)
		}
		cleanup = func() { os.RemoveAll(tmp) }
		dir = tmp
	}
	dbPath := filepath.Join(dir, "shop.db")
	db, err := sql.Open("sqlite", "file:"+dbPath+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("open SQLite %s: %w", dbPath, err)
	}
	return db, func() { db.Close(); cleanup() }, nil
}

// setup creates the orders table and the outbox, and returns the outbox writer and the event bus
// that writes into it.
func setup(ctx context.Context, db *sql.DB, marshaler cqrs.CommandEventMarshaler) (*outbox.Writer, *cqrs.EventBus, error) {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS orders (
		id TEXT PRIMARY KEY, customer TEXT NOT NULL, total_cents INTEGER NOT NULL, paid INTEGER NOT NULL DEFAULT 0)`); err != nil {
		return nil, nil, fmt.Errorf("create table orders: %w", err)
	}
	writer, err := outbox.NewWriter(outbox.Config{Dialect: outbox.SQLite})
	if err != nil {
		return nil, nil, fmt.Errorf("outbox writer: %w", err)
	}
	if err := outbox.Migrate(ctx, db, writer.Table()); err != nil {
		return nil, nil, fmt.Errorf("migrate outbox: %w", err)
	}
	bus, err := eventbus.New(eventbus.Config{
		Writer:    writer,
		Marshaler: marshaler,
		GeneratePublishTopic: func(cqrs.GenerateEventPublishTopicParams) (string, error) {
			return topic, nil
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("event bus: %w", err)
	}
	return writer, bus, nil
}

// placeOrders places the demo's three orders through bus, o-2's rolled back, and tells how many
// events the outbox holds then.
func placeOrders(ctx context.Context, out io.Writer, db *sql.DB, bus *cqrs.EventBus, table outbox.Table) error {
	for _, o := range []struct {
		placed OrderPlaced
		pay    bool // capture the payment in the same transaction
		commit bool
	}{
		{OrderPlaced{"o-1", "alice", 4200}, true, true},
		{OrderPlaced{"o-2", "bob", 1999}, true, false}, // payment declined: rolled back
		{OrderPlaced{"o-3", "carol", 750}, false, true},
	} {
		if err := placeOrder(ctx, db, bus, o.placed, o.pay, o.commit); err != nil {
			return err
		}
		switch {
		case !o.commit:
			fmt.Fprintf(out, "order %s: payment declined, transaction rolled back: no event\n", o.placed.OrderID)
		case o.pay:
			fmt.Fprintf(out, "order %s: saved with OrderPlaced and OrderPaid in one transaction\n", o.placed.OrderID)
		default:
			fmt.Fprintf(out, "order %s: saved with OrderPlaced\n", o.placed.OrderID)
		}
	}
	pending, err := countRows(ctx, db, table)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "the outbox holds %d pending events\n\n", pending)
	return nil
}

// stoppedBy names what stopped with err. A nil err is an error too unless running ended (the
// demo stopping it): a Watermill Router returns nil once all its handlers stopped.
func stoppedBy(running context.Context, what string, err error) error {
	if err == nil && running.Err() == nil {
		err = errors.New("returned while the demo was running")
	}
	if err != nil {
		return fmt.Errorf("%s stopped: %w", what, err)
	}
	return nil
}

// awaitEvents tells the read model's lines until want distinct ones arrived, and returns how many
// did. A duplicate is named and skipped; an event of the rolled-back order o-2 is an error, and so
// is ctx ending first (its cause says why).
func awaitEvents(ctx context.Context, out io.Writer, received <-chan string, want int) (int, error) {
	seen := map[string]bool{}
	for len(seen) < want {
		select {
		case line := <-received:
			if strings.Contains(line, "order o-2 ") {
				return 0, fmt.Errorf("an event of the rolled-back order o-2 arrived: %s", line)
			}
			if seen[line] {
				fmt.Fprintf(out, "duplicate delivery ignored: %s\n", line)
				continue
			}
			seen[line] = true
			fmt.Fprintln(out, line)
		case <-ctx.Done():
			return 0, fmt.Errorf("read model received %d of %d events: %w", len(seen), want, context.Cause(ctx))
		}
	}
	return len(seen), nil
}

// placeOrder saves the order, publishes OrderPlaced (and OrderPaid when pay is set) through the
// bus in the same transaction, and commits or rolls back as asked.
func placeOrder(ctx context.Context, db *sql.DB, bus *cqrs.EventBus, o OrderPlaced, pay, commit bool) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("order %s: begin: %w", o.OrderID, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit

	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, customer, total_cents, paid) VALUES (?, ?, ?, ?)",
		o.OrderID, o.Customer, o.TotalCents, pay); err != nil {
		return fmt.Errorf("order %s: insert: %w", o.OrderID, err)
	}
	txCtx := eventbus.WithTx(ctx, tx)
	if err := bus.Publish(txCtx, o); err != nil {
		return fmt.Errorf("order %s: %w", o.OrderID, err)
	}
	if pay {
		if err := bus.Publish(txCtx, OrderPaid{OrderID: o.OrderID, PaymentID: "pay-" + o.OrderID}); err != nil {
			return fmt.Errorf("order %s: %w", o.OrderID, err)
		}
	}
	if !commit {
		if err := tx.Rollback(); err != nil {
			return fmt.Errorf("order %s: rollback: %w", o.OrderID, err)
		}
		return nil
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("order %s: commit: %w", o.OrderID, err)
	}
	return nil
}

// newReadModel returns a Router whose cqrs.EventGroupProcessor reads the topic in the
// configured consumer group and reports each typed event on received.
func newReadModel(brokers *brokerconfig.Brokers, marshaler cqrs.CommandEventMarshaler, received chan<- string) (*message.Router, error) {
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 5 * time.Second}, watermill.NopLogger{})
	if err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	processor, err := cqrs.NewEventGroupProcessorWithConfig(router, cqrs.EventGroupProcessorConfig{
		GenerateSubscribeTopic: func(cqrs.EventGroupProcessorGenerateSubscribeTopicParams) (string, error) {
			return topic, nil
		},
		SubscriberConstructor: func(cqrs.EventGroupProcessorSubscriberConstructorParams) (message.Subscriber, error) {
			return brokers.NewSubscriber("") // the configured consumer group
		},
		Marshaler: marshaler,
	})
	if err != nil {
		return nil, fmt.Errorf("event processor: %w", err)
	}
	send := func(ctx context.Context, line string) error {
		select {
		case received <- line:
			return nil
		case <-ctx.Done():
			return ctx.Err() // nacked: redelivered later
		}
	}
	err = processor.AddHandlersGroup("read_model",
		cqrs.NewGroupEventHandler(func(ctx context.Context, e *OrderPlaced) error {
			return send(ctx, fmt.Sprintf("read model: order %s placed by %s, %d.%02d", e.OrderID, e.Customer, e.TotalCents/100, e.TotalCents%100))
		}),
		cqrs.NewGroupEventHandler(func(ctx context.Context, e *OrderPaid) error {
			return send(ctx, fmt.Sprintf("read model: order %s paid (%s)", e.OrderID, e.PaymentID))
		}),
	)
	if err != nil {
		return nil, fmt.Errorf("event handlers: %w", err)
	}
	return router, nil
}

// countRows counts the outbox rows.
func countRows(ctx context.Context, db *sql.DB, t outbox.Table) (int, error) {
	var n int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+t.Events()).Scan(&n); err != nil {
		return 0, fmt.Errorf("count outbox rows: %w", err)
	}
	return n, nil
}

// waitOutboxEmpty polls until the forwarder has deleted every row.
func waitOutboxEmpty(ctx context.Context, db *sql.DB, t outbox.Table) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		n, err := countRows(ctx, db, t)
		if err != nil {
			return err
		}
		if n == 0 {
			return nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return errors.Join(fmt.Errorf("%d rows still in the outbox", n), ctx.Err())
		}
	}
}
