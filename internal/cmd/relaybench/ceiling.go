package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxkit/outboxkit/outbox"
)

// The ceiling relay is the simplest relay that could exist on the same database and broker: it
// loops over one transaction that claims and deletes the 1,000 oldest rows (SKIP LOCKED), sends
// them with one franz-go ProduceSync and commits. No ordering guarantee across batches, no
// retries, no leases, no metrics: what is left is the database's and the broker's own cost, the
// limit of this machine for any relay reading this table. It reads the table outbox.Writer
// writes and sends the same Kafka records as the other relays (key = aggregate id, value =
// payload, the Watermill metadata as headers), so every relay moves the same bytes.

// ceilingBatch is the number of rows the ceiling relay claims per transaction.
const ceilingBatch = 1000

// ceilingColumns are the columns the ceiling relay reads; seq comes first.
const ceilingColumns = "seq, event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, created_at"

// compressionCodec maps -compression to franz-go's codec; "" is brokers/kafka's default, lz4.
func compressionCodec(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "", "lz4":
		return kgo.Lz4Compression(), nil
	case "none":
		return kgo.NoCompression(), nil
	case "gzip":
		return kgo.GzipCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("%q is not a codec (want none, gzip, snappy, lz4 or zstd)", name)
}

// ceilingClient is the producer of the ceiling relays, with its producer id loaded. franz-go's
// defaults are those of brokers/kafka's publisher: idempotent, acks=all; linger is off (a
// ProduceSync is a whole batch already, and the cdc ceiling produces as it decodes).
func ceilingClient(ctx context.Context, o options) (*kgo.Client, error) {
	codec, err := compressionCodec(o.compress)
	if err != nil {
		return nil, fmt.Errorf("-compression: %w", err)
	}
	client, err := kgo.NewClient(kgo.SeedBrokers(o.brokers...), kgo.ProducerBatchCompression(codec),
		kgo.ProducerLinger(0), kgo.AllowAutoTopicCreation())
	if err != nil {
		return nil, fmt.Errorf("franz-go client: %w", err)
	}
	// Load the idempotent producer id now, as brokers/kafka's publisher does when it is created:
	// start-up is not measured.
	if _, _, err := client.ProducerID(ctx); err != nil {
		client.Close()
		return nil, fmt.Errorf("kafka %v: load the producer id: %w", o.brokers, err)
	}
	return client, nil
}

// runCeiling is the ceiling relay's child process, until ctx ends.
func runCeiling(ctx context.Context, db *sql.DB, d database, name string, o options) error {
	table, err := outbox.NewTable(d.dialect, name)
	if err != nil {
		return fmt.Errorf("outbox table %q: %w", name, err)
	}
	client, err := ceilingClient(ctx, o)
	if err != nil {
		return err
	}
	defer client.Close()
	claim := claimPostgres(table)
	if d.dialect == outbox.MySQL {
		claim = claimMySQL(table)
	}
	if err := waitForGo(); err != nil {
		return err
	}
	for ctx.Err() == nil {
		n, err := ceilingOnce(ctx, db, client, claim)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if n == 0 {
			select {
			case <-ctx.Done():
			case <-time.After(5 * time.Millisecond):
			}
		}
	}
	return nil
}

// claimFunc claims and deletes up to ceilingBatch rows in tx and returns them as records.
type claimFunc func(ctx context.Context, tx *sql.Tx) ([]*kgo.Record, error)

// ceilingOnce is one transaction of the ceiling relay: claim and delete, produce, commit.
func ceilingOnce(ctx context.Context, db *sql.DB, client *kgo.Client, claim claimFunc) (int, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	records, err := claim(ctx, tx)
	if err != nil {
		return 0, err
	}
	if len(records) == 0 {
		return 0, nil
	}
	if err := client.ProduceSync(ctx, records...).FirstErr(); err != nil {
		return 0, fmt.Errorf("produce %d records: %w", len(records), err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit the deletion of %d rows: %w", len(records), err)
	}
	return len(records), nil
}

// claimPostgres deletes the oldest unlocked rows and returns them in one statement.
func claimPostgres(t outbox.Table) claimFunc {
	query := "DELETE FROM " + t.Events() + " WHERE seq IN (SELECT seq FROM " + t.Events() +
		" ORDER BY seq LIMIT " + fmt.Sprint(ceilingBatch) + " FOR UPDATE SKIP LOCKED) RETURNING " + ceilingColumns
	return func(ctx context.Context, tx *sql.Tx) ([]*kgo.Record, error) {
		records, _, err := queryRecords(ctx, tx, query)
		if err != nil {
			return nil, fmt.Errorf("claim and delete: %w", err)
		}
		return records, nil
	}
}

// claimMySQL locks the oldest unlocked rows, then deletes them by seq, in the caller's
// transaction (MariaDB has no DELETE ... RETURNING with a LIMITed, locking subquery).
func claimMySQL(t outbox.Table) claimFunc {
	query := "SELECT " + ceilingColumns + " FROM " + t.Events() + " ORDER BY seq LIMIT " +
		fmt.Sprint(ceilingBatch) + " FOR UPDATE SKIP LOCKED"
	return func(ctx context.Context, tx *sql.Tx) ([]*kgo.Record, error) {
		records, seqs, err := queryRecords(ctx, tx, query)
		if err != nil {
			return nil, fmt.Errorf("claim: %w", err)
		}
		if len(seqs) == 0 {
			return nil, nil
		}
		args := make([]any, len(seqs))
		for i, s := range seqs {
			args[i] = s
		}
		del := "DELETE FROM " + t.Events() + " WHERE seq IN (?" + strings.Repeat(",?", len(seqs)-1) + ")"
		if _, err := tx.ExecContext(ctx, del, args...); err != nil {
			return nil, fmt.Errorf("delete %d claimed rows: %w", len(seqs), err)
		}
		return records, nil
	}
}

// queryRecords runs a query returning ceilingColumns and turns each row into the Kafka record
// the other relays send for it.
func queryRecords(ctx context.Context, tx *sql.Tx, query string) ([]*kgo.Record, []int64, error) {
	rows, err := tx.QueryContext(ctx, query)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	records := make([]*kgo.Record, 0, ceilingBatch)
	seqs := make([]int64, 0, ceilingBatch)
	for rows.Next() {
		var (
			seq     int64
			id      string
			headers []byte
			e       outbox.Event
		)
		created, getCreated := outbox.TimeScanner()
		if err := rows.Scan(&seq, &id, &e.Topic, &e.AggregateType, &e.AggregateID, &e.EventType, &e.TenantID,
			&e.Payload, &headers, created); err != nil {
			return nil, nil, fmt.Errorf("scan: %w", err)
		}
		if e.ID, err = uuid.Parse(id); err != nil {
			return nil, nil, fmt.Errorf("row %d: event id %q: %w", seq, id, err)
		}
		if e.CreatedAt, err = getCreated(); err != nil {
			return nil, nil, fmt.Errorf("row %d: created_at: %w", seq, err)
		}
		if len(headers) > 0 {
			if err := json.Unmarshal(headers, &e.Headers); err != nil {
				return nil, nil, fmt.Errorf("row %d: headers: %w", seq, err)
			}
		}
		records = append(records, toRecord(e))
		seqs = append(seqs, seq)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	return records, seqs, nil
}

// toRecord builds the record watermill-kafka's marshaler builds for the event's message: key =
// aggregate id, value = payload, the message UUID and the metadata as headers.
func toRecord(e outbox.Event) *kgo.Record {
	msg := e.ToMessage()
	headers := make([]kgo.RecordHeader, 0, len(msg.Metadata)+1)
	headers = append(headers, kgo.RecordHeader{Key: "_watermill_message_uuid", Value: []byte(msg.UUID)})
	for k, v := range msg.Metadata {
		headers = append(headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
	}
	return &kgo.Record{Topic: e.Topic, Key: []byte(e.AggregateID), Value: msg.Payload, Headers: headers}
}
