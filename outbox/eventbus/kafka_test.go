package eventbus_test

// End to end through the real services: PostgreSQL, outboxkit's forwarder, the real Kafka, and a
// Watermill cqrs.EventProcessor on outboxkit's Kafka subscriber.

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/components/cqrs"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
	"github.com/outboxkit/outboxkit/outbox/eventbus"
)

// deliveryTimeout bounds the wait for the relayed events: generous, since consumer groups take a
// few seconds to join on a loaded 2-core machine.
const deliveryTimeout = 2 * time.Minute

// delivery is one event as a cqrs handler received it.
type delivery struct {
	handler             string
	event               any
	eventID, eventType  string
	aggregateID, key    string
	nameHeader, msgUUID string
}

// TestEventBusThroughKafka: a business transaction writes an order row and publishes OrderPlaced
// and OrderPaid through the bus (database/sql transaction); a second one publishes through a
// native pgx transaction; a rolled-back one publishes a phantom OrderPlaced of the same order
// first. The forwarder relays the outbox to the real Kafka, and a cqrs.EventProcessor delivers
// the typed events to their handlers: exactly the committed events, with their fields, event ids,
// types and keys; never the phantom.
func TestEventBusThroughKafka(t *testing.T) {
	dsn := testsupport.PostgresDSN(t)
	db := testsupport.OpenPostgres(t)
	brokers := testsupport.KafkaBrokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

	// Schema: a business table and a uniquely named outbox.
	name := testsupport.UniqueName("cqrs")
	orders := name + "_orders"
	writer, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: name})
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(ctx, db, writer.Table()); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	t.Cleanup(func() {
		tbl := writer.Table()
		for _, n := range []string{orders, tbl.Events(), tbl.Leases(), tbl.Relays(), tbl.Migrations()} {
			_, _ = db.Exec("DROP TABLE IF EXISTS " + n)
		}
		_, _ = db.Exec("DROP FUNCTION IF EXISTS " + tbl.Events() + "_notify() CASCADE")
	})
	if _, err := db.ExecContext(ctx, "CREATE TABLE "+orders+" (id TEXT PRIMARY KEY, customer TEXT NOT NULL, total_cents INT NOT NULL)"); err != nil {
		t.Fatal(err)
	}

	// The bus: one topic per event name, under the test's own prefix.
	marshaler := cqrs.JSONMarshaler{GenerateName: cqrs.StructName}
	topicOf := func(eventName string) string { return name + "." + eventName }
	bus, err := eventbus.New(eventbus.Config{
		Writer: writer, Marshaler: marshaler,
		GeneratePublishTopic: func(p cqrs.GenerateEventPublishTopicParams) (string, error) { return topicOf(p.EventName), nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	insertOrder := "INSERT INTO " + orders + " (id, customer, total_cents) VALUES ($1, $2, $3)"

	// 1. Rolled back: a phantom OrderPlaced of order o-1, which must never be delivered. Per-key
	// order puts it before o-1's real events, had it existed.
	phantom := OrderPlaced{OrderID: "o-1", Customer: "phantom", TotalCents: 1, Tenant: "acme"}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, insertOrder, phantom.OrderID, phantom.Customer, phantom.TotalCents); err != nil {
		t.Fatal(err)
	}
	if err := bus.Publish(eventbus.WithTx(ctx, tx), phantom); err != nil {
		t.Fatalf("publish phantom: %v", err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, db, writer.Table().Events()); n != 0 {
		t.Fatalf("%d outbox rows after the rollback, want 0", n)
	}

	// 2. Committed (database/sql): order o-1 with OrderPlaced and OrderPaid in one transaction.
	placed := OrderPlaced{OrderID: "o-1", Customer: "alice", TotalCents: 4200, Tenant: "acme"}
	paid := &OrderPaid{OrderID: "o-1"}
	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, insertOrder, placed.OrderID, placed.Customer, placed.TotalCents); err != nil {
		t.Fatal(err)
	}
	txCtx := eventbus.WithTx(ctx, tx)
	if err := bus.Publish(txCtx, placed); err != nil {
		t.Fatalf("publish OrderPlaced: %v", err)
	}
	if err := bus.Publish(txCtx, paid); err != nil {
		t.Fatalf("publish OrderPaid: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	// 3. Committed (native pgx): order o-2 with its OrderPlaced.
	placed2 := OrderPlaced{OrderID: "o-2", Customer: "bob", TotalCents: 1999}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	err = pgx.BeginFunc(ctx, conn, func(ptx pgx.Tx) error {
		if _, err := ptx.Exec(ctx, insertOrder, placed2.OrderID, placed2.Customer, placed2.TotalCents); err != nil {
			return err
		}
		return bus.Publish(eventbus.WithPgxTx(ctx, ptx), placed2)
	})
	if err != nil {
		t.Fatalf("pgx transaction: %v", err)
	}

	// The outbox now holds exactly the three committed events; their ids are what the
	// consumer must see.
	want := outboxRows(t, db, writer.Table().Events()) // event id -> "type/aggregate"
	if len(want) != 3 {
		t.Fatalf("outbox holds %d events, want 3: %v", len(want), want)
	}

	// The consumer side: a cqrs.EventProcessor on outboxkit's Kafka subscriber, one consumer
	// group per handler.
	deliveries := make(chan delivery, 32)
	runProcessor(t, ctx, brokers, name, topicOf, marshaler, deliveries)

	// The relay.
	pub, err := kafka.NewPublisher(kafka.Config{Brokers: brokers}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close() })
	fwd, err := forwarder.New(forwarder.Config{
		DB: db, Dialect: outbox.Postgres, Table: writer.Table().Events(), Publisher: pub,
		IsRetriable: kafka.Retriable, MaxPollInterval: 100 * time.Millisecond, Logger: logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	fwdCtx, stopFwd := context.WithCancel(ctx)
	fwdDone := make(chan error, 1)
	go func() { fwdDone <- fwd.Run(fwdCtx) }()
	t.Cleanup(func() {
		stopFwd()
		<-fwdDone
	})

	// Every committed event arrives, typed, at its handler (at least once: duplicates are
	// allowed and checked like the first delivery).
	seen := map[string]bool{}
	timeout := time.After(deliveryTimeout)
	for len(seen) < len(want) {
		select {
		case d := <-deliveries:
			checkDelivery(t, d, want, placed, paid, placed2)
			seen[d.eventID] = true
		case err := <-fwdDone:
			t.Fatalf("forwarder stopped: %v", err)
		case <-timeout:
			t.Fatalf("after %s the handlers received %d of %d events: got %v, want %v", deliveryTimeout, len(seen), len(want), seen, want)
		}
	}
	if err := waitEmpty(ctx, db, writer.Table().Events()); err != nil {
		t.Fatal(err)
	}
	// Anything delivered while the outbox drained is checked too (a phantom would fail here).
	for {
		select {
		case d := <-deliveries:
			checkDelivery(t, d, want, placed, paid, placed2)
		default:
			return
		}
	}
}

// checkDelivery fails the test unless d is one of the committed events, with the right type,
// fields, id, aggregate and Kafka key.
func checkDelivery(t *testing.T, d delivery, want map[string]string, placed OrderPlaced, paid *OrderPaid, placed2 OrderPlaced) {
	t.Helper()
	wantKind, ok := want[d.eventID]
	if !ok {
		t.Fatalf("handler %s received event %s (%+v), which is not a committed outbox event", d.handler, d.eventID, d.event)
	}
	if got := d.eventType + "/" + d.aggregateID; got != wantKind {
		t.Fatalf("event %s arrived as %s, want %s", d.eventID, got, wantKind)
	}
	if d.key != d.aggregateID || d.msgUUID != d.eventID || d.nameHeader != d.eventType {
		t.Fatalf("event %s: Kafka key %q (want the aggregate id %q), message UUID %q, name header %q (want %q)",
			d.eventID, d.key, d.aggregateID, d.msgUUID, d.nameHeader, d.eventType)
	}
	switch e := d.event.(type) {
	case *OrderPlaced:
		if d.handler != "on_order_placed" || d.eventType != "OrderPlaced" {
			t.Fatalf("OrderPlaced delivered to %s as type %s", d.handler, d.eventType)
		}
		if w := map[string]OrderPlaced{"o-1": placed, "o-2": placed2}[e.OrderID]; *e != w {
			t.Fatalf("OrderPlaced %+v, want %+v (a rolled-back phantom has customer \"phantom\")", *e, w)
		}
	case *OrderPaid:
		if d.handler != "on_order_paid" || d.eventType != "OrderPaid" || *e != *paid {
			t.Fatalf("OrderPaid %+v delivered to %s as type %s, want %+v", *e, d.handler, d.eventType, *paid)
		}
	default:
		t.Fatalf("handler %s received %T", d.handler, d.event)
	}
}

// runProcessor starts a Router with a cqrs.EventProcessor whose handlers send what they receive
// to deliveries. AckOnUnknownEvent is false: an event named unlike its handler's type is an error
// (nacked, redelivered, never reported), so a wrongly typed event makes the test time out.
func runProcessor(t *testing.T, ctx context.Context, brokers []string, name string, topicOf func(string) string,
	marshaler cqrs.CommandEventMarshaler, deliveries chan<- delivery) {
	t.Helper()
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 15 * time.Second}, watermill.NopLogger{})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var subs []message.Subscriber
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range subs {
			_ = s.Close()
		}
	})
	processor, err := cqrs.NewEventProcessorWithConfig(router, cqrs.EventProcessorConfig{
		GenerateSubscribeTopic: func(p cqrs.EventProcessorGenerateSubscribeTopicParams) (string, error) {
			return topicOf(p.EventName), nil
		},
		SubscriberConstructor: func(p cqrs.EventProcessorSubscriberConstructorParams) (message.Subscriber, error) {
			sub, err := kafka.NewSubscriber(kafka.Config{
				Brokers: brokers, ConsumerGroup: name + "_" + p.HandlerName, NackResendSleep: 50 * time.Millisecond,
			}, watermill.NopLogger{})
			if err != nil {
				return nil, fmt.Errorf("subscriber for %s: %w", p.HandlerName, err)
			}
			mu.Lock()
			subs = append(subs, sub)
			mu.Unlock()
			return sub, nil
		},
		Marshaler: marshaler,
	})
	if err != nil {
		t.Fatal(err)
	}
	report := func(ctx context.Context, handler string, event any) error {
		msg := cqrs.OriginalMessageFromCtx(ctx)
		if msg == nil {
			return fmt.Errorf("handler %s: no original message in the context", handler)
		}
		key, _ := wkafka.MessageKeyFromCtx(ctx)
		d := delivery{
			handler: handler, event: event, key: string(key), msgUUID: msg.UUID,
			eventID:     msg.Metadata.Get(outbox.MetadataEventID),
			eventType:   msg.Metadata.Get(outbox.MetadataEventType),
			aggregateID: msg.Metadata.Get(outbox.MetadataAggregateID),
			nameHeader:  msg.Metadata.Get("name"),
		}
		select {
		case deliveries <- d:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	err = processor.AddHandlers(
		cqrs.NewEventHandler("on_order_placed", func(ctx context.Context, e *OrderPlaced) error {
			return report(ctx, "on_order_placed", e)
		}),
		cqrs.NewEventHandler("on_order_paid", func(ctx context.Context, e *OrderPaid) error {
			return report(ctx, "on_order_paid", e)
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	routerCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- router.Run(routerCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("router: %v", err)
		}
	})
	select {
	case <-router.Running():
	case err := <-done:
		t.Fatalf("router stopped before running: %v", err)
	case <-time.After(deliveryTimeout):
		t.Fatal("router did not start")
	}
}

func countRows(t *testing.T, db *sql.DB, table string) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM " + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// outboxRows maps every event id in the outbox to "event type/aggregate id".
func outboxRows(t *testing.T, db *sql.DB, table string) map[string]string {
	t.Helper()
	rows, err := db.Query("SELECT event_id::text, event_type, aggregate_id FROM " + table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var id, typ, agg string
		if err := rows.Scan(&id, &typ, &agg); err != nil {
			t.Fatal(err)
		}
		out[id] = typ + "/" + agg
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitEmpty waits until the forwarder deleted every acknowledged row.
func waitEmpty(ctx context.Context, db *sql.DB, table string) error {
	deadline := time.Now().Add(deliveryTimeout)
	for {
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
			return fmt.Errorf("count %s: %w", table, err)
		}
		if n == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d rows still in %s after %s", n, table, deliveryTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
