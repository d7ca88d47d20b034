package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wkafka "github.com/ThreeDotsLabs/watermill-kafka/v3/pkg/kafka"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/brokers/brokerconfig"
	"github.com/outboxkit/outboxkit/outbox"
)

// delivery is one event as the consumer saw it, and what it did about it.
type delivery struct {
	eventID, eventType, key, action string
	at                              time.Time
}

// newConsumer returns a Watermill Router that handles every event of the topic: a
// PaymentDeadline cancels its order if it is still unpaid. Each delivery goes to deliveries.
func newConsumer(brokers *brokerconfig.Brokers, s *shop, deliveries chan<- delivery) (*message.Router, error) {
	sub, err := brokers.NewSubscriber("")
	if err != nil {
		return nil, fmt.Errorf("subscriber: %w", err)
	}
	router, err := message.NewRouter(message.RouterConfig{CloseTimeout: 5 * time.Second}, watermill.NopLogger{})
	if err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	router.AddConsumerHandler("billing", topic, sub, func(msg *message.Message) error {
		key, _ := wkafka.MessageKeyFromCtx(msg.Context()) // the Kafka record key: the order id
		d := delivery{eventID: msg.Metadata.Get(outbox.MetadataEventID), eventType: msg.Metadata.Get(outbox.MetadataEventType),
			key: string(key), at: time.Now()}
		if d.eventType == "PaymentDeadline" {
			action, err := s.cancelIfUnpaid(msg.Context(), d.key)
			if err != nil {
				return err // nacked: redelivered
			}
			d.action = action
		}
		select {
		case deliveries <- d:
			return nil
		case <-msg.Context().Done():
			return msg.Context().Err()
		}
	})
	return router, nil
}

// awaitEvents reads deliveries until both OrderPlaced events and o-1's PaymentDeadline arrived.
// A PaymentDeadline before its time, or o-2's cancelled one, is an error; a duplicate delivery is
// reported and ignored (delivery is at least once).
func awaitEvents(ctx context.Context, out io.Writer, deliveries <-chan delivery, placed map[string]placedOrder, start time.Time) error {
	want := map[string]string{}
	for id, p := range placed {
		want[p.placedEvent.String()] = id + " OrderPlaced"
	}
	want[placed["o-1"].deadlineEvent.String()] = "o-1 PaymentDeadline"
	cancelled := placed["o-2"].deadlineEvent.String()
	seen := map[string]bool{}
	for len(seen) < len(want) {
		select {
		case d := <-deliveries:
			if err := checkDelivery(d, placed, cancelled); err != nil {
				return err
			}
			if seen[d.eventID] {
				fmt.Fprintf(out, "duplicate delivery of event %s ignored (delivery is at least once)\n", d.eventID)
				continue
			}
			seen[d.eventID] = true
			line := fmt.Sprintf("consumer at +%s: %s %s key %s", d.at.Sub(start).Round(time.Millisecond), d.eventType, d.eventID, d.key)
			if d.action != "" {
				line += fmt.Sprintf(" (due at +%s): %s", placed[d.key].dueAt.Sub(start).Round(time.Millisecond), d.action)
			}
			fmt.Fprintln(out, line)
		case <-ctx.Done():
			return fmt.Errorf("consumer saw %d of %d events: %w", len(seen), len(want), context.Cause(ctx))
		}
	}
	return nil
}

// checkNoMore reports, once the outbox is empty (nothing left to publish), any delivery still
// waiting: only a duplicate is allowed.
func checkNoMore(out io.Writer, deliveries <-chan delivery, placed map[string]placedOrder) error {
	cancelled := placed["o-2"].deadlineEvent.String()
	for {
		select {
		case d := <-deliveries:
			if err := checkDelivery(d, placed, cancelled); err != nil {
				return err
			}
			fmt.Fprintf(out, "duplicate delivery of event %s ignored (delivery is at least once)\n", d.eventID)
		default:
			fmt.Fprintf(out, "o-2's PaymentDeadline %s, cancelled with the payment, was never published\n", cancelled)
			return nil
		}
	}
}

// checkDelivery refuses the cancelled event, an event never written and a deadline before its time.
func checkDelivery(d delivery, placed map[string]placedOrder, cancelled string) error {
	if d.eventID == cancelled {
		return fmt.Errorf("the cancelled PaymentDeadline %s of o-2 was published", d.eventID)
	}
	p, ok := placed[d.key]
	if !ok {
		return fmt.Errorf("event %s for order %q, which was never placed", d.eventID, d.key)
	}
	if d.eventType == "PaymentDeadline" && d.at.Before(p.dueAt) {
		return fmt.Errorf("PaymentDeadline %s of %s received at %s, before its time %s", d.eventID, d.key, d.at, p.dueAt)
	}
	return nil
}
