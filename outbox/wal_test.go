package outbox_test

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/outbox"
)

// walEvent is an event with every field set, its creation time in whole microseconds (the
// envelope's precision).
func walEvent(aggregateID string) outbox.Event {
	return outbox.Event{
		ID: uuid.Must(uuid.NewV7()), Topic: "orders.events", AggregateType: "order", AggregateID: aggregateID,
		EventType: "OrderPlaced", TenantID: "tenant-1", Payload: []byte(`{"id":"` + aggregateID + `"}`),
		Headers:   map[string]string{"content-type": "application/json", "x-unicode": "välüe ✓", "a": ""},
		CreatedAt: time.Now().UTC().Truncate(time.Microsecond),
	}
}

// TestWALEnvelopeLayout pins the documented layout (docs/wal.md) byte for byte.
func TestWALEnvelopeLayout(t *testing.T) {
	e := outbox.Event{
		ID: uuid.MustParse("0190a5c4-0000-7d3a-9a53-3c8e2d3f1b2b"), Topic: "t", AggregateType: "o", AggregateID: "1",
		EventType: "E", Payload: []byte("hi"), Headers: map[string]string{"b": "2", "a": "1"},
		CreatedAt: time.Unix(1, 2000).UTC(),
	}
	got, err := outbox.AppendWALEnvelope(nil, []outbox.Event{e})
	if err != nil {
		t.Fatal(err)
	}
	want := "01" + "0001" + "0190a5c400007d3a9a533c8e2d3f1b2b" + "00000000000f4242" + // version, count, id, 1,000,002 µs
		"0174" + "016f" + "0131" + "0145" + "00" + // topic, aggregate type, aggregate id, event type, tenant
		"0002" + "0161" + "0001" + "31" + "0162" + "0001" + "32" + // headers by name: a=1, b=2
		"00000002" + "6869" // payload
	if hex.EncodeToString(got) != want {
		t.Fatalf("envelope\n got %x\nwant %s", got, want)
	}
}

// TestWALEnvelopeRoundTrip: what AppendWALEnvelope writes, DecodeWALEnvelope reads back, every
// field, several events in order; empty fields and a nil payload too.
func TestWALEnvelopeRoundTrip(t *testing.T) {
	events := []outbox.Event{walEvent("o-1"), walEvent("o-2"),
		{ID: uuid.Must(uuid.NewV7()), Topic: "t", AggregateID: "k", EventType: "E", CreatedAt: time.UnixMicro(-5).UTC()}}
	content, err := outbox.AppendWALEnvelope(nil, events)
	if err != nil {
		t.Fatal(err)
	}
	got, err := outbox.DecodeWALEnvelope(content)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(events) {
		t.Fatalf("decoded %d events, want %d", len(got), len(events))
	}
	for i := range events {
		assertSameEvent(t, got[i], events[i])
	}
}

// TestWALEnvelopeRefusesWhatItCannotRead: an unknown version, a truncated or an overlong
// envelope is an error wrapping ErrWALEnvelope that says what is wrong.
func TestWALEnvelopeRefusesWhatItCannotRead(t *testing.T) {
	good, err := outbox.AppendWALEnvelope(nil, []outbox.Event{walEvent("o-1")})
	if err != nil {
		t.Fatal(err)
	}
	// One event with the header "a" written twice.
	twice, err := hex.DecodeString("010001" + "0190a5c400007d3a9a533c8e2d3f1b2b" + "0000000000000000" + "0174" + "00" + "0131" + "0145" + "00" +
		"0002" + "0161" + "0001" + "31" + "0161" + "0001" + "32" + "00000000")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, want string
		content    []byte
	}{
		{"empty", "truncated", nil},
		{"version 2", "version 2, this version of outboxkit reads version 1", append([]byte{2}, good[1:]...)},
		{"no events", "no events", []byte{1, 0, 0}},
		{"truncated", "truncated", good[:len(good)-1]},
		{"trailing bytes", "1 bytes after the last event", append(bytes.Clone(good), 0)},
		{"a header twice", `header "a" twice`, twice},
	} {
		_, err := outbox.DecodeWALEnvelope(c.content)
		if !errors.Is(err, outbox.ErrWALEnvelope) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want ErrWALEnvelope saying %q", c.name, err, c.want)
		}
	}
}

// TestWALModeConfig: ModeWAL needs PostgreSQL and a valid slot name, which belongs to ModeWAL
// only; an unknown mode is named.
func TestWALModeConfig(t *testing.T) {
	for _, c := range []struct {
		config outbox.Config
		want   string
	}{
		{outbox.Config{Dialect: outbox.SQLite, Mode: outbox.ModeWAL, WALSlot: "s"}, `Config.Mode "wal" needs the postgres dialect, not sqlite`},
		{outbox.Config{Dialect: outbox.Postgres, Mode: "wall"}, `unknown mode "wall"`},
		{outbox.Config{Dialect: outbox.Postgres, Mode: outbox.ModeWAL}, `Config.WALSlot is required with Config.Mode "wal"`},
		{outbox.Config{Dialect: outbox.Postgres, Mode: outbox.ModeWAL, WALSlot: "Orders-WAL"}, `Config.WALSlot: outbox: replication slot name "Orders-WAL"`},
		{outbox.Config{Dialect: outbox.Postgres, WALSlot: "orders_wal"}, `Config.WALSlot "orders_wal" is set but Config.Mode is "table"`},
	} {
		if _, err := outbox.NewWriter(c.config); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.config, err, c.want)
		}
	}
	table, err := outbox.NewTable(outbox.Postgres, "WalApp.Orders_Outbox")
	if err != nil {
		t.Fatal(err)
	}
	if got := table.WALPrefix(); got != "outboxkit:walapp.orders_outbox" {
		t.Errorf("prefix %q", got)
	}
}

// assertSameEvent compares every field of an event read back with the one written.
func assertSameEvent(t *testing.T, got, want outbox.Event) {
	t.Helper()
	if got.ID != want.ID || got.Topic != want.Topic || got.AggregateType != want.AggregateType ||
		got.AggregateID != want.AggregateID || got.EventType != want.EventType || got.TenantID != want.TenantID ||
		!bytes.Equal(got.Payload, want.Payload) || !got.CreatedAt.Equal(want.CreatedAt) || len(got.Headers) != len(want.Headers) {
		t.Fatalf("event read back\n got %+v\nwant %+v", got, want)
	}
	for k, v := range want.Headers {
		if got.Headers[k] != v {
			t.Fatalf("event %s: header %q = %q, want %q", want.ID, k, got.Headers[k], v)
		}
	}
}

// FuzzDecodeWALEnvelope: decoding any content never panics (any session of the database can emit
// a message with outboxkit's prefix); what decodes, encodes back to events that decode the same.
func FuzzDecodeWALEnvelope(f *testing.F) {
	good, err := outbox.AppendWALEnvelope(nil, []outbox.Event{walEvent("o-1"), walEvent("o-2")})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte{1, 0xff, 0xff})
	f.Add([]byte{1, 0, 1})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, content []byte) {
		events, err := outbox.DecodeWALEnvelope(content)
		if err != nil {
			return
		}
		again, err := outbox.AppendWALEnvelope(nil, events)
		if err != nil {
			t.Fatalf("decoded events do not encode: %v", err)
		}
		back, err := outbox.DecodeWALEnvelope(again)
		if err != nil || len(back) != len(events) {
			t.Fatalf("re-encoded events do not decode: %v", err)
		}
		for i := range events {
			assertSameEvent(t, back[i], events[i])
		}
	})
}
