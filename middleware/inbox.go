package middleware

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/outbox"
)

// Dialect names the SQL database the inbox table lives in: the outbox's own dialect type, so
// one value configures both sides of a consume-then-publish handler.
type Dialect = outbox.Dialect

// Supported dialects.
const (
	// DialectPostgres is PostgreSQL through database/sql (for example the pgx stdlib driver).
	DialectPostgres = outbox.Postgres
	// DialectMySQL is MariaDB or MySQL through github.com/go-sql-driver/mysql (the tests run
	// MariaDB 10.11; MySQL 8 is expected to work but is not tested).
	DialectMySQL = outbox.MySQL
	// DialectSQLite is SQLite, for example modernc.org/sqlite.
	DialectSQLite = outbox.SQLite
)

// Defaults of InboxConfig.
const (
	DefaultInboxTable      = "outboxkit_inbox"
	DefaultEventIDKey      = "event_id"
	DefaultPruneBatchLimit = 1000

	// MaxConsumerNameLen and MaxEventIDLen are the column sizes of the inbox table, in bytes.
	MaxConsumerNameLen = 128
	MaxEventIDLen      = 255
)

// ErrEmptyEventID is returned by the inbox handler for a message that has neither an event id
// in its metadata nor a UUID: such a message could not be deduplicated, so it is never processed.
var ErrEmptyEventID = errors.New("message has no event id and no UUID")

// TxHandler handles one message inside the inbox transaction. Every database write it makes
// through tx commits atomically with the inbox row that marks the event as processed. It must not
// commit or roll back tx itself. Writing new events on tx with the outbox package makes
// consume-then-publish atomic as well.
type TxHandler func(ctx context.Context, tx *sql.Tx, msg *message.Message) ([]*message.Message, error)

// InboxConfig configures an Inbox.
type InboxConfig struct {
	// DB is the consumer's own database, holding both the inbox table and the handler's data. Required.
	DB *sql.DB
	// Dialect of DB. Required.
	Dialect Dialect
	// Table is the inbox table, "table" or "schema.table", validated with
	// outbox.ValidateIdentifier (at most 48 characters). Its applied migrations are recorded in
	// Table + "_migrations". Default: DefaultInboxTable.
	Table string
	// ConsumerName identifies the consuming service or handler; the same event id is processed
	// once per consumer name, so give every logical consumer its own. Required, at most
	// MaxConsumerNameLen bytes.
	ConsumerName string
	// EventIDKey is the metadata key carrying the event id; when it is absent the message UUID is
	// used. Default: DefaultEventIDKey ("event_id"), the key outboxkit's relay sets.
	EventIDKey string
	// TxOptions are passed to BeginTx. Default nil: the database's default isolation level,
	// which is what the inbox needs (the primary key, not the isolation level, stops duplicates).
	TxOptions *sql.TxOptions
	// Now returns the processed-at time. Default time.Now. Stored in UTC.
	Now func() time.Time
}

func (c *InboxConfig) setDefaults() {
	if c.Table == "" {
		c.Table = DefaultInboxTable
	}
	if c.EventIDKey == "" {
		c.EventIDKey = DefaultEventIDKey
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Validate reports the first invalid field, by name.
func (c InboxConfig) Validate() error {
	if c.DB == nil {
		return errors.New("InboxConfig.DB is nil")
	}
	switch c.Dialect {
	case DialectPostgres, DialectMySQL, DialectSQLite:
	default:
		return fmt.Errorf("InboxConfig.Dialect %q is not supported: want %q, %q or %q",
			c.Dialect, DialectPostgres, DialectMySQL, DialectSQLite)
	}
	if err := outbox.ValidateIdentifier(c.Table); err != nil {
		return fmt.Errorf("InboxConfig.Table: %w", err)
	}
	if c.ConsumerName == "" {
		return errors.New("InboxConfig.ConsumerName is empty")
	}
	if len(c.ConsumerName) > MaxConsumerNameLen || !utf8.ValidString(c.ConsumerName) {
		return fmt.Errorf("InboxConfig.ConsumerName %q: want valid UTF-8 of at most %d bytes, got %d bytes",
			c.ConsumerName, MaxConsumerNameLen, len(c.ConsumerName))
	}
	return nil
}

// InboxStats counts what an Inbox's handlers did since it was created.
type InboxStats struct {
	// Processed counts events whose handler ran and whose transaction committed.
	Processed uint64
	// Duplicates counts deliveries acknowledged without calling the handler, because the event
	// had already been processed by this consumer.
	Duplicates uint64
}

// Inbox is an idempotent consumer: it records each processed event id in an inbox table in the
// same transaction as the handler's own writes, so a redelivered event has no second effect.
type Inbox struct {
	config InboxConfig
	logger watermill.LoggerAdapter

	insertSQL string
	pruneSQL  string

	processed  atomic.Uint64
	duplicates atomic.Uint64
}

// NewInbox checks config and returns an Inbox. It does not touch the database: call Migrate to
// create the table. A nil logger logs nothing.
func NewInbox(config InboxConfig, logger watermill.LoggerAdapter) (*Inbox, error) {
	config.setDefaults()
	if err := config.Validate(); err != nil {
		return nil, fmt.Errorf("invalid inbox config: %w", err)
	}
	if logger == nil {
		logger = watermill.NopLogger{}
	}
	i := &Inbox{config: config, logger: logger}
	t := config.Table
	switch config.Dialect {
	case DialectPostgres:
		i.insertSQL = "INSERT INTO " + t + " (consumer_name, event_id, processed_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING"
		i.pruneSQL = "DELETE FROM " + t + " WHERE (consumer_name, event_id) IN (SELECT consumer_name, event_id FROM " + t +
			" WHERE consumer_name = $1 AND processed_at < $2 LIMIT $3)"
	case DialectMySQL:
		i.insertSQL = "INSERT IGNORE INTO " + t + " (consumer_name, event_id, processed_at) VALUES (?, ?, ?)"
		i.pruneSQL = "DELETE FROM " + t + " WHERE consumer_name = ? AND processed_at < ? ORDER BY processed_at LIMIT ?"
	case DialectSQLite:
		i.insertSQL = "INSERT OR IGNORE INTO " + t + " (consumer_name, event_id, processed_at) VALUES (?, ?, ?)"
		i.pruneSQL = "DELETE FROM " + t + " WHERE rowid IN (SELECT rowid FROM " + t +
			" WHERE consumer_name = ? AND processed_at < ? LIMIT ?)"
	}
	return i, nil
}

//go:embed migrations
var migrationFiles embed.FS

// MigrationsTable is the table recording the inbox's applied migrations: Table + "_migrations".
func (i *Inbox) MigrationsTable() string { return i.config.Table + "_migrations" }

// Migrations returns the inbox's schema migrations, rendered for its dialect and table, in
// version order: what Migrate applies.
func (i *Inbox) Migrations() ([]outbox.Migration, error) {
	schema, bare, found := strings.Cut(i.config.Table, ".")
	if !found {
		schema, bare = "", i.config.Table
	}
	index := indexName(bare)
	qualifiedIndex := index
	if schema != "" {
		qualifiedIndex = schema + "." + index
	}
	migrations, err := outbox.LoadMigrations(migrationFiles, "migrations/"+string(i.config.Dialect), map[string]string{
		"Table": i.config.Table, "BareTable": bare, "Index": index, "QualifiedIndex": qualifiedIndex,
	})
	if err != nil {
		return nil, fmt.Errorf("inbox table %s: %w", i.config.Table, err)
	}
	return migrations, nil
}

// maxIdentifierLen is PostgreSQL's identifier limit (NAMEDATALEN-1), the smallest of the three
// databases; MySQL allows 64 characters and SQLite has no limit.
const maxIdentifierLen = 63

// indexName derives the name of the processed-at index from the bare table name, shortened with
// a hash when the result would pass the 63-character identifier limit.
func indexName(bare string) string {
	const suffix = "_processed_at_idx"
	if len(bare)+len(suffix) <= maxIdentifierLen {
		return bare + suffix
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(bare))
	hash := fmt.Sprintf("_%08x", h.Sum32())
	return bare[:maxIdentifierLen-len(suffix)-len(hash)] + hash + suffix
}

// Migrate creates or upgrades the inbox table and its index, applying each embedded migration
// not yet recorded in MigrationsTable. It runs through outboxkit's one migration runner
// (outbox.RunMigrations), so it is idempotent and locked on every dialect: run it at every start,
// from as many instances as start together. An inbox table created before migrations were
// recorded is kept as it is.
func (i *Inbox) Migrate(ctx context.Context) error {
	migrations, err := i.Migrations()
	if err != nil {
		return err
	}
	if err := outbox.RunMigrations(ctx, i.config.DB, i.config.Dialect, i.MigrationsTable(), migrations); err != nil {
		return fmt.Errorf("migrate inbox table %s: %w", i.config.Table, err)
	}
	return nil
}

// EventID returns the id the inbox deduplicates msg by: the metadata value under
// InboxConfig.EventIDKey if set, else the message UUID. It fails when both are empty or the id is
// longer than MaxEventIDLen bytes. Handler marks these errors Permanent.
func (i *Inbox) EventID(msg *message.Message) (string, error) {
	id := msg.Metadata.Get(i.config.EventIDKey)
	if id == "" {
		id = msg.UUID
	}
	if id == "" {
		return "", fmt.Errorf("inbox %s: metadata %q: %w", i.config.ConsumerName, i.config.EventIDKey, ErrEmptyEventID)
	}
	if len(id) > MaxEventIDLen || !utf8.ValidString(id) {
		// Checked here because MySQL's INSERT IGNORE would truncate a long id with a warning
		// instead of failing, and two truncated ids could then look like duplicates.
		return "", fmt.Errorf("inbox %s: event id %q: want valid UTF-8 of at most %d bytes, got %d bytes",
			i.config.ConsumerName, id, MaxEventIDLen, len(id))
	}
	return id, nil
}

// Handler wraps h into a Watermill handler that processes each event id at most once for this
// consumer. For every delivery it begins a transaction on the consumer's database, inserts
// (consumer name, event id) into the inbox table with "insert, ignore on conflict", and:
//
//   - if the row already existed, the event was processed before: it rolls back, counts a
//     duplicate and acknowledges the message without calling h;
//   - otherwise it calls h with the transaction, commits, and returns h's messages.
//
// Under [Tracing], the verdict is recorded on the delivery's span (outboxkit.inbox.duplicate,
// and an event for a skipped duplicate).
//
// An error from h, or a failed commit, rolls everything back (inbox row included) and is returned,
// so the message is nacked (or retried by middleware) and its redelivery runs h again. A delivery
// racing with another delivery of the same event blocks on the inbox row until the first
// transaction ends. Messages h returns are published by the Router after the commit and are not
// deduplicated: if their publishing fails, the redelivery is a duplicate and they are not produced
// again. Write follow-up events to an outbox on tx instead when they must not be lost.
func (i *Inbox) Handler(h TxHandler) message.HandlerFunc {
	return func(msg *message.Message) ([]*message.Message, error) {
		ctx := msg.Context()
		id, err := i.EventID(msg)
		if err != nil {
			// Retrying cannot give the message an id: RetryThenPoison poisons it at once.
			return nil, Permanent(err)
		}
		tx, err := i.config.DB.BeginTx(ctx, i.config.TxOptions)
		if err != nil {
			return nil, fmt.Errorf("inbox %s: event %s: begin transaction: %w", i.config.ConsumerName, id, err)
		}
		done := false
		defer func() {
			if !done { // also on a panic in h
				_ = tx.Rollback()
			}
		}()
		res, err := tx.ExecContext(ctx, i.insertSQL, i.config.ConsumerName, id, i.config.Dialect.TimeArg(i.config.Now()))
		if err != nil {
			return nil, fmt.Errorf("inbox %s: event %s: insert into %s: %w", i.config.ConsumerName, id, i.config.Table, err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return nil, fmt.Errorf("inbox %s: event %s: rows affected: %w", i.config.ConsumerName, id, err)
		}
		traceInbox(ctx, i.config.ConsumerName, n == 0)
		if n == 0 {
			i.duplicates.Add(1)
			i.logger.Debug("Inbox: duplicate event skipped", watermill.LogFields{
				"consumer": i.config.ConsumerName, "event_id": id, "message_uuid": msg.UUID,
			})
			return nil, nil
		}
		produced, err := h(ctx, tx, msg)
		if err != nil {
			return nil, fmt.Errorf("inbox %s: event %s: handler: %w", i.config.ConsumerName, id, err)
		}
		done = true
		if err := tx.Commit(); err != nil {
			return nil, fmt.Errorf("inbox %s: event %s: commit: %w", i.config.ConsumerName, id, err)
		}
		i.processed.Add(1)
		return produced, nil
	}
}

// Stats returns the counters of this Inbox's handlers.
func (i *Inbox) Stats() InboxStats {
	return InboxStats{Processed: i.processed.Load(), Duplicates: i.duplicates.Load()}
}

// PruneBefore deletes this consumer's inbox rows processed before before, in batches of at most
// limit rows (0 means DefaultPruneBatchLimit), each batch its own short statement so that no long
// lock is held. It returns the number of rows deleted. A redelivery of a pruned event is processed
// again, so keep rows for longer than the broker can redeliver (retention, consumer lag, replays).
func (i *Inbox) PruneBefore(ctx context.Context, before time.Time, limit int) (int64, error) {
	if limit < 0 {
		return 0, fmt.Errorf("inbox %s: prune limit %d is negative", i.config.ConsumerName, limit)
	}
	if limit == 0 {
		limit = DefaultPruneBatchLimit
	}
	var total int64
	for {
		res, err := i.config.DB.ExecContext(ctx, i.pruneSQL, i.config.ConsumerName, i.config.Dialect.TimeArg(before), limit)
		if err != nil {
			return total, fmt.Errorf("inbox %s: prune %s before %s: %w", i.config.ConsumerName, i.config.Table, before.UTC().Format(time.RFC3339), err)
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, fmt.Errorf("inbox %s: prune %s: rows affected: %w", i.config.ConsumerName, i.config.Table, err)
		}
		total += n
		if n < int64(limit) {
			return total, nil
		}
		if err := ctx.Err(); err != nil {
			return total, fmt.Errorf("inbox %s: prune %s: %w", i.config.ConsumerName, i.config.Table, err)
		}
	}
}

// TxConsumerHandler is a TxHandler that produces no messages, for Router.AddConsumerHandler.
type TxConsumerHandler func(ctx context.Context, tx *sql.Tx, msg *message.Message) error

// ConsumerHandler is Handler for handlers that produce no messages: it returns a
// message.NoPublishHandlerFunc for Router.AddConsumerHandler, with the same guarantees.
func (i *Inbox) ConsumerHandler(h TxConsumerHandler) message.NoPublishHandlerFunc {
	wrapped := i.Handler(func(ctx context.Context, tx *sql.Tx, msg *message.Message) ([]*message.Message, error) {
		return nil, h(ctx, tx, msg)
	})
	return func(msg *message.Message) error {
		_, err := wrapped(msg)
		return err
	}
}
