package forwarder_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestCDCKeepsCommitOrderWithoutKeyLocks: writers without key locks, where every key's second
// transaction takes its seq first and commits last, so that seq order and commit order disagree
// for every key. The CDC relay publishes in commit order (the WAL's); the polling relay, which
// orders by seq, would fail this test. Rolled-back transactions never reach the broker.
//
// The stream's order is what is tested: the topic is created first. (A CI run on a Kafka started
// minutes before failed here: a first publish to the auto-created topic failed, the key went to
// the retry path, which then claimed in seq order, and n+1 went out first; the retry path's order
// is TestCDCRetryPathKeepsCommitOrderWithoutKeyLocks'.)
func TestCDCKeepsCommitOrderWithoutKeyLocks(t *testing.T) {
	h := newCDCHarness(t, testsupport.KafkaBrokers(t))
	testsupport.CreateKafkaTopic(t, h.brokers, h.topic)
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: h.writer.Table().Events(), DisableKeyLocks: true})
	if err != nil {
		t.Fatal(err)
	}
	h.writer = w
	h.start(h.config(h.publisher()))
	h.waitForStream()

	keys := keysNamed("k", 40)
	const rounds = 5 // 2 events per round and key
	h.writeInvertedRounds(keys, rounds)
	got := consumeDistinct(t, h.brokers, h.topic, len(keys)*2*rounds, 60*time.Second)
	dups := checkDelivery(t, got, keys, 2*rounds)
	for _, r := range got {
		if r.n < 0 {
			t.Fatalf("the rolled-back event %s of key %s was published", r.eventID, r.key)
		}
	}
	t.Logf("%d events in commit order over %d keys, %d duplicates", len(got)-dups, len(keys), dups)
}

// TestCDCRetryPathKeepsCommitOrderWithoutKeyLocks: the same writers, and a publisher that fails
// the first publish of every key. The key's first event is left to the retry path with a backoff,
// and its later events, streamed meanwhile, are passed to it too; the retry path publishes them in
// commit order, although the second event of each round has the lower seq. (Claimed in seq order,
// as before schema v5, the second event went out first, in 3 runs of 3.)
func TestCDCRetryPathKeepsCommitOrderWithoutKeyLocks(t *testing.T) {
	h := newCDCHarness(t, testsupport.KafkaBrokers(t))
	testsupport.CreateKafkaTopic(t, h.brokers, h.topic)
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: h.writer.Table().Events(), DisableKeyLocks: true})
	if err != nil {
		t.Fatal(err)
	}
	h.writer = w
	pub := &failFirstOfKey{Publisher: h.publisher(), failed: map[string]bool{}}
	h.start(h.config(pub))
	h.waitForStream()

	keys := keysNamed("r", 10)
	const rounds = 3
	h.writeInvertedRounds(keys, rounds)
	got := consumeDistinct(t, h.brokers, h.topic, len(keys)*2*rounds, 60*time.Second)
	dups := checkDelivery(t, got, keys, 2*rounds)
	if n := pub.failures(); n != len(keys) {
		t.Fatalf("the publisher failed %d first publishes, want one per key (%d)", n, len(keys))
	}
	t.Logf("%d events in commit order over %d keys, each key through the retry path once, %d duplicates", len(got)-dups, len(keys), dups)
}

// failFirstOfKey fails, with a retriable error, every Publish call holding the first message of
// a key it has not failed yet (the whole call: the messages after it in the call are held back).
type failFirstOfKey struct {
	message.Publisher
	mu     sync.Mutex
	failed map[string]bool
}

func (p *failFirstOfKey) Publish(topic string, msgs ...*message.Message) error {
	p.mu.Lock()
	fail := false
	for _, m := range msgs {
		if k := m.Metadata.Get(outbox.MetadataAggregateID); !p.failed[k] {
			p.failed[k], fail = true, true
		}
	}
	p.mu.Unlock()
	if fail {
		return errors.New("injected: the first publish of a key fails")
	}
	return p.Publisher.Publish(topic, msgs...)
}

func (p *failFirstOfKey) failures() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.failed)
}

// writeInvertedRounds writes rounds inverted pairs (invertedPair) for every key, the keys
// concurrently: events 0 to 2*rounds-1 of each key.
func (h *harness) writeInvertedRounds(keys []string, rounds int) {
	h.t.Helper()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, len(keys))
	for _, k := range keys {
		wg.Go(func() {
			for r := range rounds {
				if err := h.invertedPair(ctx, k, 2*r); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		h.t.Fatal(err)
	}
}

// invertedPair writes events n and n+1 of key so that n+1 gets the lower seq but commits after
// n, and a rolled-back event (n = -1) in between.
func (h *harness) invertedPair(ctx context.Context, key string, n int) error {
	later, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = later.Rollback() }()
	if err := h.writer.WriteTx(ctx, later, h.event(key, n+1)); err != nil {
		return err
	}
	phantom, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := h.writer.WriteTx(ctx, phantom, h.event(key, -1)); err != nil {
		return err
	}
	if err := phantom.Rollback(); err != nil {
		return err
	}
	if err := h.tryWrite(h.event(key, n)); err != nil {
		return fmt.Errorf("write %s/%d: %w", key, n, err)
	}
	return later.Commit()
}

// TestCDCPoisonEventIsParkedDeadLetteredAndReplayed is the polling relay's poison test on the
// cdc source: the later events of a failing key go to the retry path, every other key streams,
// dead letters are replayed and discarded in order.
func TestCDCPoisonEventIsParkedDeadLetteredAndReplayed(t *testing.T) {
	for _, partial := range []bool{false, true} {
		t.Run(fmt.Sprintf("partial-delivery=%v", partial), func(t *testing.T) {
			h := newCDCHarness(t, kfakeBrokers(t))
			testPoisonEvent(t, h, partial)
		})
	}
}

// TestCDCCrashBetweenPublishAndAck: the relay's connections, the replication connection
// included, are cut after a publish and before its acknowledgement (and so before the slot
// position is confirmed); the stream resumes from the confirmed position and the batch is
// published again: duplicates, in order, nothing lost.
func TestCDCCrashBetweenPublishAndAck(t *testing.T) {
	testCrashBetweenPublishAndAck(t, newCDCHarness(t, testsupport.KafkaBrokers(t)))
}

// TestCDCBacklogOnlyInTheTableThenResume: events committed before any slot existed are only in
// the table; the first relay creates the slot and drains them. Events committed while the relay
// is down are in the slot's WAL; the next relay resumes from the confirmed position and
// publishes each of them once.
func TestCDCBacklogOnlyInTheTableThenResume(t *testing.T) {
	h := newCDCHarness(t, testsupport.KafkaBrokers(t))
	keys := keysNamed("b", 30)
	writeRound := func(n int) {
		var events []outbox.Event
		for _, k := range keys {
			events = append(events, h.event(k, n))
		}
		h.write(events...)
	}
	for n := range 3 {
		writeRound(n)
	}
	pub := h.publisher()
	// No lease runs out for a relay the machine's load held up (the harness's 2 s would): the
	// test asserts no duplicates. The stop releases the leases, so the restart need not wait.
	cfg := h.config(pub)
	cfg.LeaseTTL = 30 * time.Second
	stop := h.start(cfg)
	h.waitForStream()
	consumeDistinct(t, h.brokers, h.topic, 3*len(keys), 60*time.Second)
	stop()

	for n := 3; n < 6; n++ {
		writeRound(n)
	}
	h.start(cfg)
	got := consumeDistinct(t, h.brokers, h.topic, 6*len(keys), 60*time.Second)
	if dups := checkDelivery(t, got, keys, 6); dups != 0 {
		t.Fatalf("%d duplicates after a clean stop and a resume from the confirmed position", dups)
	}
	// The acknowledgement commits after the broker has the events: wait for it.
	deadline := time.Now().Add(2 * time.Minute) // a bound against a hang
	for h.rowsWithStatus(0) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := h.rowsWithStatus(0); n != 0 {
		t.Fatalf("%d rows still pending 2 minutes after the broker had every event", n)
	}
}

// TestCDCSlotDroppedWhileRunning: an operator terminates the walsender and drops the slot while
// events are being written. The relay says so, recreates the slot and drains the table: every
// event arrives, in order.
func TestCDCSlotDroppedWhileRunning(t *testing.T) {
	h := newCDCHarness(t, testsupport.KafkaBrokers(t))
	reg := prometheus.NewRegistry()
	cfg := h.config(h.publisher())
	cfg.Metrics = reg
	h.start(cfg)
	h.waitForStream()
	slot := testsupport.CDCSlot(t, h.db, h.writer.Table(), "default")
	keys := keysNamed("d", 20)
	const perKey = 30
	dropped := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		for {
			_, err := h.db.Exec("SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = $1 AND active_pid IS NOT NULL", slot)
			if err == nil {
				_, err = h.db.Exec("SELECT pg_drop_replication_slot($1)", slot)
			}
			if err == nil || !strings.Contains(err.Error(), "is active") {
				dropped <- err
				return
			}
		}
	}()
	for n := range perKey {
		var events []outbox.Event
		for _, k := range keys {
			events = append(events, h.event(k, n))
		}
		h.write(events...)
		time.Sleep(20 * time.Millisecond)
	}
	if err := <-dropped; err != nil {
		t.Fatalf("drop the slot: %v", err)
	}
	got := consumeDistinct(t, h.brokers, h.topic, perKey*len(keys), 60*time.Second)
	dups := checkDelivery(t, got, keys, perKey)
	lost := testsupport.CounterValue(t, reg, "outboxkit_cdc_slot_lost_total")
	if lost != 1 {
		t.Fatalf("slot_lost_total = %v, want 1", lost)
	}
	t.Logf("%d events after the slot was dropped mid-stream, %d duplicates", len(got)-dups, dups)
}

// TestCDCConfigErrorsNameTheField: the cdc source's settings are checked before anything runs.
func TestCDCConfigErrorsNameTheField(t *testing.T) {
	base := forwarder.Config{DB: &sql.DB{}, Dialect: outbox.Postgres, Publisher: nopPublisher{}}
	for _, c := range []struct {
		edit func(*forwarder.Config)
		want string
	}{
		{func(c *forwarder.Config) { c.Source = "wall" }, `Source "wall" is not one of polling, cdc, wal`},
		{func(c *forwarder.Config) { c.Source = forwarder.SourceCDC }, "CDC.DSN is required"},
		{func(c *forwarder.Config) { c.Source, c.Dialect = forwarder.SourceCDC, outbox.MySQL }, `needs the postgres dialect, got "mysql"`},
		{func(c *forwarder.Config) {
			c.Source, c.CDC.DSN = forwarder.SourceCDC, "postgres://u:secret@host:notaport/db"
		}, "CDC.DSN is not a valid PostgreSQL connection string"},
		{func(c *forwarder.Config) {
			c.Source, c.CDC.DSN, c.Delivery = forwarder.SourceCDC, "postgres://h/db", forwarder.ExactlyOnce
		}, `Delivery "exactly_once" needs a publisher with transactions`},
	} {
		cfg := base
		c.edit(&cfg)
		_, err := forwarder.New(cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want an error containing %q", err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("the error shows the DSN's password: %v", err)
		}
	}
}

type nopPublisher struct{}

func (nopPublisher) Publish(string, ...*message.Message) error { return nil }
func (nopPublisher) Close() error                              { return nil }

// TestCDCIdleSlotKeepsAdvancing: with no event written, WAL written by other tables must not
// stay pinned: the relay confirms the positions the keepalives report, so the slot's confirmed
// position passes a WAL position taken after that other work.
func TestCDCIdleSlotKeepsAdvancing(t *testing.T) {
	h := newCDCHarness(t, kfakeBrokers(t))
	h.start(h.config(h.publisher()))
	h.waitForStream()
	other := testsupport.UniqueName("other")
	if _, err := h.db.Exec("CREATE TABLE " + other + " (id BIGSERIAL PRIMARY KEY, note TEXT)"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = h.db.Exec("DROP TABLE IF EXISTS " + other) })
	for range 20 {
		if _, err := h.db.Exec("INSERT INTO " + other + " (note) SELECT repeat('x', 200) FROM generate_series(1, 100)"); err != nil {
			t.Fatal(err)
		}
	}
	var target string
	if err := h.db.QueryRow("SELECT pg_current_wal_lsn()::text").Scan(&target); err != nil {
		t.Fatal(err)
	}
	slot := testsupport.CDCSlot(t, h.db, h.writer.Table(), "default")
	deadline := time.Now().Add(2 * time.Minute) // a bound against a hang
	for {
		var passed bool
		var lag int64
		if err := h.db.QueryRow("SELECT confirmed_flush_lsn >= $1::pg_lsn, pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint"+
			" FROM pg_replication_slots WHERE slot_name = $2", target, slot).Scan(&passed, &lag); err != nil {
			t.Fatal(err)
		}
		if passed {
			t.Logf("the idle slot confirmed past %s (lag now %d bytes)", target, lag)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 2 minutes the idle slot's confirmed position is still before %s (%d bytes behind)", target, lag)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestCDCRetryPathRunsBesideTheStream: a retry publish that hangs (the broker slow to answer
// for one key) delays only its own key. Events of other keys committed meanwhile are streamed
// and published while it hangs, and the hanging key's events still arrive in order once it
// answers. (While the retry path ran alone, after draining the stream, they waited for it.)
func TestCDCRetryPathRunsBesideTheStream(t *testing.T) {
	h := newCDCHarness(t, kfakeBrokers(t))
	slow := []outbox.Event{h.event("slow", 0), h.event("slow", 1)}
	pub := &hangingRetryPublisher{Publisher: h.publisher(), id: slow[0].ID.String(),
		hanging: make(chan struct{}), release: make(chan struct{})}
	defer pub.unhang()
	cfg := h.config(pub)
	// LeaseTTL bounds a publish: the retry hangs for 10 minutes unless released, far longer than
	// the test waits for the other keys, which therefore cannot have waited for it.
	cfg.LeaseTTL = 10 * time.Minute
	h.start(cfg)
	h.waitForStream()
	h.write(slow...)
	select {
	case <-pub.hanging:
	case <-time.After(2 * time.Minute): // a bound against a hang
		t.Fatal("the failed event was not retried within 2 minutes")
	}
	free := keysNamed("free", 10)
	var events []outbox.Event
	for _, k := range free {
		events = append(events, h.event(k, 0), h.event(k, 1))
	}
	h.write(events...)
	got := consumeDistinct(t, h.brokers, h.topic, len(events), 2*time.Minute)
	for _, r := range got {
		if r.key == "slow" {
			t.Fatalf("event slow/%d was published while its retry publish hung", r.n)
		}
	}
	if n := len(got); n < len(events) {
		t.Fatalf("%d of the %d events of other keys were published within 2 minutes while a retry publish hung", n, len(events))
	}
	pub.unhang()
	all := consumeDistinct(t, h.brokers, h.topic, len(events)+len(slow), 2*time.Minute)
	checkDelivery(t, all, append(free, "slow"), 2)
}

// hangingRetryPublisher refuses the first call that carries event id, and makes the next one
// (the retry) hang until unhang or the end of the message's context; it delivers every other
// call.
type hangingRetryPublisher struct {
	message.Publisher
	id       string
	calls    atomic.Int32
	hanging  chan struct{}
	release  chan struct{}
	released sync.Once
}

func (p *hangingRetryPublisher) unhang() { p.released.Do(func() { close(p.release) }) }

func (p *hangingRetryPublisher) Publish(topic string, msgs ...*message.Message) error {
	for _, m := range msgs {
		if m.Metadata.Get(outbox.MetadataEventID) != p.id {
			continue
		}
		switch p.calls.Add(1) {
		case 1:
			return errors.New("injected: the broker refused the message")
		case 2:
			close(p.hanging)
			select {
			case <-p.release:
			case <-m.Context().Done():
				return m.Context().Err()
			}
		}
	}
	return p.Publisher.Publish(topic, msgs...)
}
