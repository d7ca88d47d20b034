package admin_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestActionsOnMoreIDsThanAStatementTakes: a confirmed dry run may name more event ids than a
// statement can bind (SQLite 32,766 parameters; on PostgreSQL and MariaDB the same chunks are
// read, with fewer rows to keep the test short): the listing and the action
// still select every one of them, in seq order, and a limit keeps the first.
func TestActionsOnMoreIDsThanAStatementTakes(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 33,000 rows")
	}
	for _, c := range []struct {
		dialect outbox.Dialect
		events  int
	}{{outbox.SQLite, 33000}, {outbox.Postgres, 3000}, {outbox.MySQL, 3000}} {
		t.Run(string(c.dialect), func(t *testing.T) {
			h := newHarness(t, c.dialect, nil)
			ctx := context.Background()
			events := make([]outbox.Event, c.events)
			ids := make([]uuid.UUID, c.events)
			for i := range events {
				events[i] = h.event(fmt.Sprintf("k%d", i%500), i/500)
				ids[i] = events[i].ID
			}
			h.write(events...)
			if _, err := h.db.Exec("UPDATE " + h.writer.Table().Events() + " SET status = 2, attempts = 1, last_error = 'refused'"); err != nil {
				t.Fatal(err)
			}
			adm, err := admin.New(h.db, c.dialect, h.writer.Table().Events())
			if err != nil {
				t.Fatal(err)
			}
			first, err := adm.FindDeadLetters(ctx, admin.EventFilter{EventIDs: ids[1:], Limit: 3})
			if err != nil {
				t.Fatal(err)
			}
			if len(first) != 3 || first[0].EventID != ids[1] || first[2].EventID != ids[3] {
				t.Fatalf("the first 3 letters of %d ids: %+v, want events 1, 2, 3", len(ids)-1, first)
			}
			plan, err := adm.DiscardDeadLetters(ctx, admin.EventFilter{EventIDs: append(ids, ids[:10]...)}, true)
			if err != nil {
				t.Fatal(err)
			}
			if len(plan.Events) != len(ids) {
				t.Fatalf("the dry run of %d ids (10 of them twice) lists %d events", len(ids), len(plan.Events))
			}
			done, err := adm.DiscardDeadLetters(ctx, admin.EventFilter{EventIDs: ids}, false)
			if err != nil || done.Applied != int64(len(ids)) {
				t.Fatalf("discarding %d letters by id: %d applied, %v", len(ids), done.Applied, err)
			}
		})
	}
}
