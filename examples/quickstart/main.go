// Command quickstart shows the transactional outbox end to end in one process, with nothing to
// install: an SQLite database (pure Go, in a temporary directory), an in-process Kafka-protocol
// cluster (franz-go's kfake), outboxkit's forwarder relaying the outbox to it, and a Watermill
// Router consuming the events.
//
//	go run ./examples/quickstart
//
// Three orders are placed. Orders o-1 and o-3 commit together with their OrderPlaced events; the
// transaction of order o-2 is rolled back, so its event never exists and is never published.
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
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
	wkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"
	"golang.org/x/sync/errgroup"
	_ "modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
)

// brokerYAML is the whole broker configuration: the in-process kfake cluster. A real deployment
// says "broker: kafka" (or pulsar) with addresses, and nothing else in this program changes.
const brokerYAML = `
broker: kfake
kafka:
  consumer_group: shipping
`

// topic receives the order events.
const topic = "orders"

// runTimeout bounds the whole demo, so a broken setup fails instead of hanging.
const runTimeout = 60 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, ""); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// order is the business row, and the payload of its OrderPlaced event.
type order struct {
	ID         string `json:"order_id"`
	Customer   string `json:"customer"`
	TotalCents int    `json:"total_cents"`
}

// delivery is one event as the consumer saw it.
type delivery struct {
	eventID, eventType, key, payload string
}

// run executes the demo and writes its story to out. dir holds the SQLite file; "" means a new
// temporary directory, removed at the end.
func run(ctx context.Context, out io.Writer, dir string) error {
	ctx, cancel := context.WithTimeout(ctx, runTimeout)
	defer cancel()
	// Only warnings and errors, on stderr: the story goes to out.
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	db, dbPath, closeDB, err := openDatabase(dir)
	if err != nil {
		return err
	}
	defer closeDB()
	fmt.Fprintln(out, "outboxkit quickstart: SQLite outbox + in-process Kafka (kfake), all in this process")
	fmt.Fprintf(out, "database: %s\n\n", dbPath)

	// 1. Schema: the business table, then the outbox table (and the relay's tables).
	writer, err := migrate(ctx, db)
	if err != nil {
		return err
	}

	// 2. The application: each order and its event in one transaction.
	committed, err := placeOrders(ctx, out, db, writer)
	if err != nil {
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

	// 4. The consumer: a Watermill Router handing every event to this goroutine.
	deliveries := make(chan delivery, 16)
	router, err := newConsumer(brokers, deliveries)
	if err != nil {
		return err
	}

	// 5. The forwarder: relays committed outbox rows to the broker, deletes each after the ack.
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
	group, running := errgroup.WithContext(runCtx)
	group.Go(func() error { return stoppedBy(running, "router", router.Run(running)) })
	group.Go(func() error { return stoppedBy(running, "forwarder", fwd.Run(running)) })
	defer func() {
		stop()
		_ = group.Wait()
	}()
	fmt.Fprintf(out, "forwarder relaying the outbox to topic %q; consumer group %q listening\n", topic, cfg.Kafka.ConsumerGroup)

	// 6. Wait for the consumer to see every committed order.
	seen, err := awaitOrders(running, out, deliveries, committed)
	if err != nil {
		return err
	}

	// 7. The forwarder deletes a row once the broker acknowledged it: wait for an empty outbox.
	if err := waitOutboxEmpty(ctx, db, writer.Table()); err != nil {
		return err
	}
	fmt.Fprintf(out, "outbox is empty: every committed event was relayed and deleted after the broker's ack\n")
	fmt.Fprintf(out, "events consumed for orders %s; none for o-2\n\n", strings.Join(seen, ", "))

	fmt.Fprint(out, `What happened:
  - Each order row and its OrderPlaced event were written in ONE SQLite transaction (outbox.Writer).
  - Order o-2's transaction was rolled back, so its event row never existed: no phantom event.
  - The forwarder claimed the committed events, published them to Kafka (here the in-process kfake
    cluster) keyed by order id, and deleted each row only after the broker acknowledged it.
  - A Watermill Router consumed the topic; each message carries the event id (the dedup key) and type.
Switching to a real Kafka or Pulsar is a configuration change: see examples/switch-broker.
`)
	return nil
}

// openDatabase opens the SQLite file shop.db in dir (a new temporary directory when dir is ""),
// and returns it, its path and the function that closes it and removes the temporary directory.
func openDatabase(dir string) (*sql.DB, string, func(), error) {
	cleanup := func() {}
	if dir == "" {
		tmp, err := os.MkdirTemp("", "outboxkit-quickstart-")
		if err != nil {
			return nil, "", nil, fmt.Errorf("create temporary directory: %w", err)
		}
		cleanup = func() { os.RemoveAll(tmp) }
		dir = tmp
	}
	dbPath := filepath.Join(dir, "shop.db")
	// WAL lets the forwarder read while the application writes; busy_timeout makes a writer wait
	// for the lock instead of failing; _txlock=immediate takes the write lock at BEGIN.
	db, err := sql.Open("sqlite", "file:"+dbPath+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		cleanup()
		return nil, "", nil, fmt.Errorf("open SQLite %s: %w", dbPath, err)
	}
	return db, dbPath, func() { db.Close(); cleanup() }, nil
}

// migrate creates the business table, then the outbox table (and the relay's tables), and
// returns the outbox writer.
func migrate(ctx context.Context, db *sql.DB) (*outbox.Writer, error) {
	if _, err := db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS orders (
		id TEXT PRIMARY KEY, customer TEXT NOT NULL, total_cents INTEGER NOT NULL)`); err != nil {
		return nil, fmt.Errorf("create table orders: %w", err)
	}
	writer, err := outbox.NewWriter(outbox.Config{Dialect: outbox.SQLite})
	if err != nil {
		return nil, fmt.Errorf("outbox writer: %w", err)
	}
	if err := outbox.Migrate(ctx, db, writer.Table()); err != nil {
		return nil, fmt.Errorf("migrate outbox: %w", err)
	}
	return writer, nil
}

// placeOrders places the demo's three orders, o-2's rolled back, and returns the ids committed.
func placeOrders(ctx context.Context, out io.Writer, db *sql.DB, writer *outbox.Writer) (map[string]bool, error) {
	orders := []struct {
		order
		commit bool
	}{
		{order{"o-1", "alice", 4200}, true},
		{order{"o-2", "bob", 1999}, false}, // payment declined: the transaction is rolled back
		{order{"o-3", "carol", 750}, true},
	}
	committed := map[string]bool{}
	for _, o := range orders {
		eventID, err := placeOrder(ctx, db, writer, o.order, o.commit)
		if err != nil {
			return nil, err
		}
		if o.commit {
			committed[o.ID] = true
			fmt.Fprintf(out, "order %s saved with its OrderPlaced event in one transaction (event %s)\n", o.ID, eventID)
			continue
		}
		n, err := countOutboxRows(ctx, db, writer.Table(), o.ID)
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(out, "order %s rolled back: no event (outbox rows for %s: %d)\n", o.ID, o.ID, n)
	}
	pending, err := countOutboxRows(ctx, db, writer.Table(), "")
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "the outbox holds %d pending events\n\n", pending)
	return committed, nil
}

// newConsumer returns a Watermill Router that hands every event of the topic to deliveries.
func newConsumer(brokers *brokerconfig.Brokers, deliveries chan<- delivery) (*message.Router, error) {
	sub, err := brokers.NewSubscriber("")
	if err != nil {
		return nil, fmt.Errorf("subscriber: %w", err)
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 5 * time.Second}, watermill.NopLogger{})
	if err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	router.AddConsumerHandler("print_orders", topic, sub, func(msg *message.Message) error {
		key, _ := wkafka.MessageKeyFromCtx(msg.Context()) // the Kafka record key
		d := delivery{
			eventID:   msg.Metadata.Get(outbox.MetadataEventID),
			eventType: msg.Metadata.Get(outbox.MetadataEventType),
			key:       string(key),
			payload:   string(msg.Payload),
		}
		select {
		case deliveries <- d:
			return nil
		case <-msg.Context().Done():
			return msg.Context().Err() // nacked: redelivered later
		}
	})
	return router, nil
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

// awaitOrders reads deliveries until every committed order was seen, and returns their ids,
// sorted. A duplicate delivery is ignored (delivery is at least once); an event of an order never
// committed is an error, and so is ctx ending first (its cause says why: the demo's timeout, or
// the router or the forwarder stopping).
func awaitOrders(ctx context.Context, out io.Writer, deliveries <-chan delivery, committed map[string]bool) ([]string, error) {
	seen := map[string]bool{}
	for len(seen) < len(committed) {
		select {
		case d := <-deliveries:
			var o order
			if err := json.Unmarshal([]byte(d.payload), &o); err != nil {
				return nil, fmt.Errorf("event %s: payload %q: %w", d.eventID, d.payload, err)
			}
			if !committed[o.ID] {
				return nil, fmt.Errorf("event %s for order %s, which was never committed", d.eventID, o.ID)
			}
			if seen[o.ID] {
				fmt.Fprintf(out, "duplicate delivery of event %s ignored (delivery is at least once)\n", d.eventID)
				continue
			}
			seen[o.ID] = true
			fmt.Fprintf(out, "consumer received: event %s type %s key %s payload %s\n", d.eventID, d.eventType, d.key, d.payload)
		case <-ctx.Done():
			return nil, fmt.Errorf("consumer saw %d of %d orders: %w", len(seen), len(committed), context.Cause(ctx))
		}
	}
	ids := make([]string, 0, len(seen))
	for id := range seen {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids, nil
}

// placeOrder saves o and its OrderPlaced event in one transaction, committed or rolled back as
// asked, and returns the event id.
func placeOrder(ctx context.Context, db *sql.DB, w *outbox.Writer, o order, commit bool) (string, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("order %s: begin: %w", o.ID, err)
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit

	if _, err := tx.ExecContext(ctx, "INSERT INTO orders (id, customer, total_cents) VALUES (?, ?, ?)",
		o.ID, o.Customer, o.TotalCents); err != nil {
		return "", fmt.Errorf("order %s: insert: %w", o.ID, err)
	}
	event, err := outbox.NewJSONEvent(topic, "order", o.ID, "OrderPlaced", o)
	if err != nil {
		return "", fmt.Errorf("order %s: event: %w", o.ID, err)
	}
	events := []outbox.Event{event}
	if err := w.WriteTx(ctx, tx, events...); err != nil { // fills in the event id
		return "", fmt.Errorf("order %s: write event: %w", o.ID, err)
	}
	if !commit {
		if err := tx.Rollback(); err != nil {
			return "", fmt.Errorf("order %s: rollback: %w", o.ID, err)
		}
		return "", nil
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("order %s: commit: %w", o.ID, err)
	}
	return events[0].ID.String(), nil
}

// countOutboxRows counts the outbox rows of one order ("" counts every row).
func countOutboxRows(ctx context.Context, db *sql.DB, t outbox.Table, orderID string) (int, error) {
	q, args := "SELECT COUNT(*) FROM "+t.Events(), []any{}
	if orderID != "" {
		q += " WHERE aggregate_id = ?"
		args = append(args, orderID)
	}
	var n int
	if err := db.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("count outbox rows: %w", err)
	}
	return n, nil
}

// waitOutboxEmpty polls until the forwarder has deleted every row.
func waitOutboxEmpty(ctx context.Context, db *sql.DB, t outbox.Table) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		n, err := countOutboxRows(ctx, db, t, "")
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
