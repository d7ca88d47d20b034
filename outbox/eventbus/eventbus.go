// Package eventbus is a Watermill CQRS event bus (components/cqrs) whose Publish(ctx, event)
// writes the event into the outbox, in the database transaction carried by ctx.
//
// It is the transactional-events pattern Watermill documents with watermill-sql and its
// forwarder component, with outboxkit's [outbox.Writer] as the write side and outboxkit's
// forwarder as the relay. One bus serves the whole application: instead of building a
// watermill-sql publisher and an event bus per transaction, the caller puts the transaction in
// the context with [WithTx] (database/sql) or [WithPgxTx] (native pgx) and publishes:
//
//	tx, _ := db.BeginTx(ctx, nil)
//	_, _ = tx.ExecContext(ctx, "INSERT INTO orders ...")
//	if err := bus.Publish(eventbus.WithTx(ctx, tx), OrderPlaced{OrderID: "o-1"}); err != nil { ... }
//	_ = tx.Commit() // the event exists if and only if the order does
//
// The outbox fields come from the event and the bus configuration:
//
//   - topic: Config.GeneratePublishTopic, as in Watermill's own event bus;
//   - event type: the cqrs event name (Marshaler.Name), which is also what a cqrs.EventProcessor
//     on the consumer side matches handlers with;
//   - aggregate id, the ordering key (Kafka message key, Pulsar ordering key): the event's
//     AggregateID method ([Event]); the aggregate type and the tenant from the optional
//     [AggregateTyper] and [TenantEvent];
//   - event id (the consumers' dedup key): a new UUIDv7, also the Watermill message UUID;
//   - headers: the metadata the marshaler sets (cqrs.JSONMarshaler's "name", used by the
//     consumer to pick the handler) and whatever Config.OnPublish adds.
//
// A Publish without a transaction in the context fails with [ErrNoTx], naming the event.
package eventbus

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/components/cqrs"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/outboxkit/outboxkit/outbox"
)

// ErrNoTx is wrapped by the error of a Publish whose context carries no transaction: the bus
// never writes outside the caller's transaction.
var ErrNoTx = errors.New("no database transaction in the context (add it with eventbus.WithTx or eventbus.WithPgxTx)")

// Event is what the bus needs from every event it publishes beyond its payload: the id of the
// aggregate the event is about. It is the ordering and partitioning key; events of one aggregate
// reach the broker in commit order. It must not be empty.
type Event interface {
	AggregateID() string
}

// AggregateTyper is implemented by events that name the kind of their aggregate, such as
// "order". The aggregate type is part of the ordering key; without it, it is empty.
type AggregateTyper interface {
	AggregateType() string
}

// TenantEvent is implemented by events that belong to a tenant. The tenant id is part of the
// ordering key and lets a forwarder serve only some tenants; an empty one means no tenant.
type TenantEvent interface {
	TenantID() string
}

// Config configures the event bus built by [New]. Writer, Marshaler and GeneratePublishTopic
// are required.
type Config struct {
	// Writer stores the events in its outbox table. Required.
	Writer *outbox.Writer
	// Marshaler encodes events into message payloads and names them. Required; use the same
	// marshaler in the consumers' cqrs.EventProcessor (for example
	// cqrs.JSONMarshaler{GenerateName: cqrs.StructName}).
	Marshaler cqrs.CommandEventMarshaler
	// GeneratePublishTopic returns the destination topic of an event. Required. Keep the events
	// of one aggregate on one topic when consumers must see them in order: order is kept per
	// key within a topic.
	GeneratePublishTopic cqrs.GenerateEventPublishTopicFn
	// OnPublish, when set, is called after the bus set the outbox fields and before the event is
	// written; it may add metadata (headers). Its error aborts the Publish. Default: none.
	OnPublish cqrs.OnEventSendFn
	// Logger receives the event bus's logs. Default: none.
	Logger watermill.LoggerAdapter
}

func (c *Config) setDefaults() {
	if c.Logger == nil {
		c.Logger = watermill.NopLogger{}
	}
}

// Validate checks the configuration; the error names every missing field.
func (c Config) Validate() error {
	var errs []error
	if c.Writer == nil {
		errs = append(errs, errors.New("eventbus: Config.Writer is required"))
	}
	if c.Marshaler == nil {
		errs = append(errs, errors.New("eventbus: Config.Marshaler is required"))
	}
	if c.GeneratePublishTopic == nil {
		errs = append(errs, errors.New("eventbus: Config.GeneratePublishTopic is required"))
	}
	return errors.Join(errs...)
}

// New returns a Watermill *cqrs.EventBus whose Publish(ctx, event) writes event into the outbox
// through the transaction in ctx (see [WithTx], [WithPgxTx]). Every event must implement
// [Event]. The bus holds no connection and is safe for concurrent use.
func New(config Config) (*cqrs.EventBus, error) {
	config.setDefaults()
	if err := config.Validate(); err != nil {
		return nil, err
	}
	fields := outboxFields{onPublish: config.OnPublish}
	bus, err := cqrs.NewEventBusWithConfig(&txPublisher{writer: config.Writer}, cqrs.EventBusConfig{
		GeneratePublishTopic: config.GeneratePublishTopic,
		OnPublish:            fields.set,
		Marshaler:            config.Marshaler,
		Logger:               config.Logger,
	})
	if err != nil {
		return nil, fmt.Errorf("eventbus: %w", err)
	}
	return bus, nil
}

// txKey is the context key of the transaction.
type txKey struct{}

// WithTx returns a copy of ctx carrying the database/sql transaction tx: events published with
// it are written through tx and commit or roll back with it. A nil tx carries no transaction
// (hiding one an outer context carried).
func WithTx(ctx context.Context, tx *sql.Tx) context.Context {
	if tx == nil {
		return context.WithValue(ctx, txKey{}, nil)
	}
	return context.WithValue(ctx, txKey{}, wsql.TxFromStdSQL(tx))
}

// WithPgxTx is [WithTx] for a native pgx transaction (PostgreSQL).
func WithPgxTx(ctx context.Context, tx pgx.Tx) context.Context {
	if tx == nil {
		return context.WithValue(ctx, txKey{}, nil)
	}
	return context.WithValue(ctx, txKey{}, wsql.TxFromPgx(tx))
}

// txFrom returns the transaction ctx carries.
func txFrom(ctx context.Context) (wsql.ContextExecutor, bool) {
	tx, ok := ctx.Value(txKey{}).(wsql.ContextExecutor)
	return tx, ok && tx != nil
}

// outboxFields is the bus's OnPublish: it checks the transaction and sets the outbox metadata
// from the event before the user's OnPublish runs.
type outboxFields struct {
	onPublish cqrs.OnEventSendFn
}

func (f outboxFields) set(p cqrs.OnEventSendParams) error {
	if _, ok := txFrom(p.Message.Context()); !ok {
		return fmt.Errorf("eventbus: publish %s: %w", p.EventName, ErrNoTx)
	}
	if isNil(p.Event) {
		return fmt.Errorf("eventbus: publish %s: the event is nil", p.EventName)
	}
	ev, ok := p.Event.(Event)
	if !ok {
		return fmt.Errorf("eventbus: publish %s: %T does not implement eventbus.Event (AggregateID() string), so it has no ordering key",
			p.EventName, p.Event)
	}
	aggregateID := ev.AggregateID()
	if aggregateID == "" {
		return fmt.Errorf("eventbus: publish %s: %T.AggregateID() returned an empty aggregate id", p.EventName, p.Event)
	}
	id, err := uuid.NewV7()
	if err != nil {
		return fmt.Errorf("eventbus: publish %s: generate event id: %w", p.EventName, err)
	}
	msg := p.Message
	msg.UUID = id.String()
	msg.Metadata.Set(outbox.MetadataEventID, msg.UUID)
	msg.Metadata.Set(outbox.MetadataEventType, p.EventName)
	msg.Metadata.Set(outbox.MetadataAggregateID, aggregateID)
	if t, ok := p.Event.(AggregateTyper); ok {
		msg.Metadata.Set(outbox.MetadataAggregateType, t.AggregateType())
	}
	if t, ok := p.Event.(TenantEvent); ok && t.TenantID() != "" {
		msg.Metadata.Set(outbox.MetadataTenantID, t.TenantID())
	}
	if f.onPublish != nil {
		return f.onPublish(p)
	}
	return nil
}

// isNil reports whether v is nil or a nil pointer, map, slice, func, channel or interface.
func isNil(v any) bool {
	if v == nil {
		return true
	}
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return r.IsNil()
	}
	return false
}

// txPublisher is the message.Publisher under the event bus: it writes the messages through
// the outbox Writer's publisher bound to the transaction of the first message's context (the
// event bus publishes one message per call).
type txPublisher struct {
	writer *outbox.Writer
}

func (p *txPublisher) Publish(topic string, msgs ...*message.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	first := msgs[0]
	eventType := first.Metadata.Get(outbox.MetadataEventType)
	tx, ok := txFrom(first.Context())
	if !ok {
		return fmt.Errorf("eventbus: publish %s: %w", eventType, ErrNoTx)
	}
	pub, err := p.writer.Publisher(tx)
	if err != nil {
		return fmt.Errorf("eventbus: publish %s: %w", eventType, err)
	}
	if err := pub.Publish(topic, msgs...); err != nil {
		return fmt.Errorf("eventbus: write %s event %s (aggregate %q) to topic %q: %w",
			eventType, first.UUID, first.Metadata.Get(outbox.MetadataAggregateID), topic, err)
	}
	return nil
}

// Close does nothing: the publisher holds no resources.
func (p *txPublisher) Close() error { return nil }
