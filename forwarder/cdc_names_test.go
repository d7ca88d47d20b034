package forwarder_test

import (
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// newNamedCDCHarness is newCDCHarness on a table named name (mixed case, or schema-qualified),
// created by the migration as every other table: its unquoted name in SQL, folded by PostgreSQL.
func newNamedCDCHarness(t testing.TB, brokers []string, name string) *harness {
	t.Helper()
	db := testsupport.OpenPostgres(t)
	w := testsupport.NewOutbox(t, db, outbox.Config{Dialect: outbox.Postgres, Table: name})
	tbl := w.Table()
	h := &harness{t: t, dialect: outbox.Postgres, db: db, writer: w, brokers: brokers,
		topic: testsupport.UniqueName("events"), source: forwarder.SourceCDC}
	t.Cleanup(func() { testsupport.DropCDCObjects(t, db, tbl) }) // after the forwarders stopped
	return h
}

// TestCDCMixedCaseAndSchemaQualifiedTables: the configured table name is resolved the way
// PostgreSQL resolves it in the relay's SQL (unquoted: folded to lower case, in the named
// schema), so the stream's relation messages, which carry the folded names, are recognised as
// the outbox's. (Compared with the configured name as written, every streamed event of
// OrdersOutbox was ignored while the slot confirmed past it: none published, nothing logged.)
func TestCDCMixedCaseAndSchemaQualifiedTables(t *testing.T) {
	db := testsupport.OpenPostgres(t)
	// Unquoted, like every name the kit puts in SQL: the schema is cdcapp.
	if _, err := db.Exec("CREATE SCHEMA IF NOT EXISTS CdcApp"); err != nil {
		t.Fatal(err)
	}
	suffix := strings.TrimPrefix(testsupport.UniqueName(""), "_")
	for _, name := range []string{"OrdersOutbox_" + suffix, "CdcApp.Orders_" + suffix} {
		t.Run(name, func(t *testing.T) {
			h := newNamedCDCHarness(t, testsupport.KafkaBrokers(t), name)
			testsupport.CreateKafkaTopic(t, h.brokers, h.topic)
			h.start(h.config(h.publisher()))
			h.waitForStream()
			keys := keysNamed("m", 20)
			const perKey = 30
			for n := range perKey {
				var events []outbox.Event
				for _, k := range keys {
					events = append(events, h.event(k, n))
				}
				h.write(events...)
			}
			got := consumeDistinct(t, h.brokers, h.topic, len(keys)*perKey, 2*time.Minute)
			if len(got) < len(keys)*perKey {
				t.Fatalf("table %s: %d of %d streamed events published within 2 minutes", name, len(got), len(keys)*perKey)
			}
			checkDelivery(t, got, keys, perKey)
		})
	}
}
