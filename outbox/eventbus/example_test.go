package eventbus_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ThreeDotsLabs/watermill/components/cqrs"

	"github.com/outboxkit/outboxkit/outbox"
	"github.com/outboxkit/outboxkit/outbox/eventbus"
)

// ItemShipped is an event: AggregateID makes it an eventbus.Event (the ordering key), and
// AggregateType names the kind of aggregate.
type ItemShipped struct {
	ShipmentID string `json:"shipment_id"`
	SKU        string `json:"sku"`
}

func (e ItemShipped) AggregateID() string   { return e.ShipmentID }
func (e ItemShipped) AggregateType() string { return "shipment" }

// A Watermill CQRS event bus that writes into the outbox, in the transaction carried by the
// context: the events commit or roll back with the business rows.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "eventbus-example")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", "file:"+filepath.Join(dir, "app.db")+"?_pragma=busy_timeout(5000)")
	defer db.Close()
	ctx := context.Background()

	writer, _ := outbox.NewWriter(outbox.Config{Dialect: outbox.SQLite})
	if err := outbox.Migrate(ctx, db, writer.Table()); err != nil {
		fmt.Println(err)
		return
	}
	bus, err := eventbus.New(eventbus.Config{
		Writer:    writer,
		Marshaler: cqrs.JSONMarshaler{GenerateName: cqrs.StructName},
		GeneratePublishTopic: func(p cqrs.GenerateEventPublishTopicParams) (string, error) {
			return "shipments", nil
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	tx, _ := db.BeginTx(ctx, nil)
	// ... the business rows, through tx ...
	txCtx := eventbus.WithTx(ctx, tx)
	for _, e := range []ItemShipped{{"s-1", "book"}, {"s-1", "lamp"}} {
		if err := bus.Publish(txCtx, e); err != nil {
			fmt.Println(err)
			_ = tx.Rollback()
			return
		}
	}
	_ = tx.Commit()

	rows, _ := db.Query("SELECT topic, event_type, aggregate_type, aggregate_id, payload FROM " + writer.Table().Events() + " ORDER BY seq")
	defer rows.Close()
	for rows.Next() {
		var topic, eventType, aggType, aggID, payload string
		_ = rows.Scan(&topic, &eventType, &aggType, &aggID, &payload)
		fmt.Println(topic, eventType, aggType, aggID, payload)
	}

	// Without a transaction in the context nothing is written.
	err = bus.Publish(ctx, ItemShipped{"s-2", "pen"})
	fmt.Println(errors.Is(err, eventbus.ErrNoTx))
	// Output:
	// shipments ItemShipped shipment s-1 {"shipment_id":"s-1","sku":"book"}
	// shipments ItemShipped shipment s-1 {"shipment_id":"s-1","sku":"lamp"}
	// true
}
