package forwarder

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxkit/outboxkit/forwarder/internal/lease"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/outbox"
)

func TestIncomingPartitions(t *testing.T) {
	cases := []struct {
		name   string
		policy relay.SharePolicy
		held   relay.Holding
		want   bool
	}{
		{"a new relay, the others above their shares", lease.PerPartition{}, relay.Holding{Owned: 0, Share: 22, Relays: 3}, true},
		{"half-way through the move", lease.PerPartition{}, relay.Holding{Owned: 10, Share: 22, Relays: 3}, true},
		{"below the share only by rounding (22+22+20)", lease.PerPartition{}, relay.Holding{Owned: 20, Share: 22, Relays: 3}, false},
		{"at its share", lease.PerPartition{}, relay.Holding{Owned: 32, Share: 32, Relays: 2}, false},
		{"a lone relay missing partitions (expired, free)", lease.PerPartition{}, relay.Holding{Owned: 60, Share: 64, Relays: 1}, true},
		{"units: a new relay", lease.Units(8), relay.Holding{Owned: 0, Share: 24, Relays: 3}, true},
		{"units: below only by rounding (24+24+16)", lease.Units(8), relay.Holding{Owned: 16, Share: 24, Relays: 3}, false},
		{"a target (cdc) takes by heartbeats", lease.Target{SharePolicy: lease.PerPartition{}, Partitions: func(int) int { return outbox.Partitions }}, relay.Holding{Owned: 0, Share: 64, Relays: 2}, false},
	}
	for _, c := range cases {
		if got := c.policy.Incoming(c.held); got != c.want {
			t.Errorf("%s: incoming(%+v) = %v, want %v", c.name, c.held, got, c.want)
		}
	}
}

// TestPartitionsMoveBetweenHeartbeats: when relay A releases the partitions above its share, the
// relay B that joined takes them between its own heartbeats, by its quick steps, and wakes its
// workers, instead of leaving them unowned until its next heartbeat. B's heartbeats after its
// first are refused by a trigger on the relays table, so only a quick step can take the
// partitions: the test waits for them without a window (a bound only stops a hang), and it fails
// when the quick steps do not take them.
func TestPartitionsMoveBetweenHeartbeats(t *testing.T) {
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL} {
		t.Run(string(d), func(t *testing.T) {
			fx := newStoreFixture(t, d)
			if err := fx.store.EnsureLeaseRows(fx.ctx, fx.db); err != nil {
				t.Fatal(err)
			}
			const ttl = time.Minute
			if n := fx.heartbeat("A", ttl); n != outbox.Partitions {
				t.Fatalf("a lone relay owns %d partitions", n)
			}
			m, err := relay.NewMetrics(prometheus.NewRegistry(), fx.store.Table.Events())
			if err != nil {
				t.Fatal(err)
			}
			leasesTaken := make(chan struct{}, 1)
			b := lease.New(relay.Core{DB: fx.db, RelayID: "B", LeaseTTL: ttl, Store: fx.store, Inflight: relay.NewInflight(1), Metrics: m,
				Log: slog.New(slog.NewTextHandler(io.Discard, nil))}, lease.PerPartition{}, 30*time.Second, 10*time.Millisecond, leasesTaken)
			held, err := b.Heartbeat(fx.ctx)
			if err != nil || held.Owned != 0 || held.Share != outbox.Partitions/2 {
				t.Fatalf("B's first heartbeat: %+v, %v (want 0 owned of a share of %d)", held, err, outbox.Partitions/2)
			}
			refuseHeartbeats(t, fx, "B")
			if _, err := b.Heartbeat(fx.ctx); err == nil {
				t.Fatal("B's heartbeat succeeded with the trigger that refuses it in place")
			}
			ctx, cancel := context.WithCancel(fx.ctx)
			done := make(chan struct{})
			go func() { defer close(done); b.Loop(ctx, held) }()
			defer func() { cancel(); <-done }()
			if n := fx.heartbeat("A", ttl); n != outbox.Partitions/2 {
				t.Fatalf("A kept %d partitions after B joined, want %d", n, outbox.Partitions/2)
			}
			deadline := time.Now().Add(3 * time.Minute) // a bound against a hang: a quick step is 1.2 s
			for len(fx.leases("B")) < outbox.Partitions/2 {
				if time.Now().After(deadline) {
					t.Fatalf("B owns %d partitions 3 minutes after A released them, want %d: its quick steps did not take them",
						len(fx.leases("B")), outbox.Partitions/2)
				}
				time.Sleep(50 * time.Millisecond)
			}
			// The wake follows the commit of the takeover that the loop above saw: wait for it
			// (a bound against a hang), rather than look once, which raced with it.
			select {
			case <-leasesTaken:
			case <-time.After(time.Minute):
				t.Fatal("B took partitions without waking its workers")
			}
		})
	}
}

// refuseHeartbeats makes every later heartbeat of owner fail: a trigger refuses the upsert of
// its row in the relays table, the heartbeat's first statement. Taking free partitions between
// heartbeats does not write that table.
func refuseHeartbeats(t *testing.T, fx *storeFixture, owner string) {
	t.Helper()
	relays := fx.store.Table.Relays()
	trigger := relays + "_refuse"
	var statements []string
	switch fx.store.Table.Dialect() {
	case outbox.Postgres:
		statements = []string{
			"CREATE FUNCTION " + trigger + "() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN " +
				"IF NEW.owner = '" + owner + "' THEN RAISE EXCEPTION 'heartbeats of " + owner + " refused by the test'; END IF; " +
				"RETURN NEW; END $$",
			"CREATE TRIGGER " + trigger + " BEFORE INSERT ON " + relays + " FOR EACH ROW EXECUTE FUNCTION " + trigger + "()",
		}
		t.Cleanup(func() { _, _ = fx.db.Exec("DROP FUNCTION IF EXISTS " + trigger + "() CASCADE") })
	case outbox.MySQL:
		statements = []string{"CREATE TRIGGER " + trigger + " BEFORE INSERT ON " + relays + " FOR EACH ROW BEGIN " +
			"IF NEW.owner = '" + owner + "' THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'heartbeats of " + owner + " refused by the test'; END IF; END"}
		t.Cleanup(func() { _, _ = fx.db.Exec("DROP TRIGGER IF EXISTS " + trigger) })
	default:
		t.Fatalf("no trigger for dialect %s", fx.store.Table.Dialect())
	}
	for _, s := range statements {
		if _, err := fx.db.ExecContext(fx.ctx, s); err != nil {
			t.Fatalf("refuse the heartbeats of %s: %v", owner, err)
		}
	}
}
