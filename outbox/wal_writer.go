package outbox

import (
	"context"
	"fmt"
	"maps"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Mode says where a [Writer] puts events.
type Mode string

// The writer's modes.
const (
	// ModeTable stores each event as a row of the outbox table (the polling and cdc sources).
	ModeTable Mode = "table"
	// ModeWAL (PostgreSQL 14+) emits the events as one transactional logical decoding message,
	// pg_logical_emit_message(true, [Table.WALPrefix], envelope), that commits or rolls back with
	// the caller's transaction: no row, no index, no trigger, and no key lock (the wal source
	// orders a key's events by commit order from the WAL). The envelope is documented in
	// docs/wal.md. The table is still migrated: the wal source parks failing keys' events in it,
	// and a scheduled event (Event.DeliverAt) is written into it as a row, in the same
	// transaction, which the relay releases when it is due.
	ModeWAL Mode = "wal"
)

// emitStatement is the statement that emits one envelope ($1) with the table's prefix, guarded
// in the same statement: it emits only while slot exists as a logical slot that is not
// invalidated, and otherwise fails with the error of <table>_wal_refuse (schema v12), which
// names the slot, so the caller's transaction cannot commit an event no slot will read
// (docs/wal.md, "The slot"). pg_get_replication_slots() rather than the pg_replication_slots
// view, whose join with pg_database costs more than the rest of the check. The prefix, the
// table and the slot are validated identifiers, so they are safe as literals and names.
func emitStatement(table Table, slot string) string {
	return "SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_catalog.pg_get_replication_slots() AS s WHERE s.slot_name = '" + slot +
		"' AND s.datoid IS NOT NULL AND s.wal_status IS DISTINCT FROM 'lost') THEN pg_logical_emit_message(true, '" +
		table.WALPrefix() + "', $1::bytea) ELSE " + table.walRefuseFunction() + "('" + slot + "') END"
}

// emit writes the envelopes of events (prepared) through tx, one statement per envelope.
func (w *Writer) emit(ctx context.Context, tx wsql.ContextExecutor, events []Event) error {
	envelopes, err := walEnvelopes(events)
	if err != nil {
		return err
	}
	for _, env := range envelopes {
		if _, err := tx.ExecContext(ctx, w.emitSQL, env); err != nil {
			return fmt.Errorf("outbox: emit %d events as a logical decoding message (%s): %w", len(events), w.table.WALPrefix(), err)
		}
	}
	return nil
}

// splitScheduled separates the scheduled events (a DeliverAt) from the others, each in write
// order. In [ModeWAL] a scheduled event is a row of the table (status scheduled) rather than a
// message: the wal relay releases it from there when it is due (docs/scheduled.md), and
// Writer.Cancel and Reschedule find it there.
func splitScheduled(events []Event) (streamed, scheduled []Event) {
	for _, e := range events {
		if e.DeliverAt.IsZero() {
			streamed = append(streamed, e)
		} else {
			scheduled = append(scheduled, e)
		}
	}
	return streamed, scheduled
}

// writeWAL writes events (prepared) in [ModeWAL]: the scheduled ones as rows, the others as
// logical decoding messages. A write of scheduled events only emits nothing, so it does not
// check the slot: the table keeps them.
func (w *Writer) writeWAL(ctx context.Context, tx wsql.ContextExecutor, events []Event) error {
	streamed, scheduled := splitScheduled(events)
	if len(streamed) > 0 {
		if err := w.emit(ctx, tx, withTraceContext(ctx, streamed)); err != nil {
			return err
		}
	}
	if len(scheduled) > 0 {
		return w.insert(ctx, tx, scheduled)
	}
	return nil
}

// queueWAL validates events and queues, into batch, their envelopes' emits and the INSERT of
// the scheduled ones.
func (w *Writer) queueWAL(batch *pgx.Batch, events []Event) error {
	if err := w.prepare(events); err != nil {
		return err
	}
	streamed, scheduled := splitScheduled(events)
	if len(scheduled) > maxRowsPerInsert {
		return fmt.Errorf("outbox: %d scheduled events in one queued INSERT, the limit is %d", len(scheduled), maxRowsPerInsert)
	}
	if len(streamed) > 0 {
		envelopes, err := walEnvelopes(streamed)
		if err != nil {
			return err
		}
		for _, env := range envelopes {
			batch.Queue(w.emitSQL, env)
		}
	}
	if len(scheduled) > 0 {
		q, err := w.adapter.insertQuery(scheduled)
		if err != nil {
			return err
		}
		batch.Queue(q.Query, q.Args...)
	}
	return nil
}

// withTraceContext returns events with the W3C trace context of ctx's span in their headers, as
// [Writer.Write] stores it in table mode; without a valid span, events themselves. The caller's
// events and header maps are not changed.
func withTraceContext(ctx context.Context, events []Event) []Event {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return events
	}
	out := make([]Event, len(events))
	for i, e := range events {
		headers := make(map[string]string, len(e.Headers)+2)
		maps.Copy(headers, e.Headers)
		delete(headers, HeaderTraceState)
		propagation.TraceContext{}.Inject(ctx, propagation.MapCarrier(headers))
		e.Headers = headers
		out[i] = e
	}
	return out
}

// walPublisher is [Writer.Publisher] in ModeWAL: a Watermill publisher that emits messages.
type walPublisher struct {
	writer *Writer
	tx     wsql.ContextExecutor
}

// Publish converts msgs to events (metadata as in table mode, the trace context of each
// message's context), validates them all, then emits them in order.
func (p *walPublisher) Publish(topic string, msgs ...*message.Message) error {
	if len(msgs) == 0 {
		return nil
	}
	events := make([]Event, 0, len(msgs))
	for _, msg := range msgs {
		injectTraceContext(msg.Context(), msg.Metadata)
		e, err := EventFromMessage(topic, msg)
		if err != nil {
			return err
		}
		events = append(events, e)
	}
	if err := p.writer.prepare(events); err != nil {
		return err
	}
	streamed, scheduled := splitScheduled(events)
	if len(streamed) > 0 {
		if err := p.writer.emit(msgs[0].Context(), p.tx, streamed); err != nil {
			return err
		}
	}
	if len(scheduled) > 0 {
		// Each message's trace context is in its event's headers already: the insert must not
		// put the first message's over the others'.
		return p.writer.insert(trace.ContextWithSpanContext(msgs[0].Context(), trace.SpanContext{}), p.tx, scheduled)
	}
	return nil
}

// Close does nothing: the publisher holds nothing but the caller's transaction.
func (p *walPublisher) Close() error { return nil }
