package outbox_test

import (
	"bytes"
	"hash/fnv"
	"regexp"
	"strings"
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

// FuzzKeyHash: KeyHash stays FNV-1a of the joined ordering key, bit for bit (the hashes of rows
// already in a table, their relay partitions and key locks depend on it).
func FuzzKeyHash(f *testing.F) {
	f.Add("", "order", "o-1")
	f.Add("acme", "", "")
	f.Add("t\x1f", "\x1f", "é")
	f.Fuzz(func(t *testing.T, tenant, aggType, aggID string) {
		h := fnv.New64a()
		_, _ = h.Write([]byte(tenant + "\x1f" + aggType + "\x1f" + aggID))
		if want, got := int64(h.Sum64()&0x7fffffffffffffff), outbox.KeyHash(tenant, aggType, aggID); got != want {
			t.Fatalf("KeyHash(%q, %q, %q) = %d, want %d", tenant, aggType, aggID, got, want)
		}
	})
}

// FuzzValidateNames: the topic and header name checks accept exactly what their former regular
// expressions accepted.
func FuzzValidateNames(f *testing.F) {
	topicPattern := regexp.MustCompile(`^[A-Za-z0-9._\-:$]+$`)
	headerPattern := regexp.MustCompile(`^[\x21-\x7e]{1,255}$`)
	f.Add("orders.events")
	f.Add("a b")
	f.Add("x$:-_.9")
	f.Add("é")
	f.Add("line\n")
	f.Fuzz(func(t *testing.T, name string) {
		if got, want := outbox.ValidateTopic(name) == nil, topicPattern.MatchString(name) && len(name) <= 255; got != want {
			t.Fatalf("ValidateTopic(%q) accepts: %v, want %v", name, got, want)
		}
		e := outbox.Event{Topic: "t", AggregateID: "a", EventType: "E", Headers: map[string]string{name: "v"}}
		err := e.Validate(0)
		reserved := name == outbox.MetadataEventID || name == outbox.MetadataEventType || name == outbox.MetadataAggregateType ||
			name == outbox.MetadataAggregateID || name == outbox.MetadataTenantID || name == outbox.MetadataCreatedAt ||
			name == outbox.MetadataTopic || strings.HasPrefix(name, "_watermill_") || strings.HasPrefix(name, "outbox_") ||
			name == "reason_poisoned" || name == "topic_poisoned" || name == "handler_poisoned" || name == "subscriber_poisoned"
		if got, want := err == nil, headerPattern.MatchString(name) && !reserved; got != want {
			t.Fatalf("header name %q accepted: %v, want %v (%v)", name, got, want, err)
		}
	})
}
