package admin_test

import (
	"context"
	"strings"
	"testing"

	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/outbox"
)

// checkpointsByUnit is a CheckpointReader over fixed checkpoints, by unit name.
type checkpointsByUnit map[string][]byte

func (c checkpointsByUnit) LastCheckpoint(_ context.Context, unit, _ string, _ int) ([]byte, error) {
	return c[unit], nil
}

// TestUnitsReportAnUnreadableCheckpoint: one unit whose last checkpoint cannot be decoded is
// reported as such, beside the other units, instead of failing the whole listing.
func TestUnitsReportAnUnreadableCheckpoint(t *testing.T) {
	h := newHarness(t, outbox.SQLite, nil)
	adm, err := admin.New(h.db, outbox.SQLite, h.writer.Table().Events())
	if err != nil {
		t.Fatal(err)
	}
	reader := checkpointsByUnit{
		"p/u00": []byte(`{"v":1,"unit":"p/u00","relay":"relay-a","txn":7,"time":"2026-12-01T10:00:00Z","published":[1,2]}`),
		"p/u01": []byte("not a checkpoint"),
	}
	units, err := adm.Units(context.Background(), reader, admin.UnitsQuery{TransactionalIDPrefix: "p", Units: 4})
	if err != nil {
		t.Fatalf("Units with one unreadable checkpoint: %v", err)
	}
	if len(units) != 4 {
		t.Fatalf("%d units, want 4", len(units))
	}
	if c := units[0].Checkpoint; c == nil || c.Txn != 7 || c.Relay != "relay-a" || c.Published != 2 || units[0].CheckpointError != "" {
		t.Fatalf("unit 0: %+v, want its checkpoint (txn 7 by relay-a, 2 rows)", units[0])
	}
	if units[1].Checkpoint != nil || !strings.Contains(units[1].CheckpointError, `checkpoint of unit "p/u01" is not readable`) {
		t.Fatalf("unit 1: %+v, want no checkpoint and an error naming the unit", units[1])
	}
	if units[2].Checkpoint != nil || units[2].CheckpointError != "" {
		t.Fatalf("unit 2 never committed: %+v", units[2])
	}
}
