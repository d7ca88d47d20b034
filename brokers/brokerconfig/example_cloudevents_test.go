package brokerconfig_test

import (
	"context"
	"fmt"
	"time"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/outbox"
)

// format: cloudevents makes every published event a CloudEvent in binary content mode (Kafka
// headers ce_id, ce_type, ce_source, ce_subject, ce_time, ce_specversion and content-type; the
// same names as Pulsar properties), the outbox metadata kept. Here on the in-process kfake
// cluster; OUTBOXKIT_FORMAT and OUTBOXKIT_CLOUDEVENTS_SOURCE do the same from the environment.
func ExampleBuild_cloudEvents() {
	cfg, err := brokerconfig.Parse([]byte(`
broker: kfake
format: cloudevents
cloudevents:
  source: /billing
`), nil)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	brokers, err := brokerconfig.Build(ctx, cfg, nil)
	if err != nil {
		panic(err)
	}
	defer brokers.Close()

	event, _ := outbox.NewJSONEvent("invoices", "invoice", "inv-9", "InvoiceIssued", map[string]int{"total": 42})
	event.ID = [16]byte{0x01, 0x93, 15: 0x01}
	event.CreatedAt = time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	if err := brokers.Publisher().Publish("invoices", event.ToMessage()); err != nil {
		panic(err)
	}

	sub, _ := brokers.NewSubscriber("example")
	messages, _ := sub.Subscribe(ctx, "invoices")
	got := <-messages
	got.Ack()
	for _, k := range []string{"ce_specversion", "ce_id", "ce_type", "ce_source", "ce_subject", "ce_time", "content-type", "aggregate_type"} {
		fmt.Printf("%s=%s\n", k, got.Metadata.Get(k))
	}
	// Output:
	// ce_specversion=1.0
	// ce_id=01930000-0000-0000-0000-000000000001
	// ce_type=InvoiceIssued
	// ce_source=/billing
	// ce_subject=inv-9
	// ce_time=2026-12-01T09:00:00Z
	// content-type=application/json
	// aggregate_type=invoice
}
