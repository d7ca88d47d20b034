// Package outbox is the write side of outboxkit: it stores events in an outbox table inside the
// caller's own database transaction, so an event row exists if and only if the business
// transaction that wrote it committed.
//
// The table, its indexes and the relay's lease tables are created by [Migrate]. Events are
// written with a [Writer] (the typed API) or through [Writer.Publisher], a Watermill
// message.Publisher built on watermill-sql v4's sql.Publisher with outboxkit's [SchemaAdapter],
// for code that already speaks Watermill (for example Watermill's CQRS event bus). Both paths
// write the same rows: many events in one call become one multi-row INSERT, validated before any
// SQL runs.
//
// Per-key order: events of one key (tenant, aggregate type, aggregate id) get increasing sequence
// numbers in the order their transactions commit. On PostgreSQL the INSERT takes a
// transaction-scoped advisory lock per key before the sequence is drawn; on MySQL/MariaDB a
// row in a small key-lock table plays the same role; SQLite has a single writer.
// Two transactions writing events of the same key therefore serialize, which is what keeps the
// relay from publishing a later event before an earlier one commits (Watermill issue #311).
package outbox
