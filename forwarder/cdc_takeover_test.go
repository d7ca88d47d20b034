package forwarder_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestCDCStandbyTakesOver: two relays, one streams and one stands by (it owns no partition).
// The streamer stops while events are being written; the standby takes the slot over and every
// event arrives in order.
func TestCDCStandbyTakesOver(t *testing.T) {
	h := newCDCHarness(t, testsupport.KafkaBrokers(t))
	pub := h.publisher()
	stopA := h.start(h.config(pub))
	pidA := h.waitForStreamBy(0)
	h.start(h.config(pub))
	time.Sleep(time.Second) // B tries the slot and stands by
	if owners := h.ownedBy(); len(owners) != 1 {
		t.Fatalf("partition owners %v: want the streamer alone", owners)
	}
	keys := keysNamed("s", 20)
	const perKey = 40
	var written atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for n := range perKey {
			var events []outbox.Event
			for _, k := range keys {
				events = append(events, h.event(k, n))
			}
			h.write(events...)
			written.Add(1)
			time.Sleep(25 * time.Millisecond)
		}
	}()
	for written.Load() < perKey/4 {
		time.Sleep(10 * time.Millisecond)
	}
	stopped := time.Now()
	stopA()
	h.waitForStreamBy(pidA)
	t.Logf("the standby streams %v after the streamer stopped", time.Since(stopped).Round(time.Millisecond))
	<-done
	got := consumeDistinct(t, h.brokers, h.topic, perKey*len(keys), 2*time.Minute)
	if len(got) < perKey*len(keys) { // show what is left
		rows, _ := h.db.Query("SELECT seq, aggregate_id, status, attempts, next_attempt_at IS NOT NULL FROM " + h.writer.Table().Events() + " ORDER BY seq LIMIT 20")
		for rows.Next() {
			var seq int64
			var agg string
			var st, att int
			var marked bool
			_ = rows.Scan(&seq, &agg, &st, &att, &marked)
			t.Logf("left: seq %d key %s status %d attempts %d marked %v", seq, agg, st, att, marked)
		}
		rows.Close()
	}
	dups := checkDelivery(t, got, keys, perKey)
	t.Logf("%d events, %d duplicates across the takeover", len(got)-dups, dups)
}

// TestCDCTakesOverAStalledStreamer: a stalled streamer (a paused process) keeps its walsender,
// and the slot with it, until wal_sender_timeout. Here a replication connection that never
// reads plays it, with lease rows of a relay that stopped renewing them. Once those leases
// expire, the relay terminates the walsender, takes the slot and relays the events. How soon
// (within about one lease TTL) depends on the machine's load: TestSoakCDCTakesOverAStalledStreamer
// checks it, from scripts/soak.sh.
func TestCDCTakesOverAStalledStreamer(t *testing.T) {
	took, ttl := takeOverAStalledStreamer(t)
	t.Logf("events relayed %v after the stalled streamer's leases expired (LeaseTTL %v)", took.Round(time.Millisecond), ttl)
}

// TestSoakCDCTakesOverAStalledStreamer (soak only): the takeover of
// TestCDCTakesOverAStalledStreamer, repeated; each must relay the events within 2 x LeaseTTL of
// the stalled leases' expiry. Reports the slowest.
func TestSoakCDCTakesOverAStalledStreamer(t *testing.T) {
	runs := testsupport.Soak(t, 10)
	var slowest, ttl time.Duration
	late := 0
	for i := range runs {
		t.Run(fmt.Sprint(i), func(t *testing.T) { // each run's slot and tables go at its end
			took, d := takeOverAStalledStreamer(t)
			ttl, slowest = d, max(slowest, took)
			if took > 2*ttl {
				late++
			}
		})
	}
	t.Logf("soak: stalled-streamer takeover relayed the events later than 2 x LeaseTTL (%v) in %d of %d runs; slowest %v",
		2*ttl, late, runs, slowest.Round(time.Millisecond))
	if late > 0 {
		t.Fatalf("%d of %d takeovers took longer than 2 x LeaseTTL", late, runs)
	}
}

// takeOverAStalledStreamer runs the takeover of TestCDCTakesOverAStalledStreamer, checks every
// event arrived in order, and returns how long after the stalled leases expired the events were
// all consumed, with the LeaseTTL.
func takeOverAStalledStreamer(t *testing.T) (took, ttl time.Duration) {
	t.Helper()
	h := newCDCHarness(t, testsupport.KafkaBrokers(t))
	pub := h.publisher()
	stop := h.start(h.config(pub)) // creates the slot and drains
	h.waitForStream()
	h.write(h.event("warm-up", 0)) // the topic exists before the takeover is timed
	consume(t, h.brokers, h.topic, 1, 60*time.Second)
	stop()

	table := h.writer.Table()
	slot := testsupport.CDCSlot(t, h.db, table, "default")
	ctx := context.Background()
	cfg, err := pgconn.ParseConfig(testsupport.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	cfg.RuntimeParams["replication"] = "database"
	ghost, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer ghost.Close(ctx)
	if err := pglogrepl.StartReplication(ctx, ghost, slot, 0, pglogrepl.StartReplicationOptions{
		Mode: pglogrepl.LogicalReplication, PluginArgs: []string{"proto_version '2'", "publication_names '" + testsupport.CDCPublication(t, h.db, table) + "'"},
	}); err != nil {
		t.Fatal(err)
	}
	ttl = 2 * time.Second
	if _, err := h.db.Exec("UPDATE "+table.Leases()+" SET owner = 'stalled', epoch = epoch + 1, "+
		"expires_at = clock_timestamp() + $1::bigint * interval '1 microsecond' WHERE lease_group = 'default'", ttl.Microseconds()); err != nil {
		t.Fatal(err)
	}
	expires := time.Now().Add(ttl)
	keys := keysNamed("p", 10)
	var events []outbox.Event
	for _, k := range keys {
		events = append(events, h.event(k, 0), h.event(k, 1))
	}
	h.write(events...)
	h.start(h.config(pub))
	got := consumeDistinct(t, h.brokers, h.topic, len(events)+1, 2*time.Minute)
	checkDelivery(t, got[1:], keys, 2)
	return time.Since(expires), ttl
}
