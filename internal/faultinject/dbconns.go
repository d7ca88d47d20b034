package faultinject

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"time"

	"github.com/outboxkit/outboxkit/outbox"
)

// cutRelayConnections terminates the database connections of every installation's relays.
func (e *env) cutRelayConnections(ctx context.Context) (int, error) {
	if e.cfg.Dialect == outbox.Postgres {
		total := 0
		for _, in := range e.insts {
			n, err := cutConnections(ctx, e.db, in.appName)
			if err != nil {
				return total, err
			}
			total += n
		}
		return total, nil
	}
	for attempt := 0; attempt < 50; attempt++ {
		var pids []int
		for _, in := range e.insts {
			pids = append(pids, in.rl.pids()...)
		}
		conns, err := e.connections(ctx, pids)
		if err != nil {
			return 0, err
		}
		n := 0
		for _, c := range conns {
			// The id is an integer read from the server, not input.
			if _, err := e.db.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(c.id, 10)); err == nil {
				n++
			}
		}
		if n > 0 {
			return n, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0, nil
}

// cutConnections terminates every PostgreSQL connection whose application_name is appName,
// retrying for a few seconds until there is at least one (the relays may be reconnecting).
func cutConnections(ctx context.Context, db *sql.DB, appName string) (int, error) {
	for attempt := 0; attempt < 50; attempt++ {
		var n int
		err := db.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE application_name = $1 AND pid <> pg_backend_pid()) t`, appName).Scan(&n)
		if err != nil {
			return 0, fmt.Errorf("faultinject: pg_terminate_backend: %w", err)
		}
		if n > 0 {
			return n, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return 0, nil
}

// conn is one database connection of a relay, as the server sees it.
type conn struct {
	id    int64  // PostgreSQL backend pid or MariaDB connection id
	state string // PostgreSQL state; MariaDB COMMAND
	inTx  bool
}

// connections lists the database connections of the processes pids, told apart by their
// client ports.
func (e *env) connections(ctx context.Context, pids []int) ([]conn, error) {
	ports, err := localPorts(pids)
	if err != nil || len(ports) == 0 {
		return nil, err
	}
	var query string
	if e.cfg.Dialect == outbox.Postgres {
		query = `SELECT pid, coalesce(state, ''), coalesce(state IN ('idle in transaction', 'idle in transaction (aborted)'), false),
			coalesce(client_port, 0) FROM pg_stat_activity WHERE pid <> pg_backend_pid()`
	} else {
		query = `SELECT p.ID, p.COMMAND, EXISTS (SELECT 1 FROM information_schema.INNODB_TRX t WHERE t.trx_mysql_thread_id = p.ID),
			SUBSTRING_INDEX(p.HOST, ':', -1) FROM information_schema.PROCESSLIST p WHERE p.ID <> CONNECTION_ID() AND p.HOST LIKE '%:%'`
	}
	rows, err := e.db.QueryContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("faultinject: list connections: %w", err)
	}
	defer rows.Close()
	var out []conn
	for rows.Next() {
		var c conn
		var port string
		if err := rows.Scan(&c.id, &c.state, &c.inTx, &port); err != nil {
			return nil, err
		}
		if p, err := strconv.Atoi(port); err == nil && ports[p] {
			out = append(out, c)
		}
	}
	return out, rows.Err()
}
