package middleware_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	wmmiddleware "github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"
	_ "modernc.org/sqlite"

	"github.com/outboxkit/outboxkit/middleware"
)

// An event delivered twice changes the database once: the inbox row and the handler's write
// commit in one transaction, and the second delivery finds the row and is acknowledged.
func ExampleInbox_Handler() {
	dir, err := os.MkdirTemp("", "inbox-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)")
	if err != nil {
		panic(err)
	}
	defer db.Close()
	ctx := context.Background()
	if _, err := db.ExecContext(ctx, "CREATE TABLE payments (order_id TEXT, amount INTEGER)"); err != nil {
		panic(err)
	}

	inbox, err := middleware.NewInbox(middleware.InboxConfig{
		DB: db, Dialect: middleware.DialectSQLite, ConsumerName: "payments",
	}, watermill.NopLogger{})
	if err != nil {
		panic(err)
	}
	if err := inbox.Migrate(ctx); err != nil {
		panic(err)
	}
	// With a Router: router.AddHandler(name, topic, subscriber, outTopic, publisher, handler).
	handler := inbox.Handler(func(ctx context.Context, tx *sql.Tx, msg *message.Message) ([]*message.Message, error) {
		_, err := tx.ExecContext(ctx, "INSERT INTO payments (order_id, amount) VALUES (?, 100)", string(msg.Payload))
		return nil, err
	})

	for range 2 { // the broker delivers the same event twice
		msg := message.NewMessage(watermill.NewUUID(), []byte("order-42"))
		msg.Metadata.Set("event_id", "0190a1b2-0000-7000-8000-000000000042")
		if _, err := handler(msg); err != nil {
			panic(err)
		}
	}
	var payments int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM payments").Scan(&payments); err != nil {
		panic(err)
	}
	fmt.Println("payments:", payments)
	fmt.Printf("stats: %+v\n", inbox.Stats())
	// Output:
	// payments: 1
	// stats: {Processed:1 Duplicates:1}
}

// RetryThenPoison is one middleware: retries with backoff first, then the poison topic. Adding
// Watermill's Retry and PoisonQueue separately in the wrong order silently disables Retry.
func ExampleRetryThenPoison() {
	pubSub := gochannel.NewGoChannel(gochannel.Config{Persistent: true}, watermill.NopLogger{})
	defer pubSub.Close()

	retryThenPoison, err := middleware.RetryThenPoison(middleware.RetryPoisonConfig{
		Publisher:       pubSub, // in production: the Kafka or Pulsar publisher
		PoisonTopic:     "orders_poison",
		MaxRetries:      2,
		InitialInterval: time.Millisecond,
	})
	if err != nil {
		panic(err)
	}
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		panic(err)
	}
	router.AddMiddleware(retryThenPoison)
	attempts := 0
	router.AddConsumerHandler("orders", "orders", pubSub, func(msg *message.Message) error {
		attempts++
		return errors.New("inventory service unavailable")
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = router.Run(ctx) }()
	<-router.Running()
	defer router.Close()

	poisoned, err := pubSub.Subscribe(ctx, "orders_poison")
	if err != nil {
		panic(err)
	}
	if err := pubSub.Publish("orders", message.NewMessage(watermill.NewUUID(), []byte(`{"order":42}`))); err != nil {
		panic(err)
	}
	msg := <-poisoned
	msg.Ack()
	fmt.Println("attempts:", attempts)
	fmt.Println("payload:", string(msg.Payload))
	fmt.Println("reason:", msg.Metadata.Get(wmmiddleware.ReasonForPoisonedKey))
	fmt.Println("from topic:", msg.Metadata.Get(wmmiddleware.PoisonedTopicKey))
	// Output:
	// attempts: 3
	// payload: {"order":42}
	// reason: inventory service unavailable
	// from topic: orders
}
