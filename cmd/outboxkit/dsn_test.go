package main

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/cmd/outboxkit/internal/relayconfig"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// A data source name the dialect's driver cannot parse is a configuration error (exit 2) naming
// database.dsn, with the password redacted, not a runtime "unreachable" (exit 1).
func TestUnparsableDSNIsAConfigurationError(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ dialect, dsn string }{
		{"postgres", "mysql://app:s3cret-pw@db:3306/app"},
		{"postgres", "postgres://app:s3cret-pw@db:notaport/app"},
		{"mysql", "postgres://app:s3cret-pw@db:5432/app"},
	} {
		dir := writeConfig(t, "database:\n  dialect: "+c.dialect+"\n  dsn: "+c.dsn+"\nbroker: kafka\nkafka:\n  brokers: [127.0.0.1:1]\n")
		for _, args := range [][]string{{"status"}, {"migrate"}, {"relay"}} {
			res := cli(t, dir, args...)
			if res.code != 2 || !strings.Contains(res.stderr, "database.dsn") || strings.Contains(res.stdout+res.stderr, "s3cret-pw") {
				t.Errorf("%s with %s dsn %q: %s; want exit 2 naming database.dsn without the password", args[0], c.dialect, c.dsn, res)
			}
		}
	}
}

// The relay's pool keeps the connections its goroutines use at once: eight connections used
// together and given back stay open, instead of all but database/sql's default two being closed
// (to be opened again by the next burst).
func TestRelayPoolKeepsItsConnectionsIdle(t *testing.T) {
	db, err := openDB(relayconfig.Database{Dialect: outbox.Postgres, DSN: testsupport.PostgresDSN(t), Table: "outbox_events"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	var conns []*sql.Conn
	for range 8 {
		c, err := db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		_ = c.Close()
	}
	if st := db.Stats(); st.MaxIdleClosed != 0 || st.Idle != 8 {
		t.Fatalf("after 8 connections were given back: %d idle, %d closed for lack of idle room; want 8 and 0", st.Idle, st.MaxIdleClosed)
	}
}
