package outbox

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/ThreeDotsLabs/watermill/components/delay"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/google/uuid"
)

// Metadata keys outboxkit sets on every Watermill message it writes to the outbox and that the
// forwarder sends to the broker as headers (Kafka) or properties (Pulsar). The message UUID is
// the event id as well.
const (
	MetadataEventID       = "event_id"
	MetadataEventType     = "event_type"
	MetadataAggregateType = "aggregate_type"
	MetadataAggregateID   = "aggregate_id"
	MetadataTenantID      = "tenant_id"
	MetadataCreatedAt     = "created_at"
	// MetadataTopic names the destination topic of a message written through
	// [Writer.Publisher]; when absent the topic passed to Publish is used.
	MetadataTopic = "outbox_topic"
)

// reservedMetadata lists the exact keys a user header may not use: outboxkit's own, and the
// keys of Watermill's poison queue (middleware.ReasonForPoisonedKey and the others), which the
// relay sets on dead letters and consumers read.
var reservedMetadata = map[string]string{
	MetadataEventID: "outboxkit", MetadataEventType: "outboxkit", MetadataAggregateType: "outboxkit",
	MetadataAggregateID: "outboxkit", MetadataTenantID: "outboxkit", MetadataCreatedAt: "outboxkit", MetadataTopic: "outboxkit",
	middleware.ReasonForPoisonedKey: "Watermill's poison queue", middleware.PoisonedTopicKey: "Watermill's poison queue",
	middleware.PoisonedHandlerKey: "Watermill's poison queue", middleware.PoisonedSubscriberKey: "Watermill's poison queue",
}

// Reserved header prefixes: "_watermill_" is Watermill's (the brokers carry the message UUID as
// "_watermill_message_uuid"), "outbox_" is the relay's (forwarder.MetadataAttempts and the other
// keys it sets on the messages it publishes).
const (
	reservedPrefixWatermill = "_watermill_"
	reservedPrefixOutbox    = "outbox_"
)

// IsReservedHeader reports whether name is a header name the Writer refuses because Watermill,
// a broker adapter, the relay or the poison queue sets it on the published message: the
// outboxkit metadata keys (MetadataEventID ...), names starting with "_watermill_" or
// "outbox_", and the poison queue's keys ("reason_poisoned", "topic_poisoned",
// "handler_poisoned", "subscriber_poisoned").
func IsReservedHeader(name string) bool { return reservedBy(name) != "" }

// reservedBy names who reserves the header name, or "" if it is free.
func reservedBy(name string) string {
	if owner := reservedMetadata[name]; owner != "" {
		return owner
	}
	switch {
	case strings.HasPrefix(name, reservedPrefixWatermill):
		return "Watermill"
	case strings.HasPrefix(name, reservedPrefixOutbox):
		return "the outboxkit relay"
	}
	return ""
}

// Event is one fact to publish. Topic, AggregateID and EventType are required; ID and CreatedAt
// are filled in by the Writer when zero.
type Event struct {
	// ID identifies the event and is the consumers' dedup key. Zero means: generate a
	// time-ordered UUIDv7.
	ID uuid.UUID
	// Topic is the destination topic on the broker.
	Topic string
	// AggregateType is the kind of entity the event is about, such as "order".
	AggregateType string
	// AggregateID identifies the entity; it is the ordering and partitioning key (the Kafka
	// message key, the Pulsar ordering key).
	AggregateID string
	// EventType names what happened, such as "OrderPlaced".
	EventType string
	// Payload is the event body, sent to the broker unchanged.
	Payload []byte
	// Headers travel with the event as message metadata. Names must be non-empty printable
	// ASCII without spaces and must not be reserved (IsReservedHeader); names and values
	// together may not exceed MaxHeadersBytes.
	Headers map[string]string
	// TenantID optionally names the tenant; it is part of the ordering key.
	TenantID string
	// CreatedAt is when the event was created; zero means now.
	CreatedAt time.Time
	// DeliverAt schedules the event (docs/scheduled.md): the relay publishes it at or after
	// this time by the database's clock, and until then [Writer.Cancel] and
	// [Writer.Reschedule] can still withdraw or move it in a business transaction. A scheduled
	// event leaves its key's order: it holds no event of its key back and waits for none.
	// Zero means an ordinary event, published at once in its key's order; a time already past
	// means as soon as the relay claims again. A Watermill message carries it as the metadata
	// of components/delay (delay.Message), which the Writer's publisher reads.
	DeliverAt time.Time
}

// NewJSONEvent returns an event whose payload is v encoded as JSON, with a content-type header.
func NewJSONEvent(topic, aggregateType, aggregateID, eventType string, v any) (Event, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return Event{}, fmt.Errorf("outbox: encode %s payload as JSON: %w", eventType, err)
	}
	return Event{
		Topic: topic, AggregateType: aggregateType, AggregateID: aggregateID, EventType: eventType,
		Payload: payload, Headers: map[string]string{"content-type": "application/json"},
	}, nil
}

// DecodeJSON decodes the event's payload into v.
func (e Event) DecodeJSON(v any) error {
	if err := json.Unmarshal(e.Payload, v); err != nil {
		return fmt.Errorf("outbox: decode event %s payload: %w", e.ID, err)
	}
	return nil
}

// OrderingKey is the key that orders events: tenant, aggregate type and aggregate id.
func (e Event) OrderingKey() string {
	return e.TenantID + "\x1f" + e.AggregateType + "\x1f" + e.AggregateID
}

// KeyHash returns the 64-bit FNV-1a hash of the ordering key; the relay partitions work by it.
func KeyHash(tenantID, aggregateType, aggregateID string) int64 {
	// FNV-1a over tenantID + "\x1f" + aggregateType + "\x1f" + aggregateID, without building
	// that string (hash/fnv's result, bit for bit).
	const offset64, prime64 = 14695981039346656037, 1099511628211
	h := uint64(offset64)
	for i, part := range [3]string{tenantID, aggregateType, aggregateID} {
		if i > 0 {
			h = (h ^ 0x1f) * prime64
		}
		for j := 0; j < len(part); j++ {
			h = (h ^ uint64(part[j])) * prime64
		}
	}
	return int64(h & 0x7fffffffffffffff)
}

// Partitions is the number of key-hash partitions the relay shares out among its instances.
const Partitions = 64

// PartitionOf returns the relay partition of a key hash.
func PartitionOf(keyHash int64) int { return int(keyHash % Partitions) }

// ToMessage converts the event into a Watermill message: the UUID is the event id, the payload is
// the event's (shared, not copied), and the metadata carries the event's headers plus the
// outboxkit keys.
func (e Event) ToMessage() *message.Message {
	msg := message.NewMessage(e.ID.String(), e.Payload)
	for k, v := range e.Headers {
		msg.Metadata.Set(k, v)
	}
	msg.Metadata.Set(MetadataEventID, e.ID.String())
	msg.Metadata.Set(MetadataEventType, e.EventType)
	msg.Metadata.Set(MetadataAggregateType, e.AggregateType)
	msg.Metadata.Set(MetadataAggregateID, e.AggregateID)
	if e.TenantID != "" {
		msg.Metadata.Set(MetadataTenantID, e.TenantID)
	}
	if !e.CreatedAt.IsZero() {
		msg.Metadata.Set(MetadataCreatedAt, e.CreatedAt.UTC().Format(time.RFC3339Nano))
	}
	if !e.DeliverAt.IsZero() {
		msg.Metadata.Set(delay.DelayedUntilKey, e.DeliverAt.UTC().Format(time.RFC3339Nano))
	}
	return msg
}

// EventFromMessage converts a Watermill message back into an event. topic is used when the
// message does not name its destination in [MetadataTopic]. Missing metadata leaves fields empty;
// [Event.Validate] reports what is missing. The delay of Watermill's components/delay
// (delay.Message, or its publisher) becomes the event's DeliverAt; the zero delay leaves it zero.
func EventFromMessage(topic string, msg *message.Message) (Event, error) {
	e := Event{Topic: topic, Payload: msg.Payload, Headers: map[string]string{}}
	id := msg.Metadata.Get(MetadataEventID)
	if id == "" {
		id = msg.UUID
	}
	if id != "" {
		parsed, err := uuid.Parse(id)
		if err != nil {
			return Event{}, fmt.Errorf("outbox: message id %q is not a UUID: %w", id, err)
		}
		e.ID = parsed
	}
	for k, v := range msg.Metadata {
		switch k {
		case MetadataEventID:
		case MetadataTopic:
			e.Topic = v
		case MetadataEventType:
			e.EventType = v
		case MetadataAggregateType:
			e.AggregateType = v
		case MetadataAggregateID:
			e.AggregateID = v
		case MetadataTenantID:
			e.TenantID = v
		case MetadataCreatedAt:
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return Event{}, fmt.Errorf("outbox: message %s: metadata %s=%q is not an RFC 3339 time: %w",
					msg.UUID, MetadataCreatedAt, v, err)
			}
			e.CreatedAt = t
		case delay.DelayedUntilKey:
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return Event{}, fmt.Errorf("outbox: message %s: metadata %s=%q is not an RFC 3339 time: %w",
					msg.UUID, delay.DelayedUntilKey, v, err)
			}
			e.DeliverAt = t
		case delay.DelayedForKey:
			// The same delay as DelayedUntilKey, relative to when it was set: the time is kept.
		default:
			e.Headers[k] = v
		}
	}
	return e, nil
}
