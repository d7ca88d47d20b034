package outbox

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// ErrInvalidAdoptConfig is wrapped by every error of [AdoptConfig.Validate] and of the checks
// [Adopt] makes against the database's catalog.
var ErrInvalidAdoptConfig = errors.New("invalid adopt configuration")

// AdoptConfig maps an outbox table a team already has (written by its own services, in any
// language) onto outboxkit's table, the relay table: [Adopt] installs triggers that copy each
// new row of the team's table into the relay table in the same transaction, and that mark the
// team's row the way its table expects once the relay has published it, dead-lettered it or
// retried it. See docs/adopting.md.
//
// Names of the team's table and columns are written as the catalog spells them ("OutboxEvents"
// for a table created with a quoted mixed-case name); they are always quoted, so reserved words
// and mixed case are accepted. MariaDB/MySQL match column names in any case. The relay table is an outboxkit [Table], checked by
// [ValidateIdentifier].
type AdoptConfig struct {
	// Schema of the team's table; empty means the first schema of the search path. On
	// MariaDB/MySQL it is the database; empty means the connection's.
	Schema string
	// Table is the team's outbox table.
	Table string
	// Columns names the team's columns.
	Columns AdoptColumns
	// TopicTemplate routes an event to a topic when Columns.Topic is empty: literal text with
	// {column} or {column|lower} placeholders, such as "{aggregate_type|lower}.events".
	TopicTemplate string
	// Status holds the values of Columns.Status; empty values default to PENDING, PUBLISHED and
	// FAILED.
	Status AdoptStatus
}

// AdoptColumns names the team's columns. EventID, AggregateID and EventType are required, and
// one of Topic or AdoptConfig.TopicTemplate; every other column is optional ("" = not mapped).
type AdoptColumns struct {
	// EventID is a UUID: a uuid column, or text holding the UUID in its canonical form, in lower
	// or upper case; on MariaDB/MySQL also binary(16) holding the bytes of the UUID's text order.
	EventID string
	// AggregateID is the ordering key.
	AggregateID, AggregateType, EventType string
	// Payload (bytea, json, jsonb or text; MariaDB/MySQL: a blob, json or text) becomes the
	// message body; json is sent as its text.
	Payload string
	// Headers (json, jsonb or text holding a JSON object) become message headers.
	Headers string
	// CreatedAt is copied to the relay table (a MariaDB/MySQL TIMESTAMP as its instant in UTC).
	CreatedAt string
	// Topic is a column holding the topic (instead of TopicTemplate).
	Topic string
	// Status receives Status.Published, Status.Failed, or Status.Pending again after a replay;
	// only rows inserted with Status.Pending are relayed, and the ones pending at adoption are
	// backfilled.
	Status string
	// PublishedAt receives the time the relay acknowledged the event.
	PublishedAt string
	// RetryCount receives the number of failed attempts, NextRetryAt the time of the next one,
	// LastError the reason of the last one.
	RetryCount, NextRetryAt, LastError string
}

// AdoptStatus holds the values of the team's status column.
type AdoptStatus struct {
	Pending, Published, Failed string
}

// adoptColumn is one mapped column, for validation and error messages.
type adoptColumn struct {
	key, name string
	required  bool
}

// fields lists the columns with the configuration keys that name them.
func (c AdoptColumns) fields() []adoptColumn {
	return []adoptColumn{
		{"columns.event_id", c.EventID, true}, {"columns.aggregate_id", c.AggregateID, true},
		{"columns.event_type", c.EventType, true}, {"columns.aggregate_type", c.AggregateType, false},
		{"columns.payload", c.Payload, false}, {"columns.headers", c.Headers, false},
		{"columns.created_at", c.CreatedAt, false}, {"columns.topic", c.Topic, false},
		{"columns.status", c.Status, false}, {"columns.published_at", c.PublishedAt, false},
		{"columns.retry_count", c.RetryCount, false}, {"columns.next_retry_at", c.NextRetryAt, false},
		{"columns.last_error", c.LastError, false},
	}
}

// statusValue: what a status value may hold. Values are rendered into trigger bodies as SQL
// string literals, so quotes and backslashes are refused rather than escaped.
var statusValue = regexp.MustCompile(`^[A-Za-z0-9 _.:/-]{1,64}$`)

// withDefaults fills in the default status values.
func (c AdoptConfig) withDefaults() AdoptConfig {
	for _, v := range []struct {
		p   *string
		def string
	}{{&c.Status.Pending, "PENDING"}, {&c.Status.Published, "PUBLISHED"}, {&c.Status.Failed, "FAILED"}} {
		if *v.p == "" {
			*v.p = v.def
		}
	}
	return c
}

// Validate checks the configuration without a database; each error names the configuration key.
func (c AdoptConfig) Validate() error {
	c = c.withDefaults()
	if err := checkQuotedIdent("table", c.Table, true); err != nil {
		return err
	}
	if err := checkQuotedIdent("schema", c.Schema, false); err != nil {
		return err
	}
	for _, f := range c.Columns.fields() {
		if err := checkQuotedIdent(f.key, f.name, f.required); err != nil {
			return err
		}
	}
	switch {
	case c.Columns.Topic == "" && c.TopicTemplate == "":
		return fmt.Errorf("%w: set columns.topic (a column holding the topic) or topic_template (such as \"{aggregate_type|lower}.events\")", ErrInvalidAdoptConfig)
	case c.Columns.Topic != "" && c.TopicTemplate != "":
		return fmt.Errorf("%w: columns.topic %q and topic_template %q are both set; keep one", ErrInvalidAdoptConfig, c.Columns.Topic, c.TopicTemplate)
	case c.TopicTemplate != "":
		if err := checkQuotedIdent("topic_template", c.TopicTemplate, true); err != nil {
			return err
		}
		if _, err := parseTopicTemplate(c.TopicTemplate); err != nil {
			return err
		}
	}
	for _, v := range []struct{ key, value string }{
		{"status.pending", c.Status.Pending}, {"status.published", c.Status.Published}, {"status.failed", c.Status.Failed},
	} {
		if !statusValue.MatchString(v.value) {
			return fmt.Errorf("%w: %s %q: use 1 to 64 letters, digits, spaces and _ . : / -", ErrInvalidAdoptConfig, v.key, v.value)
		}
	}
	if c.Status.Pending == c.Status.Published || c.Status.Pending == c.Status.Failed {
		return fmt.Errorf("%w: status.pending %q must differ from status.published %q and status.failed %q",
			ErrInvalidAdoptConfig, c.Status.Pending, c.Status.Published, c.Status.Failed)
	}
	return nil
}

// checkQuotedIdent checks a name that is always quoted: 1 to 63 bytes, no control characters.
func checkQuotedIdent(key, name string, required bool) error {
	if name == "" {
		if required {
			return fmt.Errorf("%w: %s is required", ErrInvalidAdoptConfig, key)
		}
		return nil
	}
	if len(name) > maxIdentifierPart {
		return fmt.Errorf("%w: %s %q is longer than %d bytes", ErrInvalidAdoptConfig, key, name, maxIdentifierPart)
	}
	if strings.Contains(name, "$adopt$") {
		return fmt.Errorf("%w: %s %q holds $adopt$, the quote of outboxkit's trigger bodies", ErrInvalidAdoptConfig, key, name)
	}
	for _, r := range name {
		if r < 0x20 || r == 0x7f {
			return fmt.Errorf("%w: %s %q holds a control character", ErrInvalidAdoptConfig, key, name)
		}
	}
	return nil
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(name string) string { return `"` + strings.ReplaceAll(name, `"`, `""`) + `"` }

// quoteLiteral quotes a value that statusValue or the topic template's literal check accepted.
func quoteLiteral(v string) string { return "'" + strings.ReplaceAll(v, "'", "''") + "'" }

// AdoptResult reports what [Adopt] did.
type AdoptResult struct {
	// Changed is false when the triggers were already installed with the same definitions.
	Changed bool
	// Backfilled counts the team's pending rows copied into the relay table.
	Backfilled int64
}

// Adopt migrates the relay table (outboxkit's own, [Migrate]) and installs the triggers of cfg
// between it and the team's table, then copies the team's rows still pending into the relay
// table in their created-at and id order, all in one transaction: writers of the team's table
// wait for it (CREATE TRIGGER locks their table), so no row is missed or copied twice. Running
// it again changes nothing and says so (AdoptResult). PostgreSQL and MariaDB/MySQL are
// supported; on MariaDB/MySQL, where DDL commits at once, LOCK TABLES keeps the writers out from
// the triggers' creation to the end of the backfill instead of a transaction.
func Adopt(ctx context.Context, db *sql.DB, relay Table, cfg AdoptConfig) (AdoptResult, error) {
	plan, err := PlanAdopt(ctx, db, relay, cfg)
	if err != nil {
		return AdoptResult{}, err
	}
	if err := Migrate(ctx, db, relay); err != nil {
		return AdoptResult{}, err
	}
	if plan.mysql != nil {
		return adoptMySQL(ctx, db, relay, plan)
	}
	var res AdoptResult
	err = inAdoptTx(ctx, db, relay, func(tx *sql.Tx) error {
		// Before comparing: the functions' saved search path is this one (plan.Install[0]).
		if _, err := tx.ExecContext(ctx, adoptSearchPath); err != nil {
			return fmt.Errorf("outbox: adopt %s: search path: %w", plan.team, err)
		}
		var err error
		if res.Changed, err = plan.changed(ctx, tx); err != nil {
			return err
		}
		if res.Changed {
			for _, stmt := range plan.Install {
				if _, err := tx.ExecContext(ctx, stmt); err != nil {
					return fmt.Errorf("outbox: adopt %s: %w (statement: %s)", plan.team, err, firstLine(stmt))
				}
			}
		}
		if plan.Backfill == "" {
			return nil
		}
		r, err := tx.ExecContext(ctx, plan.Backfill, plan.BackfillArgs...)
		if err != nil {
			return fmt.Errorf("outbox: adopt %s: backfill: %w", plan.team, err)
		}
		res.Backfilled, err = r.RowsAffected()
		return err
	})
	if err != nil {
		return AdoptResult{}, err
	}
	return res, nil
}

// adoptSearchPath puts pg_temp last in the adoption transaction's search path, which the
// SECURITY DEFINER trigger functions save (SET search_path FROM CURRENT). Unless named, pg_temp
// is searched first for tables: a writer's temporary table named like the relay table would
// receive the copy, and a trigger the writer put on it would run with the adoption's rights.
const adoptSearchPath = `SELECT set_config('search_path', current_setting('search_path') || ', pg_temp', true)` +
	` WHERE current_setting('search_path') !~ '(^|,)\s*"?pg_temp"?\s*(,|$)'`

// Unadopt removes the triggers and functions [Adopt] installed, leaving the team's table and its
// rows as they are, and with dropRelayTable the relay table and its relay tables too. Events
// still pending in the relay table stay pending in the team's table, for its own relay.
func Unadopt(ctx context.Context, db *sql.DB, relay Table, cfg AdoptConfig, dropRelayTable bool) error {
	stmts, err := UnadoptStatements(relay, cfg, dropRelayTable)
	if err != nil {
		return err
	}
	if relay.Dialect() == MySQL {
		return unadoptMySQL(ctx, db, relay, stmts)
	}
	return inAdoptTx(ctx, db, relay, func(tx *sql.Tx) error {
		for _, stmt := range stmts {
			if _, err := tx.ExecContext(ctx, stmt); err != nil {
				return fmt.Errorf("outbox: undo adoption by %s: %w (statement: %s)", relay, err, firstLine(stmt))
			}
		}
		return nil
	})
}

// inAdoptTx runs f in a transaction holding the adoption's advisory lock of relay.
func inAdoptTx(ctx context.Context, db *sql.DB, relay Table, f func(*sql.Tx) error) error {
	if err := checkAdoptDialect(relay); err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("outbox: adopt into %s: begin: %w", relay, err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "SELECT "+AdvisoryXactLock("$1"), AdvisoryKey("adopt:"+relay.Events())); err != nil {
		return fmt.Errorf("outbox: adopt into %s: advisory lock: %w", relay, err)
	}
	if err := f(tx); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("outbox: adopt into %s: commit: %w", relay, err)
	}
	return nil
}

// checkAdoptDialect refuses a dialect adoption does not support (SQLite has no triggers that
// could give the copies their key's lock).
func checkAdoptDialect(relay Table) error {
	if relay.Dialect() != Postgres && relay.Dialect() != MySQL {
		return fmt.Errorf("%w: adopting a table is supported on PostgreSQL and MariaDB/MySQL, not %s", ErrInvalidAdoptConfig, relay.Dialect())
	}
	return nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
