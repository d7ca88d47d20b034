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

// AdoptPlan is the SQL [Adopt] runs after migrating the relay table: what `outboxkit adopt
// --dry-run` prints.
type AdoptPlan struct {
	// Install creates or replaces the functions and triggers. On MariaDB/MySQL it holds the
	// LOCK TABLES statement that keeps the team's writers out until Unlock.
	Install []string
	// Backfill copies the team's pending rows (BackfillArgs binds the pending status value);
	// empty when no status column is mapped.
	Backfill     string
	BackfillArgs []any
	// Unlock (MariaDB/MySQL: UNLOCK TABLES) ends the lock Install took, after Backfill; empty on
	// PostgreSQL, where the adoption is one transaction.
	Unlock string
	team   string
	// mysql is what [Adopt] needs of a MariaDB/MySQL plan (nil on PostgreSQL).
	mysql *mysqlPlan
	// bodies maps each function's signature to its body and whether it is SECURITY DEFINER
	// with the adoption's search path, to tell whether Install changes anything.
	bodies map[string]adoptFunction
	// triggers maps each trigger to the table it is on.
	triggers map[string]string
}

// adoptFunction is what [AdoptPlan.changed] compares of a function.
type adoptFunction struct {
	body    string
	definer bool
}

// pgColumn is a column of the team's table: its type name (pg_type.typname) and full type.
type pgColumn struct{ typ, full string }

// PlanAdopt validates cfg against the database's catalog (the team's table and its mapped
// columns must exist with usable types) and renders the statements of [Adopt], changing nothing.
func PlanAdopt(ctx context.Context, db *sql.DB, relay Table, cfg AdoptConfig) (AdoptPlan, error) {
	if err := checkAdoptDialect(relay); err != nil {
		return AdoptPlan{}, err
	}
	if err := cfg.Validate(); err != nil {
		return AdoptPlan{}, err
	}
	cfg = cfg.withDefaults()
	if relay.Dialect() == MySQL {
		return planAdoptMySQL(ctx, db, relay, cfg)
	}
	team := teamTable(cfg)
	if strings.EqualFold(strings.ReplaceAll(team, `"`, ""), relay.Events()) || (cfg.Schema == "" && cfg.Table == relay.Events()) {
		return AdoptPlan{}, fmt.Errorf("%w: the relay table %s is the team's table %s: give the relay table another name (database.table, such as %s_relay)",
			ErrInvalidAdoptConfig, relay, team, cfg.Table)
	}
	cols, err := readColumns(ctx, db, team)
	if err != nil {
		return AdoptPlan{}, err
	}
	if cfg.Schema == "" {
		// Qualified in the triggers: the relay's sessions may have another search path.
		if err := db.QueryRowContext(ctx, "SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass($1)",
			team).Scan(&cfg.Schema); err != nil {
			return AdoptPlan{}, fmt.Errorf("outbox: adopt: look up the schema of %s: %w", team, err)
		}
		team = teamTable(cfg)
	}
	r := adoptRenderer{cfg: cfg, relay: relay, team: team, cols: cols}
	return r.plan()
}

// teamTable is the quoted, optionally schema-qualified name of the team's table.
func teamTable(cfg AdoptConfig) string {
	if cfg.Schema == "" {
		return quoteIdent(cfg.Table)
	}
	return quoteIdent(cfg.Schema) + "." + quoteIdent(cfg.Table)
}

// readColumns reads the columns of the team's table from the catalog.
func readColumns(ctx context.Context, db *sql.DB, team string) (map[string]pgColumn, error) {
	var exists bool
	if err := db.QueryRowContext(ctx, "SELECT to_regclass($1) IS NOT NULL", team).Scan(&exists); err != nil {
		return nil, fmt.Errorf("outbox: adopt: look up table %s: %w", team, err)
	}
	if !exists {
		return nil, fmt.Errorf("%w: table %s does not exist (check table and schema; names are case-sensitive)", ErrInvalidAdoptConfig, team)
	}
	rows, err := db.QueryContext(ctx, "SELECT a.attname, t.typname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a"+
		" JOIN pg_type t ON t.oid = a.atttypid WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped", team)
	if err != nil {
		return nil, fmt.Errorf("outbox: adopt: read the columns of %s: %w", team, err)
	}
	defer rows.Close()
	cols := map[string]pgColumn{}
	for rows.Next() {
		var name string
		var c pgColumn
		if err := rows.Scan(&name, &c.typ, &c.full); err != nil {
			return nil, fmt.Errorf("outbox: adopt: read the columns of %s: %w", team, err)
		}
		cols[name] = c
	}
	return cols, rows.Err()
}

// topicPart is a literal or a {column[|lower]} placeholder of a topic template.
type topicPart struct {
	literal, column string
	lower           bool
}

var (
	placeholder     = regexp.MustCompile(`\{([^{}|]+)(\|lower)?\}`)
	topicLiteralSet = regexp.MustCompile(`^[A-Za-z0-9._:$-]*$`)
)

// parseTopicTemplate splits a template such as "{aggregate_type|lower}.events".
func parseTopicTemplate(tmpl string) ([]topicPart, error) {
	var parts []topicPart
	last := 0
	for _, m := range placeholder.FindAllStringSubmatchIndex(tmpl, -1) {
		parts = append(parts, topicPart{literal: tmpl[last:m[0]]}, topicPart{column: tmpl[m[2]:m[3]], lower: m[4] >= 0})
		last = m[1]
	}
	parts = append(parts, topicPart{literal: tmpl[last:]})
	hasColumn := false
	for _, p := range parts {
		if p.column != "" {
			hasColumn = true
		}
		if !topicLiteralSet.MatchString(p.literal) {
			return nil, fmt.Errorf("%w: topic_template %q: the text outside {column} or {column|lower} may only hold letters, digits and . _ - : $",
				ErrInvalidAdoptConfig, tmpl)
		}
	}
	if !hasColumn {
		return nil, fmt.Errorf("%w: topic_template %q has no {column} placeholder; for one topic use a placeholder-free column or set columns.topic",
			ErrInvalidAdoptConfig, tmpl)
	}
	return parts, nil
}

// adoptRenderer renders the SQL of one adoption.
type adoptRenderer struct {
	cfg   AdoptConfig
	relay Table
	team  string
	cols  map[string]pgColumn
}

// column checks that a mapped column exists with one of the allowed types.
func (r adoptRenderer) column(key, name string, types ...string) (pgColumn, error) {
	c, ok := r.cols[name]
	if !ok {
		return c, fmt.Errorf("%w: %s %q: table %s has no such column (names are case-sensitive; it has %s)",
			ErrInvalidAdoptConfig, key, name, r.team, strings.Join(slices.Sorted(maps.Keys(r.cols)), ", "))
	}
	if len(types) > 0 && !slices.Contains(types, c.typ) {
		return c, fmt.Errorf("%w: %s %q is of type %s; allowed: %s", ErrInvalidAdoptConfig, key, name, c.full, strings.Join(types, ", "))
	}
	return c, nil
}

var textTypes = []string{"text", "varchar", "bpchar"}

// values renders the relay table's columns and their values from the team's row named row.
func (r adoptRenderer) values(row string) (cols, exprs []string, err error) {
	c := r.cfg.Columns
	ref := func(name string) string { return row + "." + quoteIdent(name) }
	id, err := r.column("columns.event_id", c.EventID, append([]string{"uuid"}, textTypes...)...)
	if err != nil {
		return nil, nil, err
	}
	idExpr := ref(c.EventID)
	if id.typ != "uuid" {
		idExpr += "::text::uuid"
	}
	topic, err := r.topicExpr(ref)
	if err != nil {
		return nil, nil, err
	}
	cols, exprs = []string{"event_id", "topic"}, []string{idExpr, topic}
	for _, m := range []struct {
		key, name, target, wrap string
		types                   []string
	}{
		{"columns.aggregate_id", c.AggregateID, "aggregate_id", "%s::text", nil},
		{"columns.event_type", c.EventType, "event_type", "%s::text", nil},
		{"columns.aggregate_type", c.AggregateType, "aggregate_type", "%s::text", nil},
		{"columns.payload", c.Payload, "payload", "", append([]string{"bytea", "json", "jsonb"}, textTypes...)},
		{"columns.headers", c.Headers, "headers", r.relay.Events() + "_adopt_headers(%s::text::jsonb)", append([]string{"json", "jsonb"}, textTypes...)},
		{"columns.created_at", c.CreatedAt, "created_at", "%s::timestamptz", []string{"timestamptz", "timestamp"}},
	} {
		if m.name == "" {
			continue
		}
		col, err := r.column(m.key, m.name, m.types...)
		if err != nil {
			return nil, nil, err
		}
		wrap := m.wrap
		if m.target == "payload" {
			wrap = "convert_to(%s::text, 'UTF8')"
			if col.typ == "bytea" {
				wrap = "%s"
			}
		}
		cols, exprs = append(cols, m.target), append(exprs, fmt.Sprintf(wrap, ref(m.name)))
	}
	return cols, exprs, nil
}

// topicExpr renders the topic: the topic column, or the template's concatenation.
func (r adoptRenderer) topicExpr(ref func(string) string) (string, error) {
	if r.cfg.Columns.Topic != "" {
		if _, err := r.column("columns.topic", r.cfg.Columns.Topic); err != nil {
			return "", err
		}
		return ref(r.cfg.Columns.Topic) + "::text", nil
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
			if _, err := r.column("topic_template {"+p.column+"}", p.column); err != nil {
				return "", err
			}
			term := ref(p.column) + "::text"
			if p.lower {
				term = "lower(" + term + ")"
			}
			terms = append(terms, term)
		}
	}
	return "(" + strings.Join(terms, " || ") + ")", nil
}

// plan renders the functions, the triggers and the backfill.
func (r adoptRenderer) plan() (AdoptPlan, error) {
	cols, newExprs, err := r.values("NEW")
	if err != nil {
		return AdoptPlan{}, err
	}
	mark, err := r.markBody()
	if err != nil {
		return AdoptPlan{}, err
	}
	c, ev := r.cfg.Columns, r.relay.Events()
	p := AdoptPlan{team: r.team, bodies: map[string]adoptFunction{}, triggers: map[string]string{
		r.relay.shortName() + "_adopt_forward": r.team, r.relay.shortName() + "_adopt_mark": ev,
	}, Install: []string{adoptSearchPath}}
	if c.Headers != "" {
		p.addFunction(ev+"_adopt_headers(jsonb)", "jsonb LANGUAGE plpgsql IMMUTABLE", r.headersBody(), false)
	}
	forward := "BEGIN\n"
	if c.Status != "" {
		forward += fmt.Sprintf("    IF NEW.%s IS DISTINCT FROM %s THEN\n        RETURN NULL;\n    END IF;\n",
			quoteIdent(c.Status), quoteLiteral(r.cfg.Status.Pending))
	}
	forward += fmt.Sprintf("    INSERT INTO %s (%s)\n        VALUES (%s);\n    RETURN NULL;\nEND", ev, strings.Join(cols, ", "), strings.Join(newExprs, ", "))
	// SECURITY DEFINER: the team's writers need no rights on the relay table, nor the relay on
	// the team's table. The search path is the adoption's: the writers and the relay may have
	// other ones, in which the tables (and the any-writer trigger's functions) would not resolve.
	const attrs = "trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT"
	p.addFunction(ev+"_adopt_forward()", attrs, forward, true)
	p.addFunction(ev+"_adopt_mark()", attrs, mark, true)
	p.Install = append(p.Install,
		fmt.Sprintf("CREATE OR REPLACE TRIGGER %s_adopt_forward AFTER INSERT ON %s\n    FOR EACH ROW EXECUTE FUNCTION %s_adopt_forward()", r.relay.shortName(), r.team, ev),
		fmt.Sprintf("CREATE OR REPLACE TRIGGER %s_adopt_mark AFTER UPDATE OR DELETE ON %s\n    FOR EACH ROW EXECUTE FUNCTION %s_adopt_mark()", r.relay.shortName(), ev, ev))
	if c.Status != "" {
		_, tExprs, err := r.values("t")
		if err != nil {
			return AdoptPlan{}, err
		}
		order := "t." + quoteIdent(c.EventID)
		if c.CreatedAt != "" {
			order = "t." + quoteIdent(c.CreatedAt) + ", " + order
		}
		p.Backfill = fmt.Sprintf("INSERT INTO %s (%s)\n    SELECT %s FROM %s t\n    WHERE t.%s = $1 AND NOT EXISTS (SELECT 1 FROM %s r WHERE r.event_id = %s)\n    ORDER BY %s",
			ev, strings.Join(cols, ", "), strings.Join(tExprs, ", "), r.team, quoteIdent(c.Status), ev, tExprs[0], order)
		p.BackfillArgs = []any{r.cfg.Status.Pending}
	}
	return p, nil
}

// addFunction adds a CREATE OR REPLACE FUNCTION of signature returning returns with body;
// definer tells that returns makes it SECURITY DEFINER SET search_path FROM CURRENT.
func (p *AdoptPlan) addFunction(signature, returns, body string, definer bool) {
	p.bodies[signature] = adoptFunction{body: body, definer: definer}
	p.Install = append(p.Install, fmt.Sprintf("CREATE OR REPLACE FUNCTION %s RETURNS %s AS $adopt$%s$adopt$",
		strings.Replace(signature, "(jsonb)", "(h jsonb)", 1), returns, body))
}

// changed reports whether Install would change anything: a trigger missing, or a function
// missing or with another body.
func (p AdoptPlan) changed(ctx context.Context, tx *sql.Tx) (bool, error) {
	for sig, f := range p.bodies {
		var same bool
		err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_proc WHERE oid = to_regprocedure($1) AND prosrc = $2"+
			" AND prosecdef = $3 AND coalesce(proconfig, '{}') = CASE WHEN $3 THEN ARRAY['search_path=' || current_setting('search_path')] ELSE '{}' END)",
			sig, f.body, f.definer).Scan(&same)
		if err != nil || !same {
			return true, err
		}
	}
	for name, table := range p.triggers {
		var exists bool
		err := tx.QueryRowContext(ctx, "SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass($1) AND tgname = $2)", table, name).Scan(&exists)
		if err != nil || !exists {
			return true, err
		}
	}
	return false, nil
}
