package faultinject

import (
	"testing"

	"github.com/outboxkit/outboxkit/outbox"
)

// TestFaultInjectionSQLWriters is the Kafka run with writers in any language: 4 connections
// writing by plain INSERT, one statement per event, key_hash left to the table's trigger
// (docs/writers.md), no outbox.Writer; 1,500 events over 100 keys, 10 % of the transactions
// rolled back, 3 relays SIGKILLed 6 times and SIGSTOPped twice, their database connections cut,
// on PostgreSQL and on MariaDB. The dedicated Kafka (the fault runs' own ports) is not
// restarted: that fault is the writers' business no more than outbox.Writer's, and the Kafka
// variants cover it. No loss, no phantom, per-key order, one effect per event.
func TestFaultInjectionSQLWriters(t *testing.T) {
	for _, dialect := range []outbox.Dialect{outbox.Postgres, outbox.MySQL} {
		t.Run(string(dialect), func(t *testing.T) {
			res := runFaultsWith(t, Kafka, dialect, false, "", 0, small, func(c *Config) { c.SQLWriters = true })
			t.Logf("plain-SQL writers on %s: %d committed, %d rolled back, %d delivered, %d duplicates, %d lost, %d phantoms, %d order violations",
				dialect, res.Committed, res.RolledBack, res.Delivered, res.Duplicates, res.Lost, res.Phantoms, res.OrderViolations)
		})
	}
}

// TestFaultInjectionMixedWriters is the same run with plain-SQL and Go writers together: of 4
// writer connections, two insert by plain SQL and two through outbox.Writer, on the same 50 keys
// (1,000 events), so that transactions of one key from both kinds of writer queue behind each
// other; per-key order must hold across them, on PostgreSQL and MariaDB.
func TestFaultInjectionMixedWriters(t *testing.T) {
	for _, dialect := range []outbox.Dialect{outbox.Postgres, outbox.MySQL} {
		t.Run(string(dialect), func(t *testing.T) {
			res := runFaultsWith(t, Kafka, dialect, false, "", 0, func(c *Config) {
				c.Events, c.Keys, c.Rate, c.SQLWriters, c.MixedWriters = 1000, 50, 250, true, true
			})
			t.Logf("plain-SQL and Go writers on %s: %d committed, %d rolled back, %d delivered, %d duplicates, %d lost, %d phantoms, %d order violations",
				dialect, res.Committed, res.RolledBack, res.Delivered, res.Duplicates, res.Lost, res.Phantoms, res.OrderViolations)
		})
	}
}
