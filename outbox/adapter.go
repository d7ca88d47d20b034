package outbox

import (
	stdsql "database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	wsql "github.com/ThreeDotsLabs/watermill-sql/v4/pkg/sql"
	"github.com/ThreeDotsLabs/watermill/message"
)

// maxRowsPerInsert keeps one INSERT under the 65,535 bind parameters PostgreSQL and MySQL allow,
// and sqliteMaxRowsPerInsert under SQLite's 32,766 (13 parameters per row).
const (
	maxRowsPerInsert       = 4000
	sqliteMaxRowsPerInsert = 2500
)

// maxRows is how many events one INSERT of a may carry.
func (a *SchemaAdapter) maxRows() int {
	if a.table.dialect == SQLite {
		return sqliteMaxRowsPerInsert
	}
	return maxRowsPerInsert
}

// insertColumns are the columns one event fills; the rest have defaults.
const insertColumns = "event_id, topic, aggregate_type, aggregate_id, event_type, tenant_id, payload, headers, key_hash, partition_no, created_at, status, deliver_at"

// pgValueRow casts every parameter so PostgreSQL can type the VALUES list of INSERT ... SELECT.
const pgValueRow = "(?::uuid, ?::text, ?::text, ?::text, ?::text, ?::text, ?::bytea, ?::jsonb, ?::bigint, ?::smallint, ?::timestamptz, ?::smallint, ?::timestamptz)"

const plainValueRow = "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"

// SchemaAdapter is outboxkit's watermill-sql v4 SchemaAdapter: it turns Watermill messages into
// rows of the outbox table, one multi-row INSERT per Publish call. It supports publishing only;
// the forwarder, not a watermill-sql subscriber, reads the table.
//
// Why not watermill-sql's own schemas: they store one table per topic with an opaque JSON
// envelope, and their queue schema acks whole batches it did not deliver. The outbox needs one
// table for all topics, the ordering key in columns, and relay state per row.
type SchemaAdapter struct {
	table           Table
	maxPayloadBytes int
	lockKeys        bool
	now             func() time.Time
	// oneRow is the INSERT of a single event, the common case, built once.
	oneRow string
}

// AdapterConfig configures a [SchemaAdapter].
type AdapterConfig struct {
	// MaxPayloadBytes rejects larger payloads; <= 0 disables the check.
	MaxPayloadBytes int
	// DisableKeyLocks skips the per-key lock that makes sequence order equal commit order for
	// concurrent transactions writing events of the same key (see [Config.DisableKeyLocks]).
	DisableKeyLocks bool
}

// NewSchemaAdapter returns the adapter for table.
func NewSchemaAdapter(table Table, config AdapterConfig) *SchemaAdapter {
	a := &SchemaAdapter{table: table, maxPayloadBytes: max(config.MaxPayloadBytes, 0),
		lockKeys: !config.DisableKeyLocks, now: time.Now}
	a.oneRow = a.insertSQL(1)
	return a
}

// events converts and validates messages: every message must carry a UUID id, an aggregate id
// and an event type in its metadata (see the Metadata constants).
func (a *SchemaAdapter) events(topic string, msgs message.Messages) ([]Event, error) {
	events := make([]Event, 0, len(msgs))
	for _, msg := range msgs {
		e, err := EventFromMessage(topic, msg)
		if err != nil {
			return nil, err
		}
		if e.CreatedAt.IsZero() {
			e.CreatedAt = a.now()
		}
		if err := e.Validate(a.maxPayloadBytes); err != nil {
			return nil, err
		}
		events = append(events, e)
	}
	return events, nil
}

// InsertQuery builds one INSERT for all messages. On PostgreSQL the statement first takes a
// transaction-scoped advisory lock per ordering key, in outboxkit's own two-key namespace
// ([AdvisoryXactLock]) and in key order (so writers cannot deadlock on each other within one
// statement), then draws the sequence numbers: events of one key are numbered in commit order.
func (a *SchemaAdapter) InsertQuery(params wsql.InsertQueryParams) (wsql.Query, error) {
	if len(params.Msgs) == 0 {
		return wsql.Query{}, errors.New("outbox: no messages to insert")
	}
	if len(params.Msgs) > a.maxRows() {
		return wsql.Query{}, fmt.Errorf("outbox: %d messages in one INSERT, the limit is %d", len(params.Msgs), a.maxRows())
	}
	events, err := a.events(params.Topic, params.Msgs)
	if err != nil {
		return wsql.Query{}, err
	}
	return a.insertQuery(events)
}

func (a *SchemaAdapter) insertQuery(events []Event) (wsql.Query, error) {
	d := a.table.dialect
	lockInStatement := d == Postgres && a.lockKeys
	args := make([]any, 0, len(events)*13+1)
	if lockInStatement && len(events) == 1 {
		args = append(args, foldKeyHash(KeyHash(events[0].TenantID, events[0].AggregateType, events[0].AggregateID)))
	} else if lockInStatement {
		args = append(args, advisoryKeyLocks(events))
	}
	for _, e := range events {
		headerJSON := "{}"
		if len(e.Headers) > 0 {
			encoded, err := json.Marshal(e.Headers)
			if err != nil {
				return wsql.Query{}, fmt.Errorf("outbox: encode headers of event %s: %w", e.ID, err)
			}
			headerJSON = string(encoded)
		}
		payload := e.Payload
		if payload == nil {
			payload = []byte{}
		}
		hash := KeyHash(e.TenantID, e.AggregateType, e.AggregateID)
		status, deliverAt := statusPending, any(nil)
		if !e.DeliverAt.IsZero() {
			status, deliverAt = statusScheduled, d.TimeArg(e.DeliverAt)
		}
		args = append(args, e.ID.String(), e.Topic, e.AggregateType, e.AggregateID, e.EventType, e.TenantID,
			payload, headerJSON, hash, PartitionOf(hash), d.TimeArg(e.CreatedAt), status, deliverAt)
	}
	query := a.oneRow
	if len(events) != 1 {
		query = a.insertSQL(len(events))
	}
	return wsql.Query{Query: query, Args: args}, nil
}

// insertSQL is the INSERT statement of n events, in the dialect's placeholders. With PostgreSQL
// key locks, its first argument is the advisory-lock key of the one event, or the array of the
// keys of several.
func (a *SchemaAdapter) insertSQL(n int) string {
	var q strings.Builder
	row := plainValueRow
	lockInStatement := a.table.dialect == Postgres && a.lockKeys
	if lockInStatement && n == 1 {
		// One key: its lock in a subquery the planner keeps apart (OFFSET 0) and evaluates before
		// the row, and so before its nextval; cheaper than the CTE below.
		q.WriteString("INSERT INTO " + a.table.Events() + " (" + insertColumns + ") SELECT v.* FROM (SELECT " +
			AdvisoryXactLock("?::int4") + " OFFSET 0) AS l, (VALUES " + pgValueRow + ") AS v")
		return a.table.dialect.Rebind(q.String())
	}
	if lockInStatement {
		row = pgValueRow
		q.WriteString("WITH key_locks AS (SELECT " + AdvisoryXactLock("k") + " FROM (SELECT DISTINCT k FROM unnest(?::int4[]) AS t(k) ORDER BY k) AS s) ")
		q.WriteString("INSERT INTO " + a.table.Events() + " (" + insertColumns + ") SELECT v.* FROM (VALUES ")
	} else {
		q.WriteString("INSERT INTO " + a.table.Events() + " (" + insertColumns + ") VALUES ")
	}
	q.Grow(n * (len(row) + 2))
	for i := range n {
		if i > 0 {
			q.WriteString(", ")
		}
		q.WriteString(row)
	}
	if lockInStatement {
		// The one-time filter runs the lock CTE before any row, and so before any nextval.
		q.WriteString(") AS v WHERE (SELECT count(*) FROM key_locks) >= 0")
	}
	return a.table.dialect.Rebind(q.String())
}

// keyLockSlots is the number of pre-created MySQL key-lock rows. Two keys sharing a slot
// serialize needlessly, which costs a little concurrency and nothing else.
const keyLockSlots = 1024

// keyLockQuery (MySQL) locks the slot rows of the events' ordering keys, in slot order, until the
// transaction ends.
func (a *SchemaAdapter) keyLockQuery(events []Event) wsql.Query {
	seen := map[int64]bool{}
	var args []any
	for _, h := range distinctKeyHashes(events) {
		if slot := h % keyLockSlots; !seen[slot] {
			seen[slot] = true
			args = append(args, slot)
		}
	}
	q := "SELECT slot FROM " + a.table.KeyLocks() + " WHERE slot IN (?" + strings.Repeat(", ?", len(args)-1) +
		") ORDER BY slot FOR UPDATE"
	return wsql.Query{Query: q, Args: args}
}

// advisoryKeyLocks returns the distinct advisory-lock keys of the events' ordering keys, sorted.
func advisoryKeyLocks(events []Event) []int32 {
	seen := make(map[int32]bool, len(events))
	keys := make([]int32, 0, len(events))
	for _, h := range distinctKeyHashes(events) {
		if k := foldKeyHash(h); !seen[k] {
			seen[k] = true
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}

func distinctKeyHashes(events []Event) []int64 {
	seen := make(map[int64]bool, len(events))
	hashes := make([]int64, 0, len(events))
	for _, e := range events {
		h := KeyHash(e.TenantID, e.AggregateType, e.AggregateID)
		if !seen[h] {
			seen[h] = true
			hashes = append(hashes, h)
		}
	}
	sort.Slice(hashes, func(i, j int) bool { return hashes[i] < hashes[j] })
	return hashes
}

// errPublishOnly is returned by the subscriber-side methods.
var errPublishOnly = errors.New("outbox: SchemaAdapter supports publishing only; run the forwarder to read the outbox")

// SelectQuery is not supported: the forwarder reads the outbox.
func (a *SchemaAdapter) SelectQuery(wsql.SelectQueryParams) (wsql.Query, error) {
	return wsql.Query{}, errPublishOnly
}

// UnmarshalMessage is not supported: the forwarder reads the outbox.
func (a *SchemaAdapter) UnmarshalMessage(wsql.UnmarshalMessageParams) (wsql.Row, error) {
	return wsql.Row{}, errPublishOnly
}

// SchemaInitializingQueries returns the statements of every migration (all idempotent), for
// watermill-sql's AutoInitializeSchema on a *sql.DB. Prefer [Migrate], which records versions.
func (a *SchemaAdapter) SchemaInitializingQueries(wsql.SchemaInitializingQueriesParams) ([]wsql.Query, error) {
	migrations, err := Migrations(a.table)
	if err != nil {
		return nil, err
	}
	var out []wsql.Query
	for _, m := range migrations {
		for _, s := range m.Statements {
			out = append(out, wsql.Query{Query: s})
		}
	}
	return out, nil
}

// SubscribeIsolationLevel is unused (publishing only).
func (a *SchemaAdapter) SubscribeIsolationLevel() stdsql.IsolationLevel { return stdsql.LevelDefault }

var _ wsql.SchemaAdapter = (*SchemaAdapter)(nil)
