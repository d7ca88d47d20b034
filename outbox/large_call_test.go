package outbox_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/outboxkit/outboxkit/outbox"
)

// TestOneCallWritesMoreRowsThanAStatementTakes: one WriteTx of 9,000 events needs more bind
// parameters than one INSERT may have on any database (11 per row; SQLite allows 32,766,
// PostgreSQL and MySQL 65,535): the writer splits the call and stores every event.
func TestOneCallWritesMoreRowsThanAStatementTakes(t *testing.T) {
	for _, d := range allDialects {
		t.Run(string(d), func(t *testing.T) {
			tg := newTarget(t, d)
			evs := make([]outbox.Event, 9000)
			for i := range evs {
				evs[i] = orderEvent(fmt.Sprintf("o-%d", i%100), i)
			}
			if err := tg.placeOrder(context.Background(), "o-many", true, evs...); err != nil {
				t.Fatalf("one call of %d events: %v", len(evs), err)
			}
			if ids := tg.eventIDs(t); len(ids) != len(evs) {
				t.Fatalf("%d events stored of the %d written in one call", len(ids), len(evs))
			}
		})
	}
}
