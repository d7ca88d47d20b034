package outbox

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// typeLength reads N of "character varying(N)" or "character(N)"; 0 when unbounded.
var typeLength = regexp.MustCompile(`^character(?: varying)?\((\d+)\)$`)

func maxLength(c pgColumn) int {
	m := typeLength.FindStringSubmatch(c.full)
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// markSets renders, per state of a relay row (deleted, published, failed, replayed, retried),
// the assignments to the team's mapped columns.
func (r adoptRenderer) markSets() (map[string][]string, error) {
	c, st := r.cfg.Columns, r.cfg.Status
	set := map[string][]string{}
	add := func(states []string, col, value string) {
		for _, s := range states {
			set[s] = append(set[s], quoteIdent(col)+" = "+value)
		}
	}
	if c.Status != "" {
		col, err := r.column("columns.status", c.Status)
		if err != nil {
			return nil, err
		}
		for _, v := range []string{st.Pending, st.Published, st.Failed} {
			if n := maxLength(col); n > 0 && len(v) > n {
				return nil, fmt.Errorf("%w: status value %q is longer than columns.status %q (%s)", ErrInvalidAdoptConfig, v, c.Status, col.full)
			}
		}
		add([]string{"deleted", "published"}, c.Status, quoteLiteral(st.Published))
		add([]string{"failed"}, c.Status, quoteLiteral(st.Failed))
		add([]string{"replayed"}, c.Status, quoteLiteral(st.Pending))
	}
	timeTypes := []string{"timestamptz", "timestamp"}
	if c.PublishedAt != "" {
		if _, err := r.column("columns.published_at", c.PublishedAt, timeTypes...); err != nil {
			return nil, err
		}
		add([]string{"deleted"}, c.PublishedAt, "now()")
		add([]string{"published"}, c.PublishedAt, "coalesce(NEW.published_at, now())")
	}
	if c.RetryCount != "" {
		if _, err := r.column("columns.retry_count", c.RetryCount, "int2", "int4", "int8", "numeric"); err != nil {
			return nil, err
		}
		add([]string{"failed", "retried"}, c.RetryCount, "NEW.attempts")
		add([]string{"replayed"}, c.RetryCount, "0")
	}
	if c.NextRetryAt != "" {
		if _, err := r.column("columns.next_retry_at", c.NextRetryAt, timeTypes...); err != nil {
			return nil, err
		}
		add([]string{"deleted", "published", "failed", "replayed"}, c.NextRetryAt, "NULL")
		add([]string{"retried"}, c.NextRetryAt, "NEW.next_attempt_at")
	}
	if c.LastError != "" {
		col, err := r.column("columns.last_error", c.LastError, textTypes...)
		if err != nil {
			return nil, err
		}
		reason := "NEW.last_error"
		if n := maxLength(col); n > 0 {
			reason = fmt.Sprintf("left(NEW.last_error, %d)", n)
		}
		add([]string{"failed", "retried"}, c.LastError, reason)
		add([]string{"replayed"}, c.LastError, "NULL")
	}
	return set, nil
}

// markBody renders the trigger function on the relay table that marks the team's row: an
// acknowledged row (deleted while pending, or kept as published) is published, a dead or
// skipped one failed, a replayed one pending again, a failed attempt counted.
func (r adoptRenderer) markBody() (string, error) {
	c := r.cfg.Columns
	set, err := r.markSets()
	if err != nil {
		return "", err
	}
	id, err := r.column("columns.event_id", c.EventID)
	if err != nil {
		return "", err
	}
	update := func(state, row string) string {
		if len(set[state]) == 0 {
			return "NULL;"
		}
		match := "= " + row + ".event_id"
		if id.typ != "uuid" {
			// A UUID held as text: its canonical form in lower or upper case (an IN list, so
			// that the team's primary key index is used).
			match = fmt.Sprintf("IN (CAST(%s.event_id::text AS %s), CAST(upper(%s.event_id::text) AS %s))", row, id.full, row, id.full)
		}
		return fmt.Sprintf("UPDATE %s SET %s WHERE %s %s;", r.team, strings.Join(set[state], ", "), quoteIdent(c.EventID), match)
	}
	return fmt.Sprintf(`BEGIN
    IF TG_OP = 'DELETE' THEN
        IF OLD.status = 0 THEN
            %s
        END IF;
        RETURN NULL;
    END IF;
    IF NEW.status = 1 AND OLD.status <> 1 THEN
        %s
    ELSIF NEW.status IN (2, 3) AND OLD.status NOT IN (2, 3) THEN
        %s
    ELSIF NEW.status = 0 AND OLD.status IN (2, 3) THEN
        %s
    ELSIF NEW.status = 0 AND NEW.attempts IS DISTINCT FROM OLD.attempts THEN
        %s
    END IF;
    RETURN NULL;
END`, update("deleted", "OLD"), update("published", "NEW"), update("failed", "NEW"), update("replayed", "NEW"), update("retried", "NEW")), nil
}

// headersBody renders the function that turns the team's headers into the relay table's: a JSON
// object whose string, number and boolean values are carried as text, null values dropped, and
// the names outboxkit reserves (IsReservedHeader: the relay sets event_id and the other
// metadata itself, from the mapped columns) dropped. A value that is an object or an array, or
// headers that are not an object, fail the team's INSERT with an error naming the column.
func (r adoptRenderer) headersBody() string {
	var reserved []string
	for _, name := range slices.Sorted(maps.Keys(reservedMetadata)) {
		reserved = append(reserved, quoteLiteral(name))
	}
	col, table := quoteLiteral(r.cfg.Columns.Headers), quoteLiteral(r.team)
	return fmt.Sprintf(`
DECLARE
    header RECORD;
    result jsonb := '{}';
BEGIN
    IF h IS NULL OR jsonb_typeof(h) = 'null' THEN
        RETURN result;
    END IF;
    IF jsonb_typeof(h) <> 'object' THEN
        RAISE EXCEPTION 'outboxkit adopt: column %% of %% must hold a JSON object of headers, not a JSON %%', %s, %s, jsonb_typeof(h)
            USING ERRCODE = 'check_violation', COLUMN = %s;
    END IF;
    FOR header IN SELECT key, value FROM jsonb_each(h) LOOP
        CONTINUE WHEN header.key IN (%s) OR starts_with(header.key, '%s') OR starts_with(header.key, '%s')
            OR jsonb_typeof(header.value) = 'null';
        IF jsonb_typeof(header.value) IN ('object', 'array') THEN
            RAISE EXCEPTION 'outboxkit adopt: header %% in column %% of %% is a JSON %%; header values must be strings, numbers or booleans',
                to_json(header.key), %s, %s, jsonb_typeof(header.value) USING ERRCODE = 'check_violation', COLUMN = %s;
        END IF;
        result := result || jsonb_build_object(header.key, header.value #>> '{}');
    END LOOP;
    RETURN result;
END`, col, table, col, strings.Join(reserved, ", "), reservedPrefixWatermill, reservedPrefixOutbox, col, table, col)
}

// UnadoptStatements renders what [Unadopt] runs: the triggers and functions of the adoption
// dropped, and with dropRelayTable the relay table, its relay tables and its functions.
func UnadoptStatements(relay Table, cfg AdoptConfig, dropRelayTable bool) ([]string, error) {
	if err := checkAdoptDialect(relay); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if relay.Dialect() == MySQL {
		return unadoptStatementsMySQL(relay, cfg, dropRelayTable), nil
	}
	ev, short := relay.Events(), relay.shortName()
	stmts := []string{
		fmt.Sprintf("DROP TRIGGER IF EXISTS %s_adopt_forward ON %s", short, teamTable(cfg)),
		fmt.Sprintf("DROP FUNCTION IF EXISTS %s_adopt_forward(), %s_adopt_mark() CASCADE", ev, ev),
		fmt.Sprintf("DROP FUNCTION IF EXISTS %s_adopt_headers(jsonb)", ev),
	}
	if !dropRelayTable {
		return stmts, nil
	}
	for _, t := range relay.Tables() {
		if t != relay.KeyLocks() {
			stmts = append(stmts, "DROP TABLE IF EXISTS "+t)
		}
	}
	return append(stmts, "DROP FUNCTION IF EXISTS "+strings.Join(relay.Functions(), ", ")+" CASCADE"), nil
}
