package forwarder_test

import (
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestWALConfigErrorsNameTheValue: the wal source's settings, and what it does not combine
// with, are refused before anything runs, with errors naming the value.
func TestWALConfigErrorsNameTheValue(t *testing.T) {
	base := forwarder.Config{DB: &sql.DB{}, Dialect: outbox.Postgres, Publisher: nopPublisher{}, Source: forwarder.SourceWAL,
		WAL: forwarder.WALConfig{DSN: "postgres://h/db"}}
	for _, c := range []struct {
		edit func(*forwarder.Config)
		want string
	}{
		{func(c *forwarder.Config) { c.WAL.DSN = "" }, "WAL.DSN is required with Source wal"},
		{func(c *forwarder.Config) { c.Dialect = outbox.MySQL }, `Source wal needs the postgres dialect, got "mysql"`},
		{func(c *forwarder.Config) { c.WAL.DSN = "postgres://u:secret@host:notaport/db" }, "WAL.DSN is not a valid PostgreSQL connection string"},
		{func(c *forwarder.Config) { c.WAL.Slot = "Bad-Slot" }, `WAL.Slot: outbox: replication slot name "Bad-Slot"`},
		{func(c *forwarder.Config) { c.WAL.Slot = strings.Repeat("s", 64) }, "want 1 to 63 lower-case letters"},
		{func(c *forwarder.Config) { c.Delivery = forwarder.ExactlyOnce },
			`Delivery "exactly_once" needs a publisher with transactions`},
		{func(c *forwarder.Config) { c.Tenants = []string{"t1"} }, `Tenants ["t1"] is not supported on this source`},
		{func(c *forwarder.Config) { c.WAL.BatchSize = -1 }, "WAL.BatchSize -1 and WAL.MaxBatchBytes 1048576 must be positive"},
		{func(c *forwarder.Config) { c.WAL.MaxBatchBytes = -5 }, "WAL.BatchSize 1000 and WAL.MaxBatchBytes -5 must be positive"},
	} {
		cfg := base
		c.edit(&cfg)
		_, err := forwarder.New(cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("the error shows the DSN's password: %v", err)
		}
	}
	unsupported := base
	unsupported.Tenants = []string{"t1"}
	if err := unsupported.Validate(); !errors.Is(err, forwarder.ErrUnsupported) {
		t.Errorf("Source wal with Tenants: %v, want an error wrapping forwarder.ErrUnsupported", err)
	}
	if _, err := forwarder.New(base); err != nil {
		t.Fatalf("a valid wal config: %v", err)
	}
	for table, want := range map[string]string{"outbox_events": "outboxkit_wal_outbox_events",
		"App.Orders_Outbox": "outboxkit_wal_app_orders_outbox"} {
		if got := forwarder.WALSlotName(table, "default"); got != want {
			t.Errorf("WALSlotName(%q) = %q, want %q", table, got, want)
		}
	}
	if long := forwarder.WALSlotName(strings.Repeat("t", 60), "g"); len(long) > 63 {
		t.Errorf("WALSlotName of a long name is %d bytes: %q", len(long), long)
	}
}
