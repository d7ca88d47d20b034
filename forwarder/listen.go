package forwarder

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/forwarder/internal/sqlstore"
	"github.com/outboxkit/outboxkit/outbox"
)

// The listener's watch of max(seq) while writers do not notify: every watchMinInterval while the
// table changes, backing off to watchMaxInterval while it does not and the wake-up lock stays
// taken (by another relay's listener, whose waiting makes the writers notify every listener, or
// by a long transaction that has not notified).
const (
	watchMinInterval = 5 * time.Millisecond
	watchMaxInterval = 50 * time.Millisecond
)

// ListenPostgres LISTENs on the table's notification channel and returns a channel that receives
// a value whenever new events may have committed, for [Config.Wakeups]: an idle forwarder then
// relays a new event within milliseconds instead of at its next poll. It keeps its own connection
// to dsn, reconnecting with backoff (and waking the forwarder after each reconnect, in case a
// notification was missed), until ctx is cancelled; then the channel is closed.
//
// Writers notify only while a relay waits (schema v8, [outbox.Table.WakeLock]), because a
// NOTIFY makes concurrent commits take turns. The listener waits, holding the table's wake-up
// lock, once the table has stopped changing and every writer that did not notify has ended (the
// forwarder is woken then, to claim what they wrote); a notification wakes the forwarder and ends
// the wait. Until it waits again, it reads max(seq) every 5 ms (up to 50 ms while nothing
// changes) and wakes the forwarder when it changes. An idle relay sends no query; a busy one
// sends about 200 a second on this connection instead of its writers notifying.
func ListenPostgres(ctx context.Context, dsn string, table outbox.Table, logger *slog.Logger) <-chan struct{} {
	if logger == nil {
		logger = slog.Default()
	}
	wakes := make(chan struct{}, 1)
	wake := func() {
		select {
		case wakes <- struct{}{}:
		default:
		}
	}
	go func() {
		defer close(wakes)
		backoff := 100 * time.Millisecond
		for ctx.Err() == nil {
			l := listener{table: table, wake: wake, connected: func() { backoff = 100 * time.Millisecond }}
			err := l.run(ctx, dsn)
			if ctx.Err() != nil {
				return
			}
			logger.Warn("outbox LISTEN connection lost, reconnecting", "channel", table.Channel(), "error", err, "in", backoff)
			if !relay.Sleep(ctx, backoff) {
				return
			}
			backoff = min(backoff*2, 10*time.Second)
		}
	}()
	return wakes
}

// listener is one connection of ListenPostgres: it waits for notifications while it holds the
// wake-up lock, and watches max(seq) while it does not.
type listener struct {
	table     outbox.Table
	wake      func()
	connected func()
	conn      *pgx.Conn
	// latest is the last max(seq) read (NULL: none yet, or an empty table).
	latest *int64
}

// run connects, LISTENs and alternates between watching and waiting until ctx ends or the
// connection fails. Ending the session releases the wake-up lock.
func (l *listener) run(ctx context.Context, dsn string) error {
	config, err := pgx.ParseConfig(dsn)
	if err != nil {
		return fmt.Errorf("parse the DSN: %w", err)
	}
	// Every notification wakes the forwarder, also one that arrives during a query.
	config.OnNotification = func(*pgconn.PgConn, *pgconn.Notification) { l.wake() }
	if l.conn, err = pgx.ConnectConfig(ctx, config); err != nil {
		return err
	}
	defer func() { _ = l.conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := l.conn.Exec(ctx, sqlstore.Listen(l.table)); err != nil {
		return err
	}
	l.connected()
	l.wake()
	interval := watchMinInterval
	for {
		changed, err := l.changed(ctx)
		if err != nil {
			return err
		}
		if changed {
			l.wake()
			interval = watchMinInterval
		} else if waited, err := l.waitIfQuiet(ctx); err != nil {
			return err
		} else if waited {
			interval = watchMinInterval
			continue
		} else {
			interval = min(interval*2, watchMaxInterval)
		}
		if notified, err := l.notification(ctx, interval); err != nil {
			return err
		} else if notified {
			interval = watchMinInterval
		}
	}
}

// changed reads max(seq) and reports whether it differs from the last read.
func (l *listener) changed(ctx context.Context) (bool, error) {
	var latest *int64
	if err := l.conn.QueryRow(ctx, sqlstore.LatestSeq(l.table)).Scan(&latest); err != nil {
		return false, fmt.Errorf("watch %s: %w", l.table, err)
	}
	same := (latest == nil && l.latest == nil) || (latest != nil && l.latest != nil && *latest == *l.latest)
	l.latest = latest
	return !same, nil
}

// waitIfQuiet takes the wake-up lock if it is free, and then wakes the forwarder (every writer
// that did not notify has ended: its next claim sees their rows) and waits for a notification,
// the writers notifying from now on; then it releases the lock. It reports whether it waited;
// false when the lock is taken (a writer that did not notify is still open, or another relay
// waits).
func (l *listener) waitIfQuiet(ctx context.Context) (bool, error) {
	var locked bool
	if err := l.conn.QueryRow(ctx, sqlstore.WaitLock(l.table)).Scan(&locked); err != nil {
		return false, fmt.Errorf("take the wake-up lock of %s: %w", l.table, err)
	}
	if !locked {
		return false, nil
	}
	l.wake()
	if err := l.conn.PgConn().WaitForNotification(ctx); err != nil {
		return false, err
	}
	if _, err := l.conn.Exec(ctx, sqlstore.WaitUnlock(l.table)); err != nil {
		return false, fmt.Errorf("release the wake-up lock of %s: %w", l.table, err)
	}
	return true, nil
}

// notification waits up to d for a notification and reports whether one came.
func (l *listener) notification(ctx context.Context, d time.Duration) (bool, error) {
	waitCtx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := l.conn.PgConn().WaitForNotification(waitCtx)
	switch {
	case err == nil:
		return true, nil
	case ctx.Err() != nil:
		return false, ctx.Err()
	case errors.Is(waitCtx.Err(), context.DeadlineExceeded) && !l.conn.IsClosed():
		return false, nil
	}
	return false, err
}
