package schema_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/outboxkit/outboxkit/brokers/schema"
)

// An event's JSON payload encoded in Avro with the latest schema of subject orders-value, framed
// for registry consumers. A payload that does not fit names the field and is not retriable.
func ExampleEncoder() {
	client, err := sr.NewClient(sr.URLs("http://127.0.0.1:18081/apis/ccompat/v7"))
	if err != nil {
		log.Fatal(err)
	}
	enc, err := schema.NewEncoder(client, schema.Config{}) // latest version, cached for 1m
	if err != nil {
		log.Fatal(err)
	}
	framed, err := enc.Encode(context.Background(), "orders", []byte(`{"id":"o-1","amount":42}`))
	var mismatch *schema.MismatchError
	switch {
	case errors.As(err, &mismatch):
		fmt.Println("dead-letter:", mismatch.Path, mismatch.Reason) // schema.Retriable(err) is false
	case err != nil:
		fmt.Println("retry later:", err) // the registry: schema.Retriable(err) is true
	default:
		fmt.Printf("% x...\n", framed[:5]) // 00, then the schema id in 4 bytes
	}
}

// With the record subject name strategy each event type has its own subject: here
// shop.v1.OrderPlaced, whose registered schema may be Avro, Protobuf (the message of that full
// name is encoded) or JSON Schema.
func ExampleEncoder_EncodeEvent() {
	client, err := sr.NewClient(sr.URLs("http://127.0.0.1:18081/apis/ccompat/v7"))
	if err != nil {
		log.Fatal(err)
	}
	enc, err := schema.NewEncoder(client, schema.Config{Strategy: schema.StrategyRecord})
	if err != nil {
		log.Fatal(err)
	}
	framed, err := enc.EncodeEvent(context.Background(), "orders", "shop.v1.OrderPlaced",
		[]byte(`{"orderId":"o-1","amount":"42"}`))
	if err != nil {
		fmt.Println(err, "retriable:", schema.Retriable(err))
		return
	}
	fmt.Printf("% x...\n", framed[:5])
}

// A consumer reads the relay's events back as JSON: the Decoder's Watermill middleware hands the
// handler each message with its payload decoded with the schema its id names (Avro, Protobuf or
// JSON Schema).
func ExampleDecoder_Middleware() {
	client, err := sr.NewClient(sr.URLs("http://127.0.0.1:18081/apis/ccompat/v7"))
	if err != nil {
		log.Fatal(err)
	}
	dec, err := schema.NewDecoder(client)
	if err != nil {
		log.Fatal(err)
	}
	router, err := message.NewRouter(message.RouterConfig{}, watermill.NopLogger{})
	if err != nil {
		log.Fatal(err)
	}
	router.AddMiddleware(dec.Middleware)
	// router.AddConsumerHandler("orders", "orders", subscriber, func(msg *message.Message) error {
	//	// msg.Payload is JSON again
	// })
	_ = router
}

// With Register, the encoder registers the schema given for a subject the registry has no
// version of (here orders-value, on its first event) and encodes with it; a subject with
// versions is used as it is. Off by default: a missing subject is a retriable RegistryError.
func ExampleConfig_register() {
	client, err := sr.NewClient(sr.URLs("http://127.0.0.1:18081/apis/ccompat/v7"))
	if err != nil {
		log.Fatal(err)
	}
	enc, err := schema.NewEncoder(client, schema.Config{
		Register: true,
		Schemas: map[string]sr.Schema{"orders-value": {Type: sr.TypeAvro,
			Schema: `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"amount","type":"long"}]}`}},
	})
	if err != nil {
		log.Fatal(err) // a schema that does not parse is refused here
	}
	framed, err := enc.Encode(context.Background(), "orders", []byte(`{"id":"o-1","amount":42}`))
	if err != nil {
		fmt.Println(err, "retriable:", schema.Retriable(err))
		return
	}
	fmt.Printf("% x...\n", framed[:5])
}

// A consumer reads the relay's events into its own Go type: DecodeAs decodes the payload with the
// schema its id names and reads the JSON into the struct (a generated Protobuf type is read with
// protojson). It needs the registry, so it is not run here.
func ExampleDecodeAs() {
	client, err := sr.NewClient(sr.URLs("http://127.0.0.1:18081/apis/ccompat/v7"))
	if err != nil {
		log.Fatal(err)
	}
	dec, err := schema.NewDecoder(client)
	if err != nil {
		log.Fatal(err)
	}
	type Order struct {
		ID     string `json:"id"`
		Amount int64  `json:"amount"`
	}
	var framed []byte // a record's value, as the relay published it
	order, err := schema.DecodeAs[Order](context.Background(), dec, framed)
	if err != nil {
		fmt.Println(err, "retriable:", schema.Retriable(err)) // a *DecodeError is not
		return
	}
	fmt.Println(order.ID, order.Amount)
}

// Handler turns a function of the decoded value into a Watermill handler.
func ExampleHandler() {
	client, err := sr.NewClient(sr.URLs("http://127.0.0.1:18081/apis/ccompat/v7"))
	if err != nil {
		log.Fatal(err)
	}
	dec, err := schema.NewDecoder(client)
	if err != nil {
		log.Fatal(err)
	}
	type Order struct {
		ID     string `json:"id"`
		Amount int64  `json:"amount"`
	}
	handler := schema.Handler(dec, func(msg *message.Message, o Order) error {
		fmt.Println(msg.UUID, o.ID, o.Amount)
		return nil
	})
	// router.AddConsumerHandler("orders", "orders", subscriber, handler)
	_ = handler
}
