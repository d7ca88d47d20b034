package outbox

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// enumValues reads the values of an enum('a','b') column type.
var enumValues = regexp.MustCompile(`'((?:[^']|'')*)'`)

// nowFor renders the current time for a datetime column (UTC, as outboxkit's own) or a
// timestamp one (the session's time, which MySQL converts to the instant).
func nowFor(c mysqlColumn) string {
	if c.typ == "timestamp" {
		return "NOW(6)"
	}
	return "UTC_TIMESTAMP(6)"
}

// fromUTC renders a UTC DATETIME of the relay table for a datetime or timestamp column.
func fromUTC(expr string, c mysqlColumn) string {
	if c.typ == "timestamp" {
		return "FROM_UNIXTIME(TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', " + expr + ") / 1000000)"
	}
	return expr
}

// checkStatusValues refuses status values the status column cannot hold.
func (r mysqlAdopt) checkStatusValues(col mysqlColumn) error {
	st := r.cfg.Status
	for _, v := range []string{st.Pending, st.Published, st.Failed} {
		if col.typ == "enum" {
			var allowed []string
			for _, m := range enumValues.FindAllStringSubmatch(col.full, -1) {
				allowed = append(allowed, strings.ReplaceAll(m[1], "''", "'"))
			}
			if !slices.ContainsFunc(allowed, func(a string) bool { return strings.EqualFold(a, v) }) {
				return fmt.Errorf("%w: status value %q is not a value of columns.status %q (%s)", ErrInvalidAdoptConfig, v, col.name, col.full)
			}
		}
		if col.maxChars > 0 && int64(len([]rune(v))) > col.maxChars {
			return fmt.Errorf("%w: status value %q is longer than columns.status %q (%s)", ErrInvalidAdoptConfig, v, col.name, col.full)
		}
	}
	return nil
}

// markSets renders, per state of a relay row (deleted, published, failed, replayed, retried),
// the assignments to the team's mapped columns, as on PostgreSQL (adopt_mark.go markSets).
func (r mysqlAdopt) markSets() (map[string][]string, error) {
	c, st := r.cfg.Columns, r.cfg.Status
	set := map[string][]string{}
	add := func(states []string, col mysqlColumn, value string) {
		for _, s := range states {
			set[s] = append(set[s], quoteMySQL(col.name)+" = "+value)
		}
	}
	if c.Status != "" {
		col, err := r.column("columns.status", c.Status)
		if err != nil {
			return nil, err
		}
		if err := r.checkStatusValues(col); err != nil {
			return nil, err
		}
		add([]string{"deleted", "published"}, col, quoteLiteral(st.Published))
		add([]string{"failed"}, col, quoteLiteral(st.Failed))
		add([]string{"replayed"}, col, quoteLiteral(st.Pending))
	}
	if c.PublishedAt != "" {
		col, err := r.column("columns.published_at", c.PublishedAt, mysqlTimeTypes...)
		if err != nil {
			return nil, err
		}
		add([]string{"deleted"}, col, nowFor(col))
		add([]string{"published"}, col, "COALESCE("+fromUTC("NEW.published_at", col)+", "+nowFor(col)+")")
	}
	if c.RetryCount != "" {
		col, err := r.column("columns.retry_count", c.RetryCount, mysqlIntTypes...)
		if err != nil {
			return nil, err
		}
		add([]string{"failed", "retried"}, col, "NEW.attempts")
		add([]string{"replayed"}, col, "0")
	}
	if c.NextRetryAt != "" {
		col, err := r.column("columns.next_retry_at", c.NextRetryAt, mysqlTimeTypes...)
		if err != nil {
			return nil, err
		}
		add([]string{"deleted", "published", "failed", "replayed"}, col, "NULL")
		add([]string{"retried"}, col, fromUTC("NEW.next_attempt_at", col))
	}
	if c.LastError != "" {
		col, err := r.column("columns.last_error", c.LastError, mysqlTextTypes...)
		if err != nil {
			return nil, err
		}
		reason := "NEW.last_error"
		switch {
		case col.typ == "char" || col.typ == "varchar":
			reason = fmt.Sprintf("LEFT(%s, %d)", reason, col.maxChars)
		case col.typ == "tinytext" || col.typ == "text":
			reason = fmt.Sprintf("LEFT(%s, %d)", reason, col.octetLength/4) // fits in any character set
		}
		add([]string{"failed", "retried"}, col, fmt.Sprintf("CONVERT(%s USING %s)", reason, col.charset))
		add([]string{"replayed"}, col, "NULL")
	}
	return set, nil
}

// idMatch renders the condition finding the team's row of the relay row named row.
func (r mysqlAdopt) idMatch(row string) (string, error) {
	id, err := r.idColumn()
	if err != nil {
		return "", err
	}
	ev := row + ".event_id"
	switch id.typ {
	case "uuid":
		return fmt.Sprintf("%s = %s", quoteMySQL(id.name), ev), nil
	case "binary":
		return fmt.Sprintf("%s = UNHEX(REPLACE(%s, '-', ''))", quoteMySQL(id.name), ev), nil
	}
	// A UUID held as text: its canonical form in lower or upper case, in the column's own
	// collation (an IN list, so that the team's primary key index is used).
	conv := func(e string) string {
		return fmt.Sprintf("CONVERT(%s USING %s) COLLATE %s", e, id.charset, id.collation)
	}
	return fmt.Sprintf("%s IN (%s, %s)", quoteMySQL(id.name), conv(ev), conv("UPPER("+ev+")")), nil
}

// markBodies renders the two triggers on the relay table that mark the team's row: on update
// (published, dead or skipped, replayed, a failed attempt) and on delete (acknowledged while
// pending), the states of PostgreSQL's markBody.
func (r mysqlAdopt) markBodies() (onUpdate, onDelete string, err error) {
	set, err := r.markSets()
	if err != nil {
		return "", "", err
	}
	update := func(state, row string) (string, error) {
		if len(set[state]) == 0 {
			return "DO 0;", nil
		}
		match, err := r.idMatch(row)
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("UPDATE %s SET %s WHERE %s;", r.team, strings.Join(set[state], ", "), match), nil
	}
	var s [5]string
	for i, st := range []struct{ state, row string }{{"deleted", "OLD"}, {"published", "NEW"}, {"failed", "NEW"}, {"replayed", "NEW"}, {"retried", "NEW"}} {
		if s[i], err = update(st.state, st.row); err != nil {
			return "", "", err
		}
	}
	onDelete = fmt.Sprintf("IF OLD.status = 0 THEN\n    %s\nEND IF", s[0])
	onUpdate = fmt.Sprintf(`IF NEW.status = 1 AND OLD.status <> 1 THEN
    %s
ELSEIF NEW.status IN (2, 3) AND OLD.status NOT IN (2, 3) THEN
    %s
ELSEIF NEW.status = 0 AND OLD.status IN (2, 3) THEN
    %s
ELSEIF NEW.status = 0 AND NOT (NEW.attempts <=> OLD.attempts) THEN
    %s
END IF`, s[1], s[2], s[3], s[4])
	return onUpdate, onDelete, nil
}

// changed reports whether the plan's Install would change anything: a trigger or the function
// missing or with another body.
func (p *mysqlPlan) changed(ctx context.Context, conn *sql.Conn) (bool, error) {
	check := func(query string, name [2]string, body string) (bool, error) {
		var got sql.NullString
		err := conn.QueryRowContext(ctx, query, name[0], name[1]).Scan(&got)
		if errors.Is(err, sql.ErrNoRows) {
			return true, nil
		}
		return err != nil || got.String != body, err
	}
	for name, body := range p.functions {
		if changed, err := check("SELECT ROUTINE_DEFINITION FROM information_schema.ROUTINES WHERE BINARY ROUTINE_SCHEMA = ? AND BINARY ROUTINE_NAME = ? AND ROUTINE_TYPE = 'FUNCTION'", name, body); changed || err != nil {
			return true, err
		}
	}
	for name, body := range p.triggers {
		if changed, err := check("SELECT ACTION_STATEMENT FROM information_schema.TRIGGERS WHERE BINARY TRIGGER_SCHEMA = ? AND BINARY TRIGGER_NAME = ?", name, body); changed || err != nil {
			return true, err
		}
	}
	return false, nil
}

// adoptMySQL runs a MariaDB/MySQL plan on one session holding the adoption's named lock: the
// function, then under LOCK TABLES (the team's writers wait) the triggers and the backfill. A
// failed backfill drops the copy trigger again, so that no event is copied ahead of the older
// pending ones of its key.
func adoptMySQL(ctx context.Context, db *sql.DB, relay Table, plan AdoptPlan) (res AdoptResult, err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return res, fmt.Errorf("outbox: adopt into %s: %w", relay, err)
	}
	defer conn.Close()
	release, err := lockMySQL(ctx, conn, "adopt:"+relay.Events())
	if err != nil {
		return res, fmt.Errorf("outbox: adopt into %s: %w", relay, err)
	}
	defer func() { _ = release() }()
	mp := plan.mysql
	if res.Changed, err = mp.changed(ctx, conn); err != nil {
		return res, fmt.Errorf("outbox: adopt %s: read the installed triggers: %w", plan.team, err)
	}
	stmts := plan.Install[mp.lockAt : mp.lockAt+1]
	if res.Changed {
		stmts = plan.Install
	}
	locked := false
	defer func() {
		if locked {
			if _, uerr := conn.ExecContext(context.WithoutCancel(ctx), plan.Unlock); uerr != nil {
				// Never hand a session holding table locks back to the pool.
				_ = conn.Raw(func(any) error { return driver.ErrBadConn })
			}
		}
	}()
	for i, stmt := range stmts {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return AdoptResult{}, fmt.Errorf("outbox: adopt %s: %w (statement: %s)", plan.team, err, firstLine(stmt))
		}
		locked = locked || stmts[i] == plan.Install[mp.lockAt]
	}
	if plan.Backfill != "" {
		r, err := conn.ExecContext(ctx, plan.Backfill, plan.BackfillArgs...)
		if err == nil {
			res.Backfilled, err = r.RowsAffected()
		}
		if err != nil {
			if res.Changed {
				_, _ = conn.ExecContext(context.WithoutCancel(ctx), mp.dropForward)
			}
			return AdoptResult{}, fmt.Errorf("outbox: adopt %s: backfill: %w", plan.team, err)
		}
	}
	locked = false
	if _, err := conn.ExecContext(ctx, plan.Unlock); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		return AdoptResult{}, fmt.Errorf("outbox: adopt %s: %w", plan.team, err)
	}
	return res, nil
}

// unadoptMySQL runs stmts (each commits at once) on one session holding the adoption's lock.
func unadoptMySQL(ctx context.Context, db *sql.DB, relay Table, stmts []string) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("outbox: undo adoption by %s: %w", relay, err)
	}
	defer conn.Close()
	release, err := lockMySQL(ctx, conn, "adopt:"+relay.Events())
	if err != nil {
		return fmt.Errorf("outbox: undo adoption by %s: %w", relay, err)
	}
	defer func() { _ = release() }()
	for _, stmt := range stmts {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("outbox: undo adoption by %s: %w (statement: %s)", relay, err, firstLine(stmt))
		}
	}
	return nil
}

// unadoptStatementsMySQL renders the MariaDB/MySQL statements of [UnadoptStatements]. Without
// a schema the names are those of the connection's database, as Adopt resolved them.
func unadoptStatementsMySQL(relay Table, cfg AdoptConfig, dropRelayTable bool) []string {
	short := relay.shortName()
	relayDB := strings.TrimSuffix(relay.Events(), short)
	name := func(db, n string) string {
		if db == "" {
			return quoteMySQL(n)
		}
		return quoteMySQL(strings.TrimSuffix(db, ".")) + "." + quoteMySQL(n)
	}
	teamDB := ""
	if cfg.Schema != "" {
		teamDB = cfg.Schema + "."
	}
	stmts := []string{
		"DROP TRIGGER IF EXISTS " + name(teamDB, short+"_adopt_forward"),
		"DROP TRIGGER IF EXISTS " + name(relayDB, short+"_adopt_mark"),
		"DROP TRIGGER IF EXISTS " + name(relayDB, short+"_adopt_mark_del"),
		"DROP FUNCTION IF EXISTS " + name(relayDB, short+"_adopt_headers"),
	}
	if dropRelayTable {
		for _, t := range relay.Tables() {
			stmts = append(stmts, "DROP TABLE IF EXISTS "+t)
		}
	}
	return stmts
}
