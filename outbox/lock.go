package outbox

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
)

// AdvisoryNamespace is the first key of every PostgreSQL advisory lock outboxkit takes ("obkt").
// outboxkit takes only two-key locks (pg_advisory_xact_lock(int4, int4)), whose key space
// PostgreSQL keeps apart from the single-key (bigint) one, so an application's own
// pg_advisory_lock(bigint) can never block outboxkit or be blocked by it; an application using
// two-key locks has only this first key, and WakeNamespace, to avoid.
const AdvisoryNamespace int32 = 0x6f626b74

// WakeNamespace is the first key of the tables' wake-up locks ([Table.WakeLock], "obkw"): apart
// from AdvisoryNamespace, so that no ordering key's lock, whose second key is a 32-bit fold of
// the key's hash, can ever be the wake-up lock a waiting relay holds for as long as it waits.
const WakeNamespace int32 = 0x6f626b77

// AdvisoryXactLock returns the SQL call that takes outboxkit's transaction-scoped advisory lock on
// key, an SQL expression of type integer (int4) such as a placeholder or a column: every
// PostgreSQL advisory lock of outboxkit is taken through it.
func AdvisoryXactLock(key string) string {
	return "pg_advisory_xact_lock(" + strconv.Itoa(int(AdvisoryNamespace)) + ", " + key + ")"
}

// AdvisoryKey returns the second advisory-lock key outboxkit uses for name (a 32-bit FNV-1a hash).
func AdvisoryKey(name string) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return int32(h.Sum32())
}

// WakeLock returns the second key (beside [WakeNamespace]) of the table's wake-up lock on
// PostgreSQL. A polling relay's listener holds it, exclusively and on its session, while the relay
// waits for new events; the notify trigger (schema v8) tries it in shared mode, for the rest of the
// writer's transaction, and notifies only when that fails, that is while a relay waits. A writer
// that did not notify holds the shared lock until its transaction ends, so a relay takes the lock,
// and starts waiting, only after every such writer has committed or rolled back.
func (t Table) WakeLock() int32 { return AdvisoryKey("wake:" + t.Channel()) }

// foldKeyHash folds a 64-bit ordering-key hash into an advisory-lock key. Two keys sharing a
// folded value serialize needlessly, which costs a little concurrency and nothing else.
func foldKeyHash(h int64) int32 {
	u := uint64(h)
	return int32(uint32(u ^ u>>32))
}

// mysqlLockName is the SQL expression naming the GET_LOCK lock of a migrations table: server-wide
// names are qualified by the current database and hashed under MySQL's 64-character limit.
const mysqlLockName = "CONCAT('outboxkit:migrate:', LEFT(SHA2(CONCAT(COALESCE(DATABASE(), ''), '.', ?), 256), 40))"

// mysqlLockPoll is how long one GET_LOCK call waits, in seconds, before the context is checked again.
const mysqlLockPoll = 1

// lockMySQL takes the named lock of versionTable on conn's session, waiting until it is free or
// ctx ends, and returns the function that releases it.
func lockMySQL(ctx context.Context, conn *sql.Conn, versionTable string) (release func() error, err error) {
	for {
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK("+mysqlLockName+", ?)", versionTable, mysqlLockPoll).Scan(&got); err != nil {
			return nil, fmt.Errorf("GET_LOCK: %w", err)
		}
		if got.Valid && got.Int64 == 1 {
			break
		}
		if !got.Valid {
			return nil, errors.New("GET_LOCK returned NULL")
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("wait for the migration lock: %w", err)
		}
	}
	return func() error {
		var released sql.NullInt64
		err := conn.QueryRowContext(context.WithoutCancel(ctx), "SELECT RELEASE_LOCK("+mysqlLockName+")", versionTable).Scan(&released)
		if err != nil {
			discard(conn) // ending the session releases the lock
			return fmt.Errorf("RELEASE_LOCK: %w", err)
		}
		return nil
	}, nil
}

// sqliteBusyTimeoutMillis is the busy timeout a migration run waits for SQLite's write lock with
// when the connection has none (or a shorter one) configured.
const sqliteBusyTimeoutMillis = 30000

// sqliteBusyTimeout raises the connection's busy timeout for the run, so that BEGIN IMMEDIATE
// waits for another writer instead of failing at once, and returns the function restoring it.
func sqliteBusyTimeout(ctx context.Context, conn *sql.Conn) (restore func() error, err error) {
	var current int
	if err := conn.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&current); err != nil {
		return nil, fmt.Errorf("read busy_timeout: %w", err)
	}
	if current >= sqliteBusyTimeoutMillis {
		return func() error { return nil }, nil
	}
	if _, err := conn.ExecContext(ctx, "PRAGMA busy_timeout = "+strconv.Itoa(sqliteBusyTimeoutMillis)); err != nil {
		return nil, fmt.Errorf("set busy_timeout: %w", err)
	}
	return func() error {
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), "PRAGMA busy_timeout = "+strconv.Itoa(current)); err != nil {
			discard(conn)
			return fmt.Errorf("restore busy_timeout: %w", err)
		}
		return nil
	}, nil
}

// discard makes database/sql close conn instead of returning it to the pool, for a session
// whose state (a held lock, an open transaction, a setting) could not be restored.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return driver.ErrBadConn })
}
