package forwarder

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/outboxkit/outboxkit/forwarder/internal/sqlstore"
	"github.com/outboxkit/outboxkit/outbox"
)

// ListenPostgres LISTENs on the table's notification channel (the outbox migration installs a
// trigger that notifies it on every committing insert) and returns a channel that receives a
// value for each notification, for [Config.Wakeups]: an idle forwarder then relays a new event
// within milliseconds instead of at its next poll. It keeps its own connection to dsn,
// reconnecting with backoff (and waking the forwarder after each reconnect, in case a
// notification was missed), until ctx is cancelled; then the channel is closed.
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
	listen := sqlstore.Listen(table)
	go func() {
		defer close(wakes)
		backoff := 100 * time.Millisecond
		for ctx.Err() == nil {
			err := listenOnce(ctx, dsn, listen, wake, func() { backoff = 100 * time.Millisecond })
			if ctx.Err() != nil {
				return
			}
			logger.Warn("outbox LISTEN connection lost, reconnecting", "channel", table.Channel(), "error", err, "in", backoff)
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(backoff*2, 10*time.Second)
		}
	}()
	return wakes
}

func listenOnce(ctx context.Context, dsn, listen string, wake, connected func()) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if _, err := conn.Exec(ctx, listen); err != nil {
		return err
	}
	connected()
	wake()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		wake()
	}
}
