package admin_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
)

// TestTenantAdminListsAndActsOnItsTenantsOnly: an Admin made with ForTenants lists, replays and
// discards the dead letters of its tenants only, by every entry point (DeadLetters, Replay and
// Discard by id as well as the filtered listing and actions): an id of another tenant's dead
// letter changes nothing.
func TestTenantAdminListsAndActsOnItsTenantsOnly(t *testing.T) {
	for _, d := range adminDialects {
		t.Run(string(d), func(t *testing.T) {
			f := newParkedFixture(t, d)
			ctx := context.Background()
			acme, globex := f.h.event("acme-key", 0), f.h.event("globex-key", 0)
			acme.TenantID, globex.TenantID = "acme", "globex"
			f.h.write(acme, globex)
			f.setRow(acme, 2, 1, time.Now(), "refused")
			f.setRow(globex, 2, 1, time.Now(), "refused")
			scoped := f.adm.ForTenants("acme")

			letters, err := scoped.DeadLetters(ctx, 100)
			if err != nil {
				t.Fatal(err)
			}
			if len(letters) != 1 || letters[0].EventID != acme.ID {
				t.Fatalf("an Admin for tenant acme lists %+v, want acme's dead letter only", letters)
			}
			if n, err := scoped.Replay(ctx, globex.ID); err != nil || n != 0 {
				t.Fatalf("Replay of globex's letter by acme's Admin: %d rows, %v; want 0", n, err)
			}
			if n, err := scoped.Discard(ctx, globex.ID); err != nil || n != 0 {
				t.Fatalf("Discard of globex's letter by acme's Admin: %d rows, %v; want 0", n, err)
			}
			if status, _, _ := f.row(globex); status != 2 {
				t.Fatalf("globex's letter has status %d after acme's Admin acted on it, want 2 (dead)", status)
			}
			if n, err := scoped.Replay(ctx, acme.ID, uuid.New()); err != nil || n != 1 {
				t.Fatalf("Replay of acme's letter by acme's Admin: %d rows, %v; want 1", n, err)
			}
			f.setRow(acme, 2, 1, time.Now(), "refused")
			if n, err := scoped.Discard(ctx, acme.ID); err != nil || n != 1 {
				t.Fatalf("Discard of acme's letter by acme's Admin: %d rows, %v; want 1", n, err)
			}
		})
	}
}
