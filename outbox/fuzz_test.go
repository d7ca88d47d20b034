package outbox_test

import (
	"bytes"
	"testing"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/outbox"
)

// FuzzEventFromMessage: decoding any Watermill message into an event, and validating it, never
// panics; an event that decodes and validates survives ToMessage and EventFromMessage unchanged.
func FuzzEventFromMessage(f *testing.F) {
	f.Add("0190a5c4-7c1e-7d3a-9a53-3c8e2d3f1b2a", "", "orders.events", "", "OrderPlaced", "order", "o-1", "",
		"2026-01-02T15:04:05.123456789Z", "content-type", "application/json", []byte(`{"id":1}`))
	f.Add("", "0190a5c4-7c1e-7d3a-9a53-3c8e2d3f1b2a", "t", "other.topic", "E", "", "a", "acme",
		"2026-01-02T15:04:05+02:00", "traceparent", "00-abc-def-01", []byte{})
	f.Add("not-a-uuid", "", "t", "", "E", "x", "a", "", "", "", "", []byte(nil))
	f.Add("{0190a5c4-7c1e-7d3a-9a53-3c8e2d3f1b2a}", "", "orders'; DROP TABLE x;--", "", "E", "x", "a", "", "yesterday", "bad name", "v", []byte("x"))
	f.Add("urn:uuid:0190a5c4-7c1e-7d3a-9a53-3c8e2d3f1b2a", "", "t", "", "E", "x", "a", "", "0001-01-01T00:00:00Z", "event_id", "x", []byte("x"))
	f.Add("0190a5c4-7c1e-7d3a-9a53-3c8e2d3f1b2a", "", "t", "", "E", "x", "a", "", "0000-01-01T00:00:00+01:00", "", "", []byte("x"))
	f.Fuzz(func(t *testing.T, uuidStr, eventIDMeta, topic, metaTopic, eventType, aggType, aggID, tenant, createdAt,
		headerKey, headerValue string, payload []byte) {
		msg := message.NewMessage(uuidStr, payload)
		for k, v := range map[string]string{
			outbox.MetadataEventID: eventIDMeta, outbox.MetadataTopic: metaTopic, outbox.MetadataEventType: eventType,
			outbox.MetadataAggregateType: aggType, outbox.MetadataAggregateID: aggID, outbox.MetadataTenantID: tenant,
			outbox.MetadataCreatedAt: createdAt,
		} {
			if v != "" {
				msg.Metadata.Set(k, v)
			}
		}
		if headerKey != "" {
			msg.Metadata.Set(headerKey, headerValue)
		}
		e, err := outbox.EventFromMessage(topic, msg)
		if err != nil {
			return
		}
		if e.Validate(0) != nil || e.Validate(outbox.DefaultMaxPayloadBytes) != nil {
			return
		}
		if e.ID.String() == "00000000-0000-0000-0000-000000000000" {
			return // no id: the writer generates one
		}
		back, err := outbox.EventFromMessage(e.Topic, e.ToMessage())
		if err != nil {
			t.Fatalf("valid event %+v does not decode after ToMessage: %v", e, err)
		}
		if back.ID != e.ID || back.Topic != e.Topic || back.EventType != e.EventType || back.AggregateType != e.AggregateType ||
			back.AggregateID != e.AggregateID || back.TenantID != e.TenantID || !back.CreatedAt.Equal(e.CreatedAt) ||
			!bytes.Equal(back.Payload, e.Payload) || len(back.Headers) != len(e.Headers) {
			t.Fatalf("round trip changed the event:\n got %+v\nwant %+v", back, e)
		}
		for k, v := range e.Headers {
			if back.Headers[k] != v {
				t.Fatalf("round trip changed header %q: %q -> %q", k, v, back.Headers[k])
			}
		}
	})
}
