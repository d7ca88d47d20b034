package eventbus_test

// Fast tests on an SQLite outbox (no service needed). The end-to-end test through PostgreSQL, the
// forwarder and the real Kafka is in kafka_test.go.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ThreeDotsLabs/watermill/components/cqrs"
	"github.com/google/uuid"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	_ "modernc.org/sqlite" // the pure-Go SQLite driver, registered as "sqlite"

	"github.com/outboxkit/outboxkit/outbox"
	"github.com/outboxkit/outboxkit/outbox/eventbus"
)

// OrderPlaced is an event of aggregate "order", with a tenant.
type OrderPlaced struct {
	OrderID    string `json:"order_id"`
	Customer   string `json:"customer"`
	TotalCents int    `json:"total_cents"`
	Tenant     string `json:"tenant"`
}

func (e OrderPlaced) AggregateID() string   { return e.OrderID }
func (e OrderPlaced) AggregateType() string { return "order" }
func (e OrderPlaced) TenantID() string      { return e.Tenant }

// OrderPaid implements Event on the pointer only, and no optional interface.
type OrderPaid struct {
	OrderID string `json:"order_id"`
}

func (e *OrderPaid) AggregateID() string { return e.OrderID }

// NoAggregate does not implement eventbus.Event.
type NoAggregate struct{ N int }

// row is one outbox row as stored.
type row struct {
	eventID, topic, aggType, aggID, eventType, tenant, headers string
	payload                                                    []byte
}

type fixture struct {
	db     *sql.DB
	writer *outbox.Writer
	bus    *cqrs.EventBus
}

func newFixture(t *testing.T, onPublish cqrs.OnEventSendFn) fixture {
	t.Helper()
	path := filepath.Join(t.TempDir(), "bus.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	writer, err := outbox.NewWriter(outbox.Config{Dialect: outbox.SQLite})
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(context.Background(), db, writer.Table()); err != nil {
		t.Fatal(err)
	}
	bus, err := eventbus.New(eventbus.Config{
		Writer:    writer,
		Marshaler: cqrs.JSONMarshaler{GenerateName: cqrs.StructName},
		GeneratePublishTopic: func(p cqrs.GenerateEventPublishTopicParams) (string, error) {
			return "shop." + p.EventName, nil
		},
		OnPublish: onPublish,
	})
	if err != nil {
		t.Fatal(err)
	}
	return fixture{db: db, writer: writer, bus: bus}
}

func (f fixture) rows(t *testing.T) []row {
	t.Helper()
	rs, err := f.db.Query("SELECT event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, headers, payload FROM " +
		f.writer.Table().Events() + " ORDER BY seq")
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	var out []row
	for rs.Next() {
		var r row
		if err := rs.Scan(&r.eventID, &r.topic, &r.aggType, &r.aggID, &r.eventType, &r.tenant, &r.headers, &r.payload); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func (f fixture) begin(t *testing.T) *sql.Tx {
	t.Helper()
	tx, err := f.db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tx.Rollback() })
	return tx
}

// TestPublishWritesTheOutboxFields publishes two typed events in one transaction and checks each
// row: topic from the topic generator, event type from the cqrs name, aggregate and tenant from
// the event, a UUIDv7 event id, the JSON payload and the marshaler's "name" header.
func TestPublishWritesTheOutboxFields(t *testing.T) {
	f := newFixture(t, nil)
	tx := f.begin(t)
	ctx := eventbus.WithTx(context.Background(), tx)
	placed := OrderPlaced{OrderID: "o-1", Customer: "alice", TotalCents: 4200, Tenant: "acme"}
	if err := f.bus.Publish(ctx, placed); err != nil {
		t.Fatalf("publish OrderPlaced: %v", err)
	}
	if err := f.bus.Publish(ctx, &OrderPaid{OrderID: "o-1"}); err != nil {
		t.Fatalf("publish OrderPaid: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	rows := f.rows(t)
	if len(rows) != 2 {
		t.Fatalf("%d rows, want 2", len(rows))
	}
	want := []row{
		{topic: "shop.OrderPlaced", aggType: "order", aggID: "o-1", eventType: "OrderPlaced", tenant: "acme"},
		{topic: "shop.OrderPaid", aggType: "", aggID: "o-1", eventType: "OrderPaid", tenant: ""},
	}
	for i, r := range rows {
		w := want[i]
		if r.topic != w.topic || r.aggType != w.aggType || r.aggID != w.aggID || r.eventType != w.eventType || r.tenant != w.tenant {
			t.Errorf("row %d: topic %q, aggregate %q/%q, type %q, tenant %q; want %q, %q/%q, %q, %q",
				i, r.topic, r.aggType, r.aggID, r.eventType, r.tenant, w.topic, w.aggType, w.aggID, w.eventType, w.tenant)
		}
		id, err := uuid.Parse(r.eventID)
		if err != nil || id.Version() != 7 {
			t.Errorf("row %d: event id %q is not a UUIDv7 (%v)", i, r.eventID, err)
		}
		var headers map[string]string
		if err := json.Unmarshal([]byte(r.headers), &headers); err != nil {
			t.Fatalf("row %d: headers %q: %v", i, r.headers, err)
		}
		if headers["name"] != w.eventType {
			t.Errorf("row %d: header name=%q, want %q (the marshaler's, read by the consumer's EventProcessor)", i, headers["name"], w.eventType)
		}
	}
	var got OrderPlaced
	if err := json.Unmarshal(rows[0].payload, &got); err != nil || got != placed {
		t.Errorf("OrderPlaced payload %s decodes to %+v (%v), want %+v", rows[0].payload, got, err, placed)
	}
}

// TestRolledBackPublishLeavesNoRow: the event rolls back with its transaction.
func TestRolledBackPublishLeavesNoRow(t *testing.T) {
	f := newFixture(t, nil)
	tx := f.begin(t)
	if err := f.bus.Publish(eventbus.WithTx(context.Background(), tx), OrderPlaced{OrderID: "o-2"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if rows := f.rows(t); len(rows) != 0 {
		t.Fatalf("%d rows after rollback, want 0: %+v", len(rows), rows)
	}
}

// TestPublishWithoutTxFails: no transaction in the context (none added, or a nil one hiding an
// outer one) is ErrNoTx, naming the event, and writes nothing.
func TestPublishWithoutTxFails(t *testing.T) {
	f := newFixture(t, nil)
	tx := f.begin(t)
	for name, ctx := range map[string]context.Context{
		"plain context": context.Background(),
		"nil *sql.Tx":   eventbus.WithTx(eventbus.WithTx(context.Background(), tx), nil),
		"nil pgx.Tx":    eventbus.WithPgxTx(context.Background(), nil),
	} {
		err := f.bus.Publish(ctx, OrderPlaced{OrderID: "o-3"})
		if !errors.Is(err, eventbus.ErrNoTx) {
			t.Errorf("%s: error %v, want ErrNoTx", name, err)
			continue
		}
		if !strings.Contains(err.Error(), "OrderPlaced") {
			t.Errorf("%s: error %q does not name the event", name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if rows := f.rows(t); len(rows) != 0 {
		t.Fatalf("%d rows, want 0", len(rows))
	}
}

// TestPublishRejectsEventsWithoutAggregate: events without an ordering key are refused with an
// error naming them, nothing is written and the transaction stays usable.
func TestPublishRejectsEventsWithoutAggregate(t *testing.T) {
	f := newFixture(t, nil)
	tx := f.begin(t)
	ctx := eventbus.WithTx(context.Background(), tx)
	for _, c := range []struct {
		event any
		want  string
	}{
		{NoAggregate{N: 1}, "eventbus_test.NoAggregate does not implement eventbus.Event"},
		{OrderPaid{OrderID: "o-4"}, "eventbus_test.OrderPaid does not implement eventbus.Event"}, // pointer receiver
		{OrderPlaced{}, "OrderPlaced.AggregateID() returned an empty aggregate id"},
		{(*OrderPaid)(nil), "publish OrderPaid: the event is nil"},
		{nil, "the event is nil"},
	} {
		err := f.bus.Publish(ctx, c.event)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("publish %#v: error %v, want one containing %q", c.event, err, c.want)
		}
	}
	if err := f.bus.Publish(ctx, OrderPlaced{OrderID: "o-5"}); err != nil {
		t.Fatalf("publish after the refusals: %v", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if rows := f.rows(t); len(rows) != 1 || rows[0].aggID != "o-5" {
		t.Fatalf("rows %+v, want only o-5's", rows)
	}
}

// TestPublishRejectsABadTopic: the outbox's validation error reaches the caller, naming the event.
func TestPublishRejectsABadTopic(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bus.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	writer, err := outbox.NewWriter(outbox.Config{Dialect: outbox.SQLite})
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(context.Background(), db, writer.Table()); err != nil {
		t.Fatal(err)
	}
	bus, err := eventbus.New(eventbus.Config{
		Writer: writer, Marshaler: cqrs.JSONMarshaler{},
		GeneratePublishTopic: func(p cqrs.GenerateEventPublishTopicParams) (string, error) {
			return "bad topic " + p.EventName, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // the test only reads the error
	err = bus.Publish(eventbus.WithTx(context.Background(), tx), OrderPlaced{OrderID: "o-6"})
	if err == nil || !strings.Contains(err.Error(), "eventbus_test.OrderPlaced") || !strings.Contains(err.Error(), `"bad topic eventbus_test.OrderPlaced"`) {
		t.Fatalf("error %v, want one naming the event type and the topic", err)
	}
}

// TestOnPublishRunsAfterTheOutboxFields: the user's OnPublish sees the outbox metadata, can add
// headers, and its error aborts the Publish.
func TestOnPublishRunsAfterTheOutboxFields(t *testing.T) {
	var seenType string
	f := newFixture(t, func(p cqrs.OnEventSendParams) error {
		seenType = p.Message.Metadata.Get(outbox.MetadataEventType)
		if p.EventName == "OrderPaid" {
			return errors.New("refused by OnPublish")
		}
		p.Message.Metadata.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
		return nil
	})
	tx := f.begin(t)
	ctx := eventbus.WithTx(context.Background(), tx)
	if err := f.bus.Publish(ctx, OrderPlaced{OrderID: "o-7"}); err != nil {
		t.Fatal(err)
	}
	if seenType != "OrderPlaced" {
		t.Errorf("OnPublish saw event_type %q, want OrderPlaced", seenType)
	}
	if err := f.bus.Publish(ctx, &OrderPaid{OrderID: "o-7"}); err == nil || !strings.Contains(err.Error(), "refused by OnPublish") {
		t.Errorf("error %v, want OnPublish's", err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	rows := f.rows(t)
	if len(rows) != 1 || !strings.Contains(rows[0].headers, `"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"`) {
		t.Fatalf("rows %+v, want one OrderPlaced with the traceparent header", rows)
	}
}

// TestPublishStoresTheTraceContext: the span of the Publish context travels with the event as
// the W3C traceparent header, as for every outbox write.
func TestPublishStoresTheTraceContext(t *testing.T) {
	f := newFixture(t, nil)
	tp := sdktrace.NewTracerProvider()
	defer func() { _ = tp.Shutdown(context.Background()) }()
	ctx, span := tp.Tracer("eventbus_test").Start(context.Background(), "place order")
	defer span.End()
	tx := f.begin(t)
	if err := f.bus.Publish(eventbus.WithTx(ctx, tx), OrderPlaced{OrderID: "o-8"}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	rows := f.rows(t)
	var headers map[string]string
	if len(rows) != 1 || json.Unmarshal([]byte(rows[0].headers), &headers) != nil {
		t.Fatalf("rows %+v, want one with JSON headers", rows)
	}
	sc := span.SpanContext()
	if want := "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"; headers[outbox.HeaderTraceParent] != want {
		t.Fatalf("traceparent %q, want %q", headers[outbox.HeaderTraceParent], want)
	}
}

// TestNewNamesMissingFields: every required field missing is named.
func TestNewNamesMissingFields(t *testing.T) {
	_, err := eventbus.New(eventbus.Config{})
	if err == nil {
		t.Fatal("New accepted an empty config")
	}
	for _, field := range []string{"Config.Writer", "Config.Marshaler", "Config.GeneratePublishTopic"} {
		if !strings.Contains(err.Error(), field) {
			t.Errorf("error %q does not name %s", err, field)
		}
	}
}
