package forwarder

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxkit/outboxkit/outbox"
)

func TestIncomingPartitions(t *testing.T) {
	cases := []struct {
		name   string
		policy sharePolicy
		held   holding
		want   bool
	}{
		{"a new relay, the others above their shares", sharePolicy{}, holding{owned: 0, share: 22, relays: 3}, true},
		{"half-way through the move", sharePolicy{}, holding{owned: 10, share: 22, relays: 3}, true},
		{"below the share only by rounding (22+22+20)", sharePolicy{}, holding{owned: 20, share: 22, relays: 3}, false},
		{"at its share", sharePolicy{}, holding{owned: 32, share: 32, relays: 2}, false},
		{"a lone relay missing partitions (expired, free)", sharePolicy{}, holding{owned: 60, share: 64, relays: 1}, true},
		{"units: a new relay", sharePolicy{units: 8}, holding{owned: 0, share: 24, relays: 3}, true},
		{"units: below only by rounding (24+24+16)", sharePolicy{units: 8}, holding{owned: 16, share: 24, relays: 3}, false},
		{"a target (cdc) takes by heartbeats", sharePolicy{target: func(int) int { return outbox.Partitions }}, holding{owned: 0, share: 64, relays: 2}, false},
	}
	for _, c := range cases {
		if got := c.policy.incoming(c.held); got != c.want {
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
			if err := fx.store.ensureLeaseRows(fx.ctx, fx.db); err != nil {
				t.Fatal(err)
			}
			const ttl = time.Minute
			if n := fx.heartbeat("A", ttl); n != outbox.Partitions {
				t.Fatalf("a lone relay owns %d partitions", n)
			}
			m, err := newMetrics(prometheus.NewRegistry(), fx.store.table.Events())
			if err != nil {
				t.Fatal(err)
			}
			b := &Forwarder{cfg: Config{DB: fx.db, RelayID: "B", LeaseTTL: ttl, HeartbeatInterval: 30 * time.Second,
				MinPollInterval: 10 * time.Millisecond}, store: fx.store, inflight: newInflight(1), metrics: m,
				log: slog.New(slog.NewTextHandler(io.Discard, nil)), leasesTaken: make(chan struct{}, 1)}
			held, err := b.heartbeat(fx.ctx)
			if err != nil || held.owned != 0 || held.share != outbox.Partitions/2 {
				t.Fatalf("B's first heartbeat: %+v, %v (want 0 owned of a share of %d)", held, err, outbox.Partitions/2)
			}
			ctx, cancel := context.WithCancel(fx.ctx)
			done := make(chan struct{})
			go func() { defer close(done); b.heartbeatLoop(ctx, held) }()
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
			select {
			case <-b.leasesTaken:
			default:
				t.Fatal("B took partitions without waking its workers")
			}
		})
	}
}
