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
// relay B that joined takes them between its own heartbeats (every 30 s here), and wakes its
// workers, instead of leaving them unowned until its next heartbeat.
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
			ctx, cancel := context.WithCancel(fx.ctx)
			done := make(chan struct{})
			go func() { defer close(done); b.Loop(ctx, held) }()
			defer func() { cancel(); <-done }()
			if n := fx.heartbeat("A", ttl); n != outbox.Partitions/2 {
				t.Fatalf("A kept %d partitions after B joined, want %d", n, outbox.Partitions/2)
			}
			deadline := time.Now().Add(15 * time.Second) // half of B's heartbeat interval
			for len(fx.leases("B")) < outbox.Partitions/2 {
				if time.Now().After(deadline) {
					t.Fatalf("B owns %d partitions 15 s after A released them, want %d before its next heartbeat",
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
