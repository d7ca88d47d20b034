package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Config configures a [Writer].
type Config struct {
	// Dialect of the database. Required.
	Dialect Dialect
	// Table is the outbox table name. Default: [DefaultTable].
	Table string
	// MaxPayloadBytes rejects larger payloads before any SQL runs. Default:
	// [DefaultMaxPayloadBytes], a little under Kafka's default 1 MiB message limit; a negative
	// value disables the check.
	MaxPayloadBytes int
	// Logger receives watermill-sql's trace logs. Default: none.
	Logger watermill.LoggerAdapter
}

func (c *Config) setDefaults() {
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if c.MaxPayloadBytes == 0 {
		c.MaxPayloadBytes = DefaultMaxPayloadBytes
	}
	if c.Logger == nil {
		c.Logger = watermill.NopLogger{}
	}
}

// Validate checks the configuration; errors name the bad field and value.
func (c Config) Validate() error {
	if c.Dialect == "" {
		return errors.New("outbox: Config.Dialect is required (postgres, mysql or sqlite)")
	}
	if err := c.Dialect.Validate(); err != nil {
		return fmt.Errorf("outbox: Config.Dialect: %w", err)
	}
	if _, err := NewTable(c.Dialect, c.Table); err != nil {
		return fmt.Errorf("outbox: Config.Table: %w", err)
	}
	return nil
}

// Writer stores events in the outbox inside the caller's transaction. It holds no connection
// and is safe for concurrent use.
type Writer struct {
	config  Config
	table   Table
	adapter *SchemaAdapter
}

// NewWriter validates config and returns a Writer.
func NewWriter(config Config) (*Writer, error) {
	config.setDefaults()
	if err := config.Validate(); err != nil {
		return nil, err
	}
	table, err := NewTable(config.Dialect, config.Table)
	if err != nil {
		return nil, err
	}
	maxPayload := config.MaxPayloadBytes
	if maxPayload < 0 {
		maxPayload = 0
	}
	return &Writer{config: config, table: table, adapter: NewSchemaAdapter(table, maxPayload)}, nil
}

// Table returns the writer's table.
func (w *Writer) Table() Table { return w.table }

// SchemaAdapter returns the watermill-sql SchemaAdapter the writer uses.
func (w *Writer) SchemaAdapter() *SchemaAdapter { return w.adapter }

// Write stores events in the outbox through tx, a transaction the caller commits or rolls back
// together with its business rows. Use [wsql.TxFromStdSQL] or [wsql.TxFromPgx] to adapt a
// transaction, or the [Writer.WriteTx] and [Writer.WritePgx] shortcuts. Events without an ID get a
// UUIDv7 (written back into the slice), without CreatedAt the current time. Every event is
// validated before any SQL runs, so a validation error leaves the transaction usable.
func (w *Writer) Write(ctx context.Context, tx wsql.ContextExecutor, events ...Event) error {
	if len(events) == 0 {
		return nil
	}
	now := time.Now()
	msgs := make(message.Messages, len(events))
	for i := range events {
		e := &events[i]
		if e.ID == uuid.Nil {
			id, err := uuid.NewV7()
			if err != nil {
				return fmt.Errorf("outbox: generate event id: %w", err)
			}
			e.ID = id
		}
		if e.CreatedAt.IsZero() {
			e.CreatedAt = now
		}
		if err := e.Validate(w.adapter.maxPayloadBytes); err != nil {
			return err
		}
		msg := e.ToMessage()
		msg.Metadata.Set(MetadataTopic, e.Topic)
		msg.SetContext(ctx)
		msgs[i] = msg
	}
	pub, err := w.Publisher(tx)
	if err != nil {
		return err
	}
	return pub.Publish(events[0].Topic, msgs...)
}

// WriteTx is [Writer.Write] for a database/sql transaction.
func (w *Writer) WriteTx(ctx context.Context, tx *sql.Tx, events ...Event) error {
	return w.Write(ctx, wsql.TxFromStdSQL(tx), events...)
}

// WritePgx is [Writer.Write] for a native pgx transaction.
func (w *Writer) WritePgx(ctx context.Context, tx pgx.Tx, events ...Event) error {
	return w.Write(ctx, wsql.TxFromPgx(tx), events...)
}

// Publisher returns a Watermill message.Publisher that writes into the outbox through tx (a
// transaction, or a *sql.DB adapted with wsql.BeginnerFromStdSQL for auto-committed writes). It
// is watermill-sql v4's sql.Publisher with outboxkit's SchemaAdapter: each message needs a UUID
// and the metadata [MetadataAggregateID] and [MetadataEventType]; the Publish topic is the
// destination topic unless a message names its own in [MetadataTopic]. Code that already
// speaks Watermill (for example its CQRS event bus) can publish into the outbox with it.
func (w *Writer) Publisher(tx wsql.ContextExecutor) (message.Publisher, error) {
	pub, err := wsql.NewPublisher(tx, wsql.PublisherConfig{SchemaAdapter: w.adapter}, w.config.Logger)
	if err != nil {
		return nil, fmt.Errorf("outbox: create watermill-sql publisher: %w", err)
	}
	return &txPublisher{pub: pub, tx: tx, adapter: w.adapter}, nil
}

// txPublisher adds what one SQL statement cannot do on every dialect around watermill-sql's
// publisher: chunking very large calls, and MySQL's per-key lock statement.
type txPublisher struct {
	pub     *wsql.Publisher
	tx      wsql.ContextExecutor
	adapter *SchemaAdapter
}

func (p *txPublisher) Publish(topic string, msgs ...*message.Message) error {
	for start := 0; start < len(msgs); start += maxRowsPerInsert {
		chunk := msgs[start:min(start+maxRowsPerInsert, len(msgs))]
		if p.adapter.table.dialect == MySQL {
			events, err := p.adapter.events(topic, chunk)
			if err != nil {
				return err
			}
			lock := p.adapter.keyLockQuery(events)
			rows, err := p.tx.QueryContext(chunk[0].Context(), lock.Query, lock.Args...)
			if err == nil {
				err = rows.Close()
			}
			if err != nil {
				return fmt.Errorf("outbox: lock ordering keys in %s: %w", p.adapter.table.KeyLocks(), err)
			}
		}
		if err := p.pub.Publish(topic, chunk...); err != nil {
			return fmt.Errorf("outbox: insert %d events into %s: %w", len(chunk), p.adapter.table, err)
		}
	}
	return nil
}

func (p *txPublisher) Close() error { return p.pub.Close() }
