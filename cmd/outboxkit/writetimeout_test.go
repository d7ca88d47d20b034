package main

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// http.write_timeout ends a request whose answer does not come in time: an admin API request
// held by a lock on the outbox table (a real PostgreSQL lock the test holds) is cut off after
// the configured 1s (its database work cancelled, the connection ended or a 5xx answered) instead
// of holding its connection for the request's own 30 s bound.
func TestServerWriteTimeoutEndsAHeldRequest(t *testing.T) {
	t.Parallel()
	db := testsupport.OpenPostgres(t)
	table := testsupport.UniqueName("cli_wto")
	dropTables(t, db, table)
	tbl, err := outbox.NewTable(outbox.Postgres, table)
	if err != nil {
		t.Fatal(err)
	}
	if err := outbox.Migrate(context.Background(), db, tbl); err != nil {
		t.Fatal(err)
	}
	h := startTestHTTP(t, "  dialect: postgres\n  dsn: "+testsupport.PostgresDSN(t)+"\n  table: "+table+"\n", "  write_timeout: 1s\n")
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.Exec("LOCK TABLE " + table + " IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://"+h.addr+"/api/v1/backlog", nil)
	req.Header.Set("Authorization", "Bearer "+readToken)
	client := &http.Client{Timeout: clientBound}
	resp, err := client.Do(req)
	var ne interface{ Timeout() bool }
	switch {
	case err == nil:
		_ = resp.Body.Close()
		if resp.StatusCode < 500 {
			t.Errorf("a request held by a lock answered %d, want it ended by http.write_timeout", resp.StatusCode)
		}
	case errors.As(err, &ne) && ne.Timeout():
		t.Errorf("a request held by a lock: the server still held it after %s: %v", clientBound, err)
	}
}
