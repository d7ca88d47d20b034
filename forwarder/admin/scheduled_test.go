package admin_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/outbox"
)

// The scheduled events' summary, listing and cancel on the three databases: counts and the next
// due time of the scheduled rows only (a released one is not counted), next due first, and a
// cancel that reports each id Changed, Released or NotFound, as outbox.Writer.Cancel does; with
// ForTenants, another tenant's event is neither counted nor cancelled.
func TestScheduledSummaryListAndCancel(t *testing.T) {
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL, outbox.SQLite} {
		t.Run(string(d), func(t *testing.T) {
			h := newHarness(t, d, nil)
			ctx := context.Background()
			base := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
			schedule := func(key, tenant string, n int, at time.Time) outbox.Event {
				e := h.event(key, n)
				e.TenantID, e.DeliverAt = tenant, at
				return e
			}
			events := []outbox.Event{
				schedule("a", "t1", 0, base.Add(2*time.Minute)),
				schedule("b", "t1", 1, base),
				schedule("c", "t2", 2, base.Add(time.Minute)),
				schedule("d", "t1", 3, base.Add(3*time.Minute)), // released below
				h.event("e", 4), // ordinary: not scheduled
			}
			h.write(events...)
			if _, err := h.db.Exec("UPDATE " + h.writer.Table().Events() + " SET status = 0 WHERE aggregate_id = 'd'"); err != nil {
				t.Fatal(err)
			}
			adm, err := admin.New(h.db, d, h.writer.Table().Events())
			if err != nil {
				t.Fatal(err)
			}
			sum, err := adm.ScheduledSummary(ctx)
			if err != nil || sum.Count != 3 || !sum.NextDue.Equal(base) {
				t.Fatalf("summary: %+v, %v; want 3 scheduled, next due %s", sum, err, base)
			}
			list, err := adm.ScheduledEvents(ctx, 10)
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, e := range list {
				keys = append(keys, e.AggregateID)
			}
			if !slices.Equal(keys, []string{"b", "c", "a"}) {
				t.Fatalf("listed %v, want b, c, a (next due first, scheduled only)", keys)
			}
			t1 := adm.ForTenants("t1")
			if sum, err := t1.ScheduledSummary(ctx); err != nil || sum.Count != 2 {
				t.Fatalf("tenant t1's summary: %+v, %v; want 2", sum, err)
			}
			unknown := uuid.New()
			res, err := t1.CancelScheduled(ctx, events[0].ID, events[2].ID, events[3].ID, unknown)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(res.Changed, []uuid.UUID{events[0].ID}) || !slices.Equal(res.Released, []uuid.UUID{events[3].ID}) ||
				len(res.NotFound) != 2 || !slices.Contains(res.NotFound, events[2].ID) || !slices.Contains(res.NotFound, unknown) {
				t.Fatalf("cancel as tenant t1: %+v; want a cancelled, d released, c (tenant t2) and the unknown id not found", res)
			}
			if sum, err := adm.ScheduledSummary(ctx); err != nil || sum.Count != 2 {
				t.Fatalf("after the cancel: %+v, %v; want b and c still scheduled", sum, err)
			}
			if _, err := adm.ScheduledEvents(ctx, 0); err == nil {
				t.Fatal("a limit of 0 was accepted")
			}
		})
	}
}
