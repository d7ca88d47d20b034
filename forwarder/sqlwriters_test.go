package forwarder_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// plainSQLWriter writes events as a service in another language does (docs/writers.md): one
// single-row INSERT per event, key_hash left NULL for the table's trigger.
type plainSQLWriter struct {
	insert   string
	inserted *atomic.Int64 // rows inserted, so a test can tell this writer was used
}

func newPlainSQLWriter(dialect outbox.Dialect, table string) plainSQLWriter {
	cols := "INSERT INTO " + table + " (event_id, topic, tenant_id, aggregate_type, aggregate_id, event_type, payload, headers) VALUES "
	if dialect == outbox.MySQL {
		return plainSQLWriter{insert: cols + "(?, ?, ?, ?, ?, ?, ?, ?)", inserted: new(atomic.Int64)}
	}
	return plainSQLWriter{insert: cols + "($1, $2, $3, $4, $5, $6, $7, $8)", inserted: new(atomic.Int64)}
}

func (w plainSQLWriter) WriteTx(ctx context.Context, tx *sql.Tx, events ...outbox.Event) error {
	for _, e := range events {
		headers, err := json.Marshal(e.Headers)
		if err != nil {
			return err
		}
		if e.Headers == nil {
			headers = []byte("{}")
		}
		if _, err := tx.ExecContext(ctx, w.insert, e.ID.String(), e.Topic, e.TenantID, e.AggregateType, e.AggregateID,
			e.EventType, e.Payload, string(headers)); err != nil {
			return fmt.Errorf("plain INSERT of event %s: %w", e.ID, err)
		}
		w.inserted.Add(1)
	}
	return nil
}

// TestSQLWrittenPoisonEventIsParkedDeadLetteredAndReplayed is the poison test with events
// written by plain SQL, on PostgreSQL and MariaDB, through the real Kafka: the failing events of
// two keys are retried, dead-lettered (row status dead, the dead-letter topic), their keys'
// later events parked while 30 other keys flow; then one is replayed and the other discarded,
// and both keys resume in order.
func TestSQLWrittenPoisonEventIsParkedDeadLetteredAndReplayed(t *testing.T) {
	brokers := testsupport.KafkaBrokers(t)
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			h := newHarness(t, d, brokers)
			w := newPlainSQLWriter(d, h.writer.Table().Events())
			h.txWriter = w
			testPoisonEvent(t, h, false)
			if n := w.inserted.Load(); n != 96 {
				t.Fatalf("the plain-SQL writer inserted %d events, want all 96 of the test", n)
			}
		})
	}
}
