package outbox

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Adoption on MariaDB/MySQL (docs/adopting.md): the same three pieces as on PostgreSQL, a copy
// trigger on the team's table, mark triggers on the relay table and a backfill, rendered in
// MySQL's trigger language. DDL commits at once there, so LOCK TABLES, not a transaction, keeps
// the team's writers out from the triggers' creation to the end of the backfill.

// mysqlColumn is a column of the team's table as information_schema.COLUMNS describes it.
type mysqlColumn struct {
	name                  string // as the catalog spells it
	typ, full             string // DATA_TYPE ("varchar") and COLUMN_TYPE ("varchar(20)")
	charset, collation    string // empty for non-text columns
	maxChars, octetLength int64
}

// mysqlPlan is what [Adopt] needs beyond the statements of a MariaDB/MySQL plan.
type mysqlPlan struct {
	// lockAt is the index of the LOCK TABLES statement in AdoptPlan.Install.
	lockAt int
	// triggers maps each trigger (schema, name) to its body; functions likewise.
	triggers, functions map[[2]string]string
	// dropForward drops the copy trigger: what a failed backfill undoes.
	dropForward string
}

// mysqlAdopt renders the SQL of one adoption on MariaDB/MySQL.
type mysqlAdopt struct {
	cfg            AdoptConfig
	relay          Table
	relayDB, short string // the relay table's database and unqualified name
	teamDB         string
	team, relayQ   string // quoted and qualified
	cols           map[string]mysqlColumn
	mariadb        bool
}

// quoteMySQL quotes a MariaDB/MySQL identifier.
func quoteMySQL(name string) string { return "`" + strings.ReplaceAll(name, "`", "``") + "`" }

// quoteMySQLLiteral quotes a string for a MariaDB/MySQL literal, where a backslash escapes
// unless the session's sql_mode has NO_BACKSLASH_ESCAPES: names in error messages.
func quoteMySQLLiteral(v string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, "'", "''").Replace(v) + "'"
}

// charsetName: the character set and collation names rendered into SQL.
var charsetName = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

func planAdoptMySQL(ctx context.Context, db *sql.DB, relay Table, cfg AdoptConfig) (AdoptPlan, error) {
	r := mysqlAdopt{cfg: cfg, relay: relay, short: relay.shortName()}
	var current sql.NullString
	if err := db.QueryRowContext(ctx, "SELECT DATABASE(), VERSION() LIKE '%MariaDB%'").Scan(&current, &r.mariadb); err != nil {
		return AdoptPlan{}, fmt.Errorf("outbox: adopt: look up the current database: %w", err)
	}
	r.relayDB, r.teamDB = strings.TrimSuffix(relay.Events(), "."+r.short), cfg.Schema
	if r.relayDB == relay.Events() {
		r.relayDB = current.String
	}
	if r.teamDB == "" {
		r.teamDB = current.String
	}
	if r.relayDB == "" || r.teamDB == "" {
		return AdoptPlan{}, fmt.Errorf("%w: the connection has no current database: name one in the DSN, or set schema and qualify database.table", ErrInvalidAdoptConfig)
	}
	r.team, r.relayQ = quoteMySQL(r.teamDB)+"."+quoteMySQL(cfg.Table), quoteMySQL(r.relayDB)+"."+r.short
	if r.teamDB == r.relayDB && cfg.Table == r.short {
		return AdoptPlan{}, fmt.Errorf("%w: the relay table %s is the team's table %s: give the relay table another name (database.table, such as %s_relay)",
			ErrInvalidAdoptConfig, relay, r.team, cfg.Table)
	}
	var err error
	if r.cols, err = readMySQLColumns(ctx, db, r.teamDB, cfg.Table, r.team); err != nil {
		return AdoptPlan{}, err
	}
	return r.plan()
}

// readMySQLColumns reads the columns of the team's table, keyed by their lower-case names
// (MariaDB/MySQL column names are case-insensitive).
func readMySQLColumns(ctx context.Context, db *sql.DB, schema, table, team string) (map[string]mysqlColumn, error) {
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM information_schema.TABLES WHERE BINARY TABLE_SCHEMA = ? AND BINARY TABLE_NAME = ? AND TABLE_TYPE = 'BASE TABLE'",
		schema, table).Scan(&n); err != nil {
		return nil, fmt.Errorf("outbox: adopt: look up table %s: %w", team, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: table %s does not exist (check table and schema; table names are case-sensitive)", ErrInvalidAdoptConfig, team)
	}
	rows, err := db.QueryContext(ctx, "SELECT COLUMN_NAME, LOWER(DATA_TYPE), LOWER(COLUMN_TYPE), COALESCE(CHARACTER_SET_NAME, ''), COALESCE(COLLATION_NAME, ''),"+
		" COALESCE(CHARACTER_MAXIMUM_LENGTH, 0), COALESCE(CHARACTER_OCTET_LENGTH, 0) FROM information_schema.COLUMNS"+
		" WHERE BINARY TABLE_SCHEMA = ? AND BINARY TABLE_NAME = ?", schema, table)
	if err != nil {
		return nil, fmt.Errorf("outbox: adopt: read the columns of %s: %w", team, err)
	}
	defer rows.Close()
	cols := map[string]mysqlColumn{}
	for rows.Next() {
		var c mysqlColumn
		if err := rows.Scan(&c.name, &c.typ, &c.full, &c.charset, &c.collation, &c.maxChars, &c.octetLength); err != nil {
			return nil, fmt.Errorf("outbox: adopt: read the columns of %s: %w", team, err)
		}
		if (c.charset != "" && !charsetName.MatchString(c.charset)) || (c.collation != "" && !charsetName.MatchString(c.collation)) {
			return nil, fmt.Errorf("outbox: adopt: column %q of %s has an unexpected character set %q or collation %q", c.name, team, c.charset, c.collation)
		}
		cols[strings.ToLower(c.name)] = c
	}
	return cols, rows.Err()
}

// Type groups of MariaDB/MySQL columns (DATA_TYPE). MariaDB's JSON is a longtext.
var (
	mysqlTextTypes = []string{"char", "varchar", "tinytext", "text", "mediumtext", "longtext"}
	mysqlBlobTypes = []string{"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
	mysqlTimeTypes = []string{"datetime", "timestamp"}
	mysqlIntTypes  = []string{"tinyint", "smallint", "mediumint", "int", "bigint", "decimal"}
)

// column checks that a mapped column exists with one of the allowed types.
func (r mysqlAdopt) column(key, name string, types ...string) (mysqlColumn, error) {
	c, ok := r.cols[strings.ToLower(name)]
	if !ok {
		var names []string
		for _, c := range r.cols {
			names = append(names, c.name)
		}
		slices.Sort(names)
		return c, fmt.Errorf("%w: %s %q: table %s has no such column (it has %s)", ErrInvalidAdoptConfig, key, name, r.team, strings.Join(names, ", "))
	}
	if len(types) > 0 && !slices.Contains(types, c.typ) {
		return c, fmt.Errorf("%w: %s %q is of type %s; allowed: %s", ErrInvalidAdoptConfig, key, name, c.full, strings.Join(types, ", "))
	}
	return c, nil
}

// ref names a column of the row named row ("NEW", "OLD" or the backfill's "t").
func (r mysqlAdopt) ref(row string, c mysqlColumn) string { return row + "." + quoteMySQL(c.name) }

// asText renders a value as utf8mb4 text, the relay table's character set.
func asText(expr string) string { return "CONVERT(" + expr + " USING utf8mb4)" }

// idColumn checks the event id column: text holding a UUID, MariaDB's uuid, or binary(16)
// holding the UUID's bytes in the order of its text form.
func (r mysqlAdopt) idColumn() (mysqlColumn, error) {
	c, err := r.column("columns.event_id", r.cfg.Columns.EventID, append([]string{"uuid", "binary"}, mysqlTextTypes...)...)
	if err == nil && c.typ == "binary" && c.full != "binary(16)" {
		err = fmt.Errorf("%w: columns.event_id %q is of type %s; a binary id must be binary(16)", ErrInvalidAdoptConfig, c.name, c.full)
	}
	return c, err
}

// idText renders the event id of row as the UUID's text, in utf8mb4.
func (r mysqlAdopt) idText(row string, c mysqlColumn) string {
	switch c.typ {
	case "binary":
		return asText(fmt.Sprintf("LOWER(INSERT(INSERT(INSERT(INSERT(HEX(%s), 9, 0, '-'), 14, 0, '-'), 19, 0, '-'), 24, 0, '-'))", r.ref(row, c)))
	case "uuid":
		return "CAST(" + r.ref(row, c) + " AS CHAR CHARACTER SET utf8mb4)"
	}
	return asText(r.ref(row, c))
}

// utcTime renders a datetime or timestamp column as a UTC DATETIME, what the relay table holds:
// a timestamp's instant exactly, whatever the session's time zone; a datetime as it is (taken
// to be UTC, as outboxkit reads its own).
func utcTime(ref string, c mysqlColumn) string {
	if c.typ == "timestamp" {
		return "TIMESTAMPADD(MICROSECOND, UNIX_TIMESTAMP(" + ref + ") * 1000000, '1970-01-01 00:00:00')"
	}
	return ref
}

// values renders the relay table's columns and their values from the team's row named row.
func (r mysqlAdopt) values(row string) (cols, exprs []string, err error) {
	c := r.cfg.Columns
	id, err := r.idColumn()
	if err != nil {
		return nil, nil, err
	}
	topic, err := r.topicExpr(row)
	if err != nil {
		return nil, nil, err
	}
	cols, exprs = []string{"event_id", "topic"}, []string{r.idText(row, id), topic}
	for _, m := range []struct {
		key, name, target string
		types             []string
	}{
		{"columns.aggregate_id", c.AggregateID, "aggregate_id", nil},
		{"columns.event_type", c.EventType, "event_type", nil},
		{"columns.aggregate_type", c.AggregateType, "aggregate_type", nil},
		{"columns.payload", c.Payload, "payload", slices.Concat([]string{"json"}, mysqlBlobTypes, mysqlTextTypes)},
		{"columns.headers", c.Headers, "headers", append([]string{"json"}, mysqlTextTypes...)},
		{"columns.created_at", c.CreatedAt, "created_at", mysqlTimeTypes},
	} {
		if m.name == "" {
			continue
		}
		col, err := r.column(m.key, m.name, m.types...)
		if err != nil {
			return nil, nil, err
		}
		expr := asText(r.ref(row, col))
		switch {
		case m.target == "payload" && slices.Contains(mysqlBlobTypes, col.typ):
			expr = r.ref(row, col)
		case m.target == "headers":
			expr = r.headersFunction() + "(" + expr + ")"
		case m.target == "created_at":
			expr = utcTime(r.ref(row, col), col)
		}
		cols, exprs = append(cols, m.target), append(exprs, expr)
	}
	// The relay table's columns that have no default and that its BEFORE INSERT trigger fills
	// in: MariaDB refuses an INSERT ... SELECT (the backfill) that leaves them out, before the
	// trigger runs, and accepts an explicit NULL.
	for _, col := range []string{"payload", "headers", "created_at", "key_hash", "partition_no"} {
		if !slices.Contains(cols, col) {
			cols, exprs = append(cols, col), append(exprs, "NULL")
		}
	}
	return cols, exprs, nil
}

// topicExpr renders the topic: the topic column, or the template's concatenation.
func (r mysqlAdopt) topicExpr(row string) (string, error) {
	if r.cfg.Columns.Topic != "" {
		col, err := r.column("columns.topic", r.cfg.Columns.Topic)
		if err != nil {
			return "", err
		}
		return asText(r.ref(row, col)), nil
	}
	parts, err := parseTopicTemplate(r.cfg.TopicTemplate)
	if err != nil {
		return "", err
	}
	var terms []string
	for _, p := range parts {
		switch {
		case p.column == "" && p.literal != "":
			terms = append(terms, quoteLiteral(p.literal))
		case p.column != "":
			col, err := r.column("topic_template {"+p.column+"}", p.column)
			if err != nil {
				return "", err
			}
			term := asText(r.ref(row, col))
			if p.lower {
				term = "LOWER(" + term + ")"
			}
			terms = append(terms, term)
		}
	}
	return "CONCAT(" + strings.Join(terms, ", ") + ")", nil
}

// headersFunction is the qualified name of the function that converts the team's headers.
func (r mysqlAdopt) headersFunction() string { return r.relayQ + "_adopt_headers" }

// Trigger names: the copy trigger lives in the team's database, the mark triggers in the relay's.
func (r mysqlAdopt) forwardTrigger() [2]string {
	return [2]string{r.teamDB, r.short + "_adopt_forward"}
}
func (r mysqlAdopt) markTrigger() [2]string { return [2]string{r.relayDB, r.short + "_adopt_mark"} }
func (r mysqlAdopt) markDelTrigger() [2]string {
	return [2]string{r.relayDB, r.short + "_adopt_mark_del"}
}

func qualified(name [2]string) string { return quoteMySQL(name[0]) + "." + quoteMySQL(name[1]) }

// plan renders the function, the triggers, the lock and the backfill.
func (r mysqlAdopt) plan() (AdoptPlan, error) {
	cols, newExprs, err := r.values("NEW")
	if err != nil {
		return AdoptPlan{}, err
	}
	mark, markDel, err := r.markBodies()
	if err != nil {
		return AdoptPlan{}, err
	}
	c := r.cfg.Columns
	mp := &mysqlPlan{triggers: map[[2]string]string{}, functions: map[[2]string]string{}}
	p := AdoptPlan{team: r.team, mysql: mp, Unlock: "UNLOCK TABLES"}
	if c.Headers != "" {
		// Created before the lock (MySQL refuses CREATE FUNCTION under LOCK TABLES); MariaDB
		// replaces it in one statement, MySQL drops it first.
		name := [2]string{r.relayDB, r.short + "_adopt_headers"}
		body := r.headersBody()
		mp.functions[name] = body
		create := "CREATE OR REPLACE FUNCTION"
		if !r.mariadb {
			p.Install = append(p.Install, "DROP FUNCTION IF EXISTS "+qualified(name))
			create = "CREATE FUNCTION"
		}
		p.Install = append(p.Install, fmt.Sprintf("%s %s(h LONGTEXT) RETURNS LONGTEXT CHARSET utf8mb4 DETERMINISTIC NO SQL\n%s", create, qualified(name), body))
	}
	mp.lockAt = len(p.Install)
	// The aliases are the backfill's: LOCK TABLES needs every name a statement uses.
	p.Install = append(p.Install, fmt.Sprintf("LOCK TABLES %s WRITE, %s AS t READ, %s WRITE, %s AS r READ", r.team, r.team, r.relayQ, r.relayQ))
	insert := fmt.Sprintf("INSERT INTO %s (%s)\n    VALUES (%s)", r.relayQ, strings.Join(cols, ", "), strings.Join(newExprs, ", "))
	forward := insert
	if c.Status != "" {
		status, err := r.column("columns.status", c.Status)
		if err != nil {
			return AdoptPlan{}, err
		}
		forward = fmt.Sprintf("IF NEW.%s <=> %s THEN\n    %s;\nEND IF", quoteMySQL(status.name), quoteLiteral(r.cfg.Status.Pending), insert)
	}
	for _, t := range []struct {
		name     [2]string
		when, on string
		body     string
	}{
		{r.forwardTrigger(), "AFTER INSERT", r.team, forward},
		{r.markTrigger(), "AFTER UPDATE", r.relayQ, mark},
		{r.markDelTrigger(), "AFTER DELETE", r.relayQ, markDel},
	} {
		mp.triggers[t.name] = t.body
		p.Install = append(p.Install, "DROP TRIGGER IF EXISTS "+qualified(t.name),
			fmt.Sprintf("CREATE TRIGGER %s %s ON %s FOR EACH ROW\n%s", qualified(t.name), t.when, t.on, t.body))
	}
	mp.dropForward = "DROP TRIGGER IF EXISTS " + qualified(r.forwardTrigger())
	if c.Status != "" {
		_, tExprs, err := r.values("t")
		if err != nil {
			return AdoptPlan{}, err
		}
		id, _ := r.idColumn()
		order := r.ref("t", id)
		if c.CreatedAt != "" {
			created, _ := r.column("columns.created_at", c.CreatedAt)
			order = r.ref("t", created) + ", " + order
		}
		status, _ := r.column("columns.status", c.Status)
		p.Backfill = fmt.Sprintf("INSERT INTO %s (%s)\n    SELECT %s FROM %s AS t\n    WHERE t.%s = ? AND NOT EXISTS (SELECT 1 FROM %s AS r WHERE r.event_id = LOWER(%s) COLLATE utf8mb4_bin)\n    ORDER BY %s",
			r.relayQ, strings.Join(cols, ", "), strings.Join(tExprs, ", "), r.team, quoteMySQL(status.name), r.relayQ, tExprs[0], order)
		p.BackfillArgs = []any{r.cfg.Status.Pending}
	}
	return p, nil
}

// headersBody renders the function that turns the team's headers into the relay table's, as
// on PostgreSQL (adopt_mark.go headersBody): string, number and boolean values carried as
// text, null values and reserved names dropped, an object or array value or headers that are
// not an object failing the team's INSERT with an error naming the column.
func (r mysqlAdopt) headersBody() string {
	col, _ := r.column("columns.headers", r.cfg.Columns.Headers)
	var reserved []string
	for _, name := range slices.Sorted(maps.Keys(reservedMetadata)) {
		reserved = append(reserved, quoteLiteral(name))
	}
	prefixes := ""
	for _, p := range []string{reservedPrefixWatermill, reservedPrefixOutbox} {
		prefixes += fmt.Sprintf(" OR LEFT(CAST(v_name AS BINARY), %d) = %s", len(p), quoteLiteral(p))
	}
	where := quoteMySQLLiteral("column " + col.name + " of " + r.team)
	return fmt.Sprintf(`BEGIN
    DECLARE v_names, v_name, v_value LONGTEXT;
    DECLARE v_result LONGTEXT DEFAULT '{}';
    DECLARE v_msg VARCHAR(512);
    DECLARE i, n INT DEFAULT 0;
    IF h IS NULL OR (JSON_VALID(h) AND JSON_TYPE(h) = 'NULL') THEN
        RETURN v_result;
    END IF;
    IF NOT JSON_VALID(h) OR JSON_TYPE(h) <> 'OBJECT' THEN
        SET v_msg = CONCAT('outboxkit adopt: ', %s, ' must hold a JSON object of headers, not ',
            IF(JSON_VALID(h), CONCAT('a JSON ', LOWER(JSON_TYPE(h))), 'invalid JSON'));
        SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, COLUMN_NAME = %s;
    END IF;
    SET v_names = JSON_KEYS(h), n = JSON_LENGTH(v_names);
    WHILE i < n DO
        SET v_name = JSON_UNQUOTE(JSON_EXTRACT(v_names, CONCAT('$[', i, ']'))), i = i + 1;
        SET v_value = JSON_EXTRACT(h, CONCAT('$.', JSON_QUOTE(v_name)));
        IF NOT (CAST(v_name AS BINARY) IN (%s)%s OR JSON_TYPE(v_value) = 'NULL') THEN
            IF JSON_TYPE(v_value) IN ('OBJECT', 'ARRAY') THEN
                SET v_msg = CONCAT('outboxkit adopt: header ', JSON_QUOTE(v_name), ' in ', %s, ' is a JSON ', LOWER(JSON_TYPE(v_value)),
                    '; header values must be strings, numbers or booleans');
                SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = v_msg, COLUMN_NAME = %s;
            END IF;
            SET v_result = JSON_SET(v_result, CONCAT('$.', JSON_QUOTE(v_name)), JSON_UNQUOTE(v_value));
        END IF;
    END WHILE;
    RETURN v_result;
END`, where, quoteMySQLLiteral(col.name), strings.Join(reserved, ", "), prefixes, where, quoteMySQLLiteral(col.name))
}
