package forwardertest

import (
	"context"
	"database/sql"
	"fmt"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// RelayPostgres commits events in one transaction to a fresh PostgreSQL outbox of cfg (its
// Table, usually a testsupport.UniqueName; Dialect is set here) and runs a forwarder relaying
// them through pub, dead letters to dlq ("" for none), until the count query pending (%s for
// the events table) returns 0; it stops the forwarder and returns the database and the events
// table. When ctx ends first, the test fails with the last count, the query's error and the
// events' last error.
func RelayPostgres(t testing.TB, ctx context.Context, cfg outbox.Config, pub message.Publisher, dlq string,
	events []outbox.Event, pending string) (*sql.DB, string) {
	t.Helper()
	db := testsupport.OpenPostgres(t)
	cfg.Dialect = outbox.Postgres
	w := testsupport.NewOutbox(t, db, cfg)
	if err := testsupport.WriteEvents(ctx, db, w, events...); err != nil {
		t.Fatal(err)
	}
	table := w.Table().Events()
	stop := Start(t, forwarder.Config{
		DB: db, Dialect: outbox.Postgres, Table: table, Publisher: pub, DeadLetterTopic: dlq,
		MaxPollInterval: 200 * time.Millisecond, InitialInterval: 50 * time.Millisecond, MaxInterval: time.Second,
		Logger: QuietLogger(),
	})
	defer stop()
	for {
		var left int
		var lastError string
		err := db.QueryRowContext(ctx, fmt.Sprintf(pending, table)).Scan(&left)
		if err == nil && left == 0 {
			return db, table
		}
		if qerr := db.QueryRowContext(ctx, "SELECT COALESCE(MAX(last_error), '') FROM "+table).Scan(&lastError); qerr != nil && err == nil {
			err = qerr
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the forwarder did not relay every event in time: %d rows pending (query error %v, last error %q)", left, err, lastError)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
