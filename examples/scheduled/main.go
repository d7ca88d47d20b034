// Command scheduled shows scheduled events ("cancel the order if it is unpaid in 30 minutes")
// end to end in one process, with nothing to install: an SQLite database in a temporary
// directory, an in-process Kafka-protocol cluster (franz-go's kfake), outboxkit's forwarder and a
// Watermill Router (docs/scheduled.md).
//
//	go run ./examples/scheduled              # the deadline is 2 s, not 30 minutes
//	go run ./examples/scheduled -deadline 5s
//
// Two orders are placed; each is saved with its OrderPlaced event and a PaymentDeadline event
// scheduled for the deadline, in one transaction. Order o-2 is paid before the deadline: the
// payment and the cancel of its PaymentDeadline commit together. The relay publishes the
// OrderPlaced events at once, o-1's PaymentDeadline at its time (the consumer then cancels the
// unpaid order), and o-2's never.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"golang.org/x/sync/errgroup"
	_ "modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/outbox"
)

// brokerYAML is the whole broker configuration: the in-process kfake cluster.
const brokerYAML = `
broker: kfake
kafka:
  consumer_group: billing
`

// topic receives the order events.
const topic = "orders"

func main() {
	deadline := flag.Duration("deadline", 2*time.Second, "how long an order may stay unpaid (30m in a real shop)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, "", *deadline); err != nil {
		fmt.Fprintln(os.Stderr, "scheduled:", err)
		os.Exit(1)
	}
}

// run executes the demo and writes its story to out. dir holds the SQLite file ("" means a new
// temporary directory, removed at the end); deadline is how long an order may stay unpaid.
func run(ctx context.Context, out io.Writer, dir string, deadline time.Duration) error {
	if deadline <= 0 || deadline > 10*time.Minute {
		return fmt.Errorf("deadline %s: want more than 0 and at most 10m for a demo", deadline)
	}
	ctx, cancel := context.WithTimeout(ctx, deadline+60*time.Second)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	db, closeDB, err := openDatabase(dir)
	if err != nil {
		return err
	}
	defer closeDB()
	s, err := newShop(ctx, db)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "outboxkit scheduled events: SQLite outbox + in-process Kafka (kfake); payment deadline %s\n\n", deadline)

	// 1. Two orders, each with its OrderPlaced event and its PaymentDeadline, in one transaction.
	start := time.Now()
	placed := map[string]placedOrder{}
	for _, id := range []string{"o-1", "o-2"} {
		p, err := s.place(ctx, id, start.Add(deadline))
		if err != nil {
			return err
		}
		placed[id] = p
		fmt.Fprintf(out, "order %s placed (unpaid) with OrderPlaced %s and PaymentDeadline %s due at +%s, in one transaction\n",
			id, p.placedEvent, p.deadlineEvent, p.dueAt.Sub(start).Round(time.Millisecond))
	}

	// 2. o-2 is paid: the payment and the cancel of its deadline commit together.
	res, err := s.pay(ctx, "o-2", placed["o-2"].deadlineEvent)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "order o-2 paid; its PaymentDeadline cancelled in the same transaction (cancelled %d, released %d, not found %d)\n",
		len(res.Changed), len(res.Released), len(res.NotFound))

	// 3. What is scheduled now (the same list as `outboxkit scheduled list`).
	if err := printScheduled(ctx, out, db, s.writer.Table(), start); err != nil {
		return err
	}

	// 4. The broker, the consumer and the relay.
	cfg, err := brokerconfig.Parse([]byte(brokerYAML), nil)
	if err != nil {
		return fmt.Errorf("broker configuration: %w", err)
	}
	brokers, err := brokerconfig.Build(ctx, cfg, watermill.NopLogger{})
	if err != nil {
		return fmt.Errorf("build broker %s: %w", cfg.Broker, err)
	}
	defer brokers.Close()
	deliveries := make(chan delivery, 16)
	router, err := newConsumer(brokers, s, deliveries)
	if err != nil {
		return err
	}
	fwd, err := forwarder.New(forwarder.Config{
		DB: db, Dialect: outbox.SQLite, Table: s.writer.Table().Events(), Publisher: brokers.Publisher(),
		MaxPollInterval: 100 * time.Millisecond, // SQLite has no LISTEN/NOTIFY: poll often
		Logger:          logger,
	})
	if err != nil {
		return fmt.Errorf("forwarder: %w", err)
	}
	runCtx, stop := context.WithCancel(ctx)
	group, running := errgroup.WithContext(runCtx)
	group.Go(func() error { return stoppedBy(running, "router", router.Run(running)) })
	group.Go(func() error { return stoppedBy(running, "forwarder", fwd.Run(running)) })
	defer func() {
		stop()
		_ = group.Wait()
	}()
	fmt.Fprintf(out, "\nforwarder relaying the outbox to topic %q; consumer group %q listening\n", topic, cfg.Kafka.ConsumerGroup)

	// 5. Both OrderPlaced events at once, o-1's PaymentDeadline at its time, o-2's never.
	if err := awaitEvents(running, out, deliveries, placed, start); err != nil {
		return err
	}
	if err := waitOutboxEmpty(ctx, db, s.writer.Table()); err != nil {
		return err
	}
	if err := checkNoMore(out, deliveries, placed); err != nil {
		return err
	}
	statuses, err := s.statuses(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "outbox is empty; orders: %s\n\n", statuses)
	fmt.Fprint(out, `What happened:
  - Each order, its OrderPlaced event and its PaymentDeadline (outbox.Event.DeliverAt) were written
    in ONE transaction: no second scheduler, no dual write.
  - Paying o-2 and cancelling its deadline (outbox.Writer.Cancel) committed together: had the
    payment rolled back, the deadline would have stayed scheduled.
  - The relay published the OrderPlaced events at once and o-1's PaymentDeadline at (never before)
    its time; the consumer cancelled the unpaid order. o-2's deadline was never published.
`)
	return nil
}

// openDatabase opens the SQLite file shop.db in dir (a new temporary directory when dir is ""),
// and returns it and the function that closes it and removes the temporary directory.
func openDatabase(dir string) (*sql.DB, func(), error) {
	cleanup := func() {}
	if dir == "" {
		tmp, err := os.MkdirTemp("", "outboxkit-scheduled-")
		if err != nil {
			return nil, nil, fmt.Errorf("create temporary directory: %w", err)
		}
		cleanup = func() { os.RemoveAll(tmp) }
		dir = tmp
	}
	dbPath := filepath.Join(dir, "shop.db")
	// As in the quickstart: WAL so the relay reads while the shop writes, a busy timeout, and the
	// write lock taken at BEGIN.
	db, err := sql.Open("sqlite", "file:"+dbPath+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("open SQLite %s: %w", dbPath, err)
	}
	return db, func() { db.Close(); cleanup() }, nil
}

// printScheduled prints the scheduled events, next due first, with admin.ScheduledEvents.
func printScheduled(ctx context.Context, out io.Writer, db *sql.DB, table outbox.Table, start time.Time) error {
	a, err := admin.New(db, outbox.SQLite, table.Events())
	if err != nil {
		return fmt.Errorf("admin: %w", err)
	}
	events, err := a.ScheduledEvents(ctx, 10)
	if err != nil {
		return fmt.Errorf("list scheduled events: %w", err)
	}
	fmt.Fprintf(out, "scheduled now (outboxkit scheduled list): %d\n", len(events))
	for _, e := range events {
		fmt.Fprintf(out, "  %s %s key %s due at +%s\n", e.EventID, e.EventType, e.AggregateID, e.DeliverAt.Sub(start).Round(time.Millisecond))
	}
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

// waitOutboxEmpty polls until the forwarder has deleted every row.
func waitOutboxEmpty(ctx context.Context, db *sql.DB, t outbox.Table) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+t.Events()).Scan(&n); err != nil {
			return fmt.Errorf("count outbox rows: %w", err)
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
