package faultinject

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// walRun is the Kafka run on forwarder.source wal (docs/wal.md): three writers emit logical
// decoding messages, one through outbox.Writer in ModeWAL with database/sql, one through the
// same writer in native pgx transactions (the emit queued into a batch), one through the SQL
// function <table>_emit as another language does; 10 % of the transactions roll back. The slot
// is created with `outboxkit wal-slot create` before the writes and dropped, with its
// publication, at the end (and by t.Cleanup when the run stops before its own cleanup). Three
// relays: the streaming one, which holds every lease, is SIGKILLed (every other kill) and
// SIGSTOPped, the broker is restarted (an outage parks every key into the table), the relays'
// connections are cut, replication ones included, and four poison events (over Kafka's limit)
// park their keys, each its own: at 70 % of the writes the run waits until the three placed
// before it (and any other committed by then) are dead, several keys parked at once, and
// discards them while the writers go on, so their keys un-park under load; the rest are
// discarded after the writes.
func walRun(t *testing.T, delivery string, seed uint64) Result {
	slot := fmt.Sprintf("fault_wal_%s_%d", strings.TrimSuffix(delivery, "_once"), time.Now().UnixNano()%1e9)
	dsn := testsupport.PostgresDSN(t)
	t.Cleanup(func() {
		if err := DropReplicationSlot(context.Background(), dsn, slot); err != nil {
			t.Error(err)
		}
	})
	const poison = 4
	res := runFaultsWith(t, Kafka, outbox.Postgres, true, delivery, seed, func(c *Config) {
		c.Source, c.WALSlot = "wal", slot
		c.Writers, c.Events, c.Keys, c.Kills, c.Pauses = 3, 1500, 100, 6, 2
		c.PoisonEvents, c.DiscardAt = poison, 0.7
		c.DrainTimeout = 2 * time.Minute
	})
	if res.StreamerKills < 3 || res.Kills < 6 {
		t.Errorf("%d kills, %d of the streaming relay; want 6 and 3", res.Kills, res.StreamerKills)
	}
	if res.Poison != poison || res.PoisonDead+res.PoisonPublished != poison || res.PoisonStuck != 0 {
		t.Errorf("poison events: %d committed, %d dead, %d published, %d stuck; want %d, all dead or published",
			res.Poison, res.PoisonDead, res.PoisonPublished, res.PoisonStuck, poison)
	}
	// The discard at 70 % waits for the three poison events placed before it, each on a key of
	// its own: three keys parked at once, released together under load.
	if res.DiscardedUnderLoad < 3 || res.DeadKeysAtDiscard < 3 {
		t.Errorf("discarded under load: %d poison events, %d dead keys; want several keys parked at once (at least 3)",
			res.DiscardedUnderLoad, res.DeadKeysAtDiscard)
	}
	if left := walSlotsLeft(t, slot); left != 0 {
		t.Errorf("the run left its slot or publication %s behind (%d)", slot, left)
	}
	return res
}

// walSlotsLeft counts the replication slots and publications named slot on the test database.
func walSlotsLeft(t *testing.T, slot string) int {
	db := testsupport.OpenPostgres(t)
	var n int
	if err := db.QueryRow(`SELECT (SELECT count(*) FROM pg_replication_slots WHERE slot_name = $1)
		+ (SELECT count(*) FROM pg_publication WHERE pubname = $1)`, slot).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFaultInjectionWAL is walRun at least once, then exactly once with the same seed (the same
// writes, the faults at the same points of the writers' progress): 0 lost, 0 phantoms
// (rolled-back transactions emit nothing), 0 order violations among first deliveries, one
// effect per event through the inbox, and exactly once 0 duplicates for a read_committed
// consumer. At least once, duplicates are allowed and absorbed by the inbox; among them the
// one docs/wal.md states: after a crash, an event published directly in a batch that also
// parked another event of its key is parked again and delivered a second time, after its
// key's later events (its first delivery kept the order, which is what the order check reads).
func TestFaultInjectionWAL(t *testing.T) {
	seed := rand.Uint64()
	var atLeastOnce Result
	t.Run("at_least_once", func(t *testing.T) {
		atLeastOnce = walRun(t, "at_least_once", seed)
	})
	t.Run("exactly_once", func(t *testing.T) {
		res := walRun(t, "exactly_once", seed)
		if res.Duplicates != 0 {
			t.Fatalf("a read_committed consumer saw %d duplicates under exactly-once delivery", res.Duplicates)
		}
		t.Logf("duplicates: %d at least once, %d exactly once (seed %d)", atLeastOnce.Duplicates, res.Duplicates, seed)
	})
}

// The wal variant refuses settings it cannot run, naming the bad value.
func TestWALVariantSettingsAreChecked(t *testing.T) {
	base := Config{DSN: "postgres://x", Broker: Broker{Kind: Kafka, RepoRoot: "/r"}, Source: "wal"}
	for _, tc := range []struct {
		edit func(*Config)
		want string
	}{
		{func(c *Config) { c.Dialect = outbox.MySQL }, "database mysql"},
		{func(c *Config) { c.Installations = 2 }, "2 installations"},
		{func(c *Config) { c.SQLWriters = true }, "SQLWriters"},
		{func(c *Config) { c.WALSlot = "Bad-Slot" }, "Bad-Slot"},
		{func(c *Config) { c.Source, c.WALSlot = "cdc", "s" }, `WALSlot "s" with source cdc`},
	} {
		cfg := base
		tc.edit(&cfg)
		cfg.setDefaults()
		if err := cfg.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("validate() = %v, want an error naming %s", err, tc.want)
		}
	}
	cfg := base
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		t.Fatalf("valid wal settings refused: %v", err)
	}
}
