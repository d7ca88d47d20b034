package cdc

import (
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/forwarder/internal/ack"
	"github.com/outboxkit/outboxkit/forwarder/internal/atleastonce"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay"
	"github.com/outboxkit/outboxkit/forwarder/internal/relay/relaytest"
	"github.com/outboxkit/outboxkit/forwarder/internal/waves"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// takeoverFixture: relay A streamed with every lease of the group, read its leases (aLeases)
// and the rows (recs, all pending and unmarked); then its leases expired and relay B took every
// partition over (each epoch incremented). (The store's own fencing of the marks is
// forwarder's TestCDCMarkRetryIsFenced.)
type takeoverFixture struct {
	t       *testing.T
	ctx     context.Context
	db      *sql.DB
	writer  *outbox.Writer
	store   *relay.Store
	aLeases []relay.Lease
	recs    []relay.Record
}

func newTakeoverFixture(t *testing.T) *takeoverFixture {
	db := testsupport.OpenPostgres(t)
	w := testsupport.NewOutbox(t, db, outbox.Config{Dialect: outbox.Postgres, Table: testsupport.UniqueName("cdcfence")})
	ctx := context.Background()
	tbl := w.Table()
	fx := &takeoverFixture{t: t, ctx: ctx, db: db, writer: w,
		store: &relay.Store{Table: tbl, Dialect: outbox.Postgres, Group: "default", IdleTimeout: 30 * time.Second}}
	if err := fx.store.EnsureLeaseRows(ctx, db); err != nil {
		t.Fatal(err)
	}
	const ttl = time.Minute // A's leases expire by the UPDATE below, not by waiting
	if n := fx.heartbeat("A", ttl); n != outbox.Partitions {
		t.Fatalf("A owns %d partitions", n)
	}
	fx.aLeases = fx.leases("A")
	fx.write("k1", 10, 10)
	fx.write("k2", 10)
	all := make([]int, outbox.Partitions)
	for i := range all {
		all[i] = i
	}
	var err error
	if fx.recs, err = fx.store.Claim(ctx, db, all, 10, 1<<20); err != nil || len(fx.recs) != 3 {
		t.Fatalf("claimed %d rows, want 3: %v", len(fx.recs), err)
	}
	// A stalls: its heartbeat and its leases expire.
	for _, q := range []string{"UPDATE " + tbl.Leases() + " SET expires_at = now() - interval '1 minute' WHERE owner = 'A'",
		"UPDATE " + tbl.Relays() + " SET heartbeat_at = now() - interval '1 minute' WHERE owner = 'A'"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	if n := fx.heartbeat("B", ttl); n != outbox.Partitions {
		t.Fatalf("B took %d partitions over, want all %d", n, outbox.Partitions)
	}
	return fx
}

func (fx *takeoverFixture) heartbeat(owner string, ttl time.Duration) int {
	fx.t.Helper()
	return relaytest.Heartbeat(fx.t, fx.ctx, fx.db, fx.store, owner, ttl)
}

func (fx *takeoverFixture) leases(owner string) []relay.Lease {
	fx.t.Helper()
	return relaytest.Leases(fx.t, fx.ctx, fx.db, fx.store, owner)
}

func (fx *takeoverFixture) write(key string, sizes ...int) {
	fx.t.Helper()
	relaytest.Write(fx.t, fx.ctx, fx.db, fx.writer, key, sizes...)
}

// marked counts the rows given a next attempt time (left to the retry path).
func (fx *takeoverFixture) marked() int {
	fx.t.Helper()
	var n int
	if err := fx.db.QueryRow("SELECT COUNT(*) FROM " + fx.store.Table.Events() + " WHERE next_attempt_at IS NOT NULL").Scan(&n); err != nil {
		fx.t.Fatal(err)
	}
	return n
}

// source is relay A's cdc source as the forwarder wires it, delivering at least once through a
// publisher that accepts everything; its slot is named (Start) but never streamed.
func (fx *takeoverFixture) source() *Source {
	fx.t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	m, err := relay.NewMetrics(nil, fx.store.Table.Events())
	if err != nil {
		fx.t.Fatal(err)
	}
	core := relay.Core{DB: fx.db, RelayID: "A", Workers: 1, BatchSize: 100, MaxBatchBytes: 1 << 20, LeaseTTL: time.Minute,
		Store: fx.store, Inflight: relay.NewInflight(1), Metrics: m, Log: log, Progress: relay.NewProgress(m, log, time.Minute),
		Retry: relay.RetryPolicy{MaxAttempts: 10, Initial: time.Second, MaxInterval: time.Minute, Multiplier: 2}}
	d := atleastonce.New(core, waves.New(nopPublisher{}, nil, log), ack.New(core))
	s, err := New(core, d, nil, Config{StatusInterval: time.Second, RetryInterval: time.Second, StallAfter: time.Minute,
		HeartbeatInterval: time.Second, Scope: d.Scope})
	if err != nil {
		fx.t.Fatal(err)
	}
	if err := s.Start(fx.ctx); err != nil { // names the slot, binds the metrics
		fx.t.Fatal(err)
	}
	return s
}

// TestStreamerWithLostLeasesMarksNothing is forwarder's TestCDCMarkRetryIsFenced through the
// streamer's own path: relay A's worker, holding its stale reading of the leases, handles a part
// with a row of a parked key (left to the retry path) and rows it publishes (their
// acknowledgement fenced off, so deliver leaves them pending). It must leave every row to B,
// marked by nobody, and stop: its part fails with errLeasesLost, so nothing after it is
// confirmed.
func TestStreamerWithLostLeasesMarksNothing(t *testing.T) {
	fx := newTakeoverFixture(t)
	// k1 is parked: a dead row of it, written after the claim.
	fx.write("k1", 10)
	if _, err := fx.db.Exec("UPDATE " + fx.store.Table.Events() + " SET status = 2 WHERE seq = (SELECT MAX(seq) FROM " +
		fx.store.Table.Events() + ")"); err != nil {
		t.Fatal(err)
	}
	s := fx.source()
	err := s.streamBatch(fx.ctx, 0, fx.aLeases, batch{records: fx.recs, xids: make([]uint32, len(fx.recs))})
	if n := fx.marked(); n != 0 {
		t.Fatalf("relay A, whose leases B took over, marked %d rows for the retry path (part error: %v)", n, err)
	}
	if !errors.Is(err, errLeasesLost) {
		t.Fatalf("the part of a relay whose leases were taken over ended with %v, want errLeasesLost", err)
	}
}

type nopPublisher struct{}

func (nopPublisher) Publish(string, ...*message.Message) error { return nil }
func (nopPublisher) Close() error                              { return nil }
