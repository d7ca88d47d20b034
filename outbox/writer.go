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
	// DisableKeyLocks turns off the per-key lock writers take so that events of one key
	// (tenant, aggregate type, aggregate id) get sequence numbers in commit order even when
	// several transactions write that key at once. Default: locks on. Turn them off only when the
	// application already serializes those transactions, for example because each one updates
	// the aggregate's own row BEFORE writing its events (the row lock then orders them); it
	// saves a share of the write cost (measured in docs/benchmarks.md).
	DisableKeyLocks bool
	// Logger receives watermill-sql's trace logs. Default: none.
	Logger watermill.LoggerAdapter
	// Mode is where events go: [ModeTable] (the default) stores rows in the outbox table,
	// [ModeWAL] (PostgreSQL only) emits them as transactional logical decoding messages for the
	// wal source, with no row (docs/wal.md). Every write method follows it.
	Mode Mode
	// WALSlot is the logical replication slot the wal relay reads ([ModeWAL] only, and required
	// there; [CreateWALSlot] makes it). Each emit checks, in its own statement, that the slot
	// exists and is not invalidated, and fails naming it otherwise: an event that no slot keeps
	// would be lost silently (docs/wal.md, "The slot").
	WALSlot string
	// Topics is the broker's rule for topic names, checked at write time besides ValidateTopic
	// (KafkaTopics for Kafka). Default: none, ValidateTopic only, which allows what watermill-sql
	// and Pulsar take, including : and $ that Kafka refuses (the relay would dead-letter those
	// events).
	Topics TopicRule
}

func (c *Config) setDefaults() {
	if c.Table == "" {
		c.Table = DefaultTable
	}
	if c.Mode == "" {
		c.Mode = ModeTable
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
	switch c.Mode {
	case "", ModeTable:
	case ModeWAL:
		if c.Dialect != Postgres {
			return fmt.Errorf("outbox: Config.Mode %q needs the postgres dialect, not %s", c.Mode, c.Dialect)
		}
		if c.WALSlot == "" {
			return fmt.Errorf("outbox: Config.WALSlot is required with Config.Mode %q: the replication slot the wal relay reads, "+
				"which every emit checks (outbox.CreateWALSlot, outboxkit wal-slot create)", c.Mode)
		}
		if err := ValidateSlotName(c.WALSlot); err != nil {
			return fmt.Errorf("outbox: Config.WALSlot: %w", err)
		}
	default:
		return fmt.Errorf("outbox: Config.Mode: unknown mode %q (want %q or %q)", c.Mode, ModeTable, ModeWAL)
	}
	if c.WALSlot != "" && c.Mode != ModeWAL {
		return fmt.Errorf("outbox: Config.WALSlot %q is set but Config.Mode is %q: the slot belongs to %q", c.WALSlot, c.Mode, ModeWAL)
	}
	return nil
}

// Writer stores events in the outbox inside the caller's transaction. It holds no connection
// and is safe for concurrent use.
type Writer struct {
	config  Config
	table   Table
	adapter *SchemaAdapter
	// emitSQL is the statement that emits one wal envelope ([ModeWAL]).
	emitSQL string
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
	adapter := NewSchemaAdapter(table, AdapterConfig{MaxPayloadBytes: config.MaxPayloadBytes, DisableKeyLocks: config.DisableKeyLocks})
	return &Writer{config: config, table: table, adapter: adapter, emitSQL: emitStatement(table, config.WALSlot)}, nil
}

// Table returns the writer's table.
func (w *Writer) Table() Table { return w.table }

// SchemaAdapter returns the watermill-sql SchemaAdapter the writer uses in [ModeTable]. It
// always writes rows: in [ModeWAL], publish through [Writer.Publisher] instead.
func (w *Writer) SchemaAdapter() *SchemaAdapter { return w.adapter }

// Write stores events in the outbox through tx, a transaction the caller commits or rolls back
// together with its business rows. Use [wsql.TxFromStdSQL] or [wsql.TxFromPgx] to adapt a
// transaction, or the [Writer.WriteTx] and [Writer.WritePgx] shortcuts. Events without an ID get a
// UUIDv7 (written back into the slice), without CreatedAt the current time. Every event is
// validated before any SQL runs, so a validation error leaves the transaction usable. When ctx
// carries an OpenTelemetry span, its W3C trace context is stored with each event in the headers
// [HeaderTraceParent] and [HeaderTraceState] (docs/observability.md).
func (w *Writer) Write(ctx context.Context, tx wsql.ContextExecutor, events ...Event) error {
	if len(events) == 0 {
		return nil
	}
	if err := w.prepare(events); err != nil {
		return err
	}
	if tx == nil {
		return errors.New("outbox: Write: the transaction is nil")
	}
	if w.config.Mode == ModeWAL {
		return w.writeWAL(ctx, tx, events)
	}
	return w.insert(ctx, tx, events)
}

// insert stores events (prepared) as rows of the table through tx.
func (w *Writer) insert(ctx context.Context, tx wsql.ContextExecutor, events []Event) error {
	msgs := make(message.Messages, len(events))
	for i := range events {
		e := &events[i]
		msg := e.ToMessage()
		msg.Metadata.Set(MetadataTopic, e.Topic)
		msg.SetContext(ctx)
		msgs[i] = msg
	}
	pub, err := w.tablePublisher(tx)
	if err != nil {
		return err
	}
	return pub.Publish(events[0].Topic, msgs...)
}

// WriteTx is [Writer.Write] for a database/sql transaction.
func (w *Writer) WriteTx(ctx context.Context, tx *sql.Tx, events ...Event) error {
	if tx == nil {
		return w.Write(ctx, nil, events...) // validates, then refuses the nil transaction
	}
	return w.Write(ctx, wsql.TxFromStdSQL(tx), events...)
}

// WritePgx is [Writer.Write] for a native pgx transaction.
func (w *Writer) WritePgx(ctx context.Context, tx pgx.Tx, events ...Event) error {
	return w.Write(ctx, wsql.TxFromPgx(tx), events...)
}

// QueuePgx validates the events and queues their INSERT into a pgx batch the caller sends
// inside its transaction (PostgreSQL only). The outbox write then shares the round trip of the
// caller's own statements instead of adding one: the cheapest way to write events. The batch
// result of the queued statement reports an INSERT error like any other queued query. It takes
// no context, so it stores no trace context; use [Writer.WritePgx] for traced writes. In
// [ModeWAL] it queues the emit of the events' message (one per 1,000 events) instead.
func (w *Writer) QueuePgx(batch *pgx.Batch, events ...Event) error {
	if w.table.dialect != Postgres {
		return fmt.Errorf("outbox: QueuePgx needs the postgres dialect, the writer is %s", w.table.dialect)
	}
	if len(events) == 0 {
		return nil
	}
	if w.config.Mode == ModeWAL {
		return w.queueWAL(batch, events)
	}
	if len(events) > maxRowsPerInsert {
		return fmt.Errorf("outbox: %d events in one queued INSERT, the limit is %d", len(events), maxRowsPerInsert)
	}
	if err := w.prepare(events); err != nil {
		return err
	}
	q, err := w.adapter.insertQuery(events)
	if err != nil {
		return err
	}
	batch.Queue(q.Query, q.Args...)
	return nil
}

// prepare fills in missing ids and creation times and validates every event.
func (w *Writer) prepare(events []Event) error {
	now := time.Now()
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
		if w.config.Mode == ModeWAL {
			if err := e.validateWAL(); err != nil {
				return err
			}
		}
		if w.config.Topics != nil {
			if err := w.config.Topics.CheckTopic(e.Topic); err != nil {
				return fmt.Errorf("outbox: event %s: %w", e.ID, err)
			}
		}
	}
	return nil
}

// Publisher returns a Watermill message.Publisher that writes into the outbox through tx (a
// transaction, or a *sql.DB adapted with wsql.BeginnerFromStdSQL for auto-committed writes). It
// is watermill-sql v4's sql.Publisher with outboxkit's SchemaAdapter: each message needs a UUID
// and the metadata [MetadataAggregateID] and [MetadataEventType]; the Publish topic is the
// destination topic unless a message names its own in [MetadataTopic]. Code that already
// speaks Watermill (for example its CQRS event bus) can publish into the outbox with it. The
// trace context of each message's own context (msg.Context()) is stored as in [Writer.Write].
// In [ModeWAL] the publisher emits the messages' events as [Writer.Write] does, through tx.
func (w *Writer) Publisher(tx wsql.ContextExecutor) (message.Publisher, error) {
	if w.config.Mode == ModeWAL {
		if tx == nil {
			return nil, errors.New("outbox: Publisher: the transaction is nil")
		}
		return &walPublisher{writer: w, tx: tx}, nil
	}
	return w.tablePublisher(tx)
}

// tablePublisher is [Writer.Publisher] in [ModeTable]: it inserts rows.
func (w *Writer) tablePublisher(tx wsql.ContextExecutor) (message.Publisher, error) {
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
	for _, msg := range msgs {
		injectTraceContext(msg.Context(), msg.Metadata)
	}
	rows := p.adapter.maxRows()
	for start := 0; start < len(msgs); start += rows {
		chunk := msgs[start:min(start+rows, len(msgs))]
		if p.adapter.table.dialect == MySQL && p.adapter.lockKeys {
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
