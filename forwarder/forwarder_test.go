package forwarder_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/message/router/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/outboxkit/outboxkit/brokers/kafka"
	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/forwarder/admin"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/internal/testsupport/testdb"
	"github.com/outboxkit/outboxkit/outbox"
)

func TestRelaysEveryDialect(t *testing.T) {
	for _, d := range []outbox.Dialect{outbox.Postgres, outbox.MySQL, outbox.SQLite} {
		t.Run(string(d), func(t *testing.T) {
			h := newHarness(t, d, kfakeBrokers(t))
			keys := keysNamed("k", 20)
			for n := range 5 {
				var events []outbox.Event
				for _, k := range keys {
					events = append(events, h.event(k, n))
				}
				h.write(events...)
			}
			reg := prometheus.NewRegistry()
			cfg := h.config(h.publisher())
			cfg.Metrics = reg
			// No lease runs out for a relay the machine's load held up (the harness's 2 s would):
			// the test asserts no duplicates.
			cfg.LeaseTTL = 30 * time.Second
			stop := h.start(cfg)
			got := consume(t, h.brokers, h.topic, 100, 60*time.Second)
			if dups := checkDelivery(t, got, keys, 5); dups != 0 {
				t.Fatalf("%d duplicates without any crash", dups)
			}
			for _, r := range got {
				if r.key != r.headers[outbox.MetadataAggregateID] || r.headers[outbox.MetadataEventType] != "OrderChanged" ||
					r.headers[outbox.MetadataAggregateType] != "order" || r.headers["content-type"] != "application/json" ||
					r.headers[outbox.MetadataCreatedAt] == "" {
					t.Fatalf("record key %q headers %v", r.key, r.headers)
				}
			}
			stop()
			if n := h.rowsWithStatus(0); n != 0 {
				t.Fatalf("%d rows still pending after delivery", n)
			}
			if v := testsupport.CounterValue(t, reg, "outboxkit_forwarder_relayed_total"); v != 100 {
				t.Fatalf("relayed_total = %v, want 100", v)
			}
		})
	}
}

// TestThreeForwardersKeepPerKeyOrder: three forwarders share one table while writers add events,
// one forwarder stops midway and a fourth takes over; nothing is lost or reordered.
func TestThreeForwardersKeepPerKeyOrder(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dialect outbox.Dialect
		brokers func(testing.TB) []string
	}{
		{"postgres-kfake", outbox.Postgres, kfakeBrokers},
		{"postgres-kafka", outbox.Postgres, testsupport.KafkaBrokers},
		{"mysql-kfake", outbox.MySQL, kfakeBrokers},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, tc.dialect, tc.brokers(t))
			keys := keysNamed("agg", 200)
			const perKey = 10
			stops := make([]func(), 3)
			registries := make([]*prometheus.Registry, 4)
			recorders := make([]*recordingPublisher, 4)
			relayConfig := func(i int) forwarder.Config {
				registries[i] = prometheus.NewRegistry()
				// Each relay publishes through its own recorder (2 ms per call, so that calls
				// running at once are seen to overlap).
				pub, rec := recording(h.publisher(), 2*time.Millisecond)
				recorders[i] = rec
				cfg := h.config(pub)
				cfg.RelayID = fmt.Sprintf("relay-%d", i)
				cfg.Metrics = registries[i]
				// No lease may run out for a relay the machine's load held up: the test asserts no
				// duplicates, and partitions move here only by a graceful stop and a new relay's
				// arrival (heartbeats 200 ms apart), never by expiry.
				cfg.LeaseTTL = 30 * time.Second
				return cfg
			}
			for i := range stops {
				stops[i] = h.start(relayConfig(i))
			}
			h.waitForOwners(3) // the relays have shared the partitions out before writes begin
			var wg sync.WaitGroup
			const writers = 4
			for w := range writers {
				wg.Go(func() {
					for n := range perKey {
						var events []outbox.Event
						for i := w; i < len(keys); i += writers {
							events = append(events, h.event(keys[i], n))
							if len(events) == 10 {
								h.write(events...)
								events = nil
							}
						}
						if len(events) > 0 {
							h.write(events...)
						}
						if n == perKey/2 && w == 0 {
							stops[1]() // one relay leaves gracefully; its partitions move
							h.start(relayConfig(3))
						}
						time.Sleep(100 * time.Millisecond) // rounds spread over a second: every relay gets work
					}
				})
			}
			wg.Wait()
			got := consume(t, h.brokers, h.topic, len(keys)*perKey, 90*time.Second)
			dups := checkDelivery(t, got, keys, perKey)
			t.Logf("%d events delivered over %d keys by 4 relays, %d duplicates", len(got)-dups, len(keys), dups)
			if dups != 0 {
				t.Fatalf("%d duplicates although no relay crashed", dups)
			}
			var shares []float64
			working := 0
			for _, reg := range registries {
				n := testsupport.CounterSum(t, reg, "outboxkit_forwarder_relayed_total")
				shares = append(shares, n)
				if n > 0 {
					working++
				}
			}
			t.Logf("events relayed per relay: %v", shares)
			if working < 2 {
				t.Fatalf("only %d relay(s) relayed anything (%v): the partitions were not shared", working, shares)
			}
			// The relays worked at the same time: every one of them published, and calls of
			// different relays ran at once (relays that queue behind each other's locks publish
			// one after the other, never together).
			var calls []int
			overlapping := 0
			for i, rec := range recorders {
				calls = append(calls, len(rec.calls()))
				if len(rec.calls()) == 0 {
					t.Errorf("relay-%d made no publish call", i)
				}
				for j := i + 1; j < len(recorders); j++ {
					longest, pairs := longestOverlap(rec.calls(), recorders[j].calls())
					overlapping += pairs
					t.Logf("relay-%d and relay-%d: %d pairs of publish calls overlapped, longest by %v", i, j, pairs, longest)
				}
			}
			t.Logf("publish calls per relay: %v", calls)
			if overlapping == 0 {
				t.Fatalf("no publish calls of different relays overlapped in time (calls per relay %v): the relays did not work concurrently", calls)
			}
		})
	}
}

// TestTwoRelaysPublishAtTheSameTime: two relays, each holding half of the partitions, each
// publishing through a slow broker (200 ms per call) and with one worker, so a relay has at most
// one call in flight. Their calls must overlap in time, and the database must show no lock wait
// of one relay's connection on the other's: disjoint partitions share no lock. Relays that
// serialize on each other's locks (the lease query locking every row it scans, as InnoDB does)
// publish one after the other and fail this test.
func TestTwoRelaysPublishAtTheSameTime(t *testing.T) {
	for _, dialect := range []outbox.Dialect{outbox.Postgres, outbox.MySQL} {
		t.Run(string(dialect), func(t *testing.T) { testTwoRelaysPublishAtTheSameTime(t, dialect) })
	}
}

func testTwoRelaysPublishAtTheSameTime(t *testing.T, dialect outbox.Dialect) {
	const delay = 200 * time.Millisecond
	h := newHarness(t, dialect, kfakeBrokers(t))
	watch := newLockWaitWatch(t, h)
	var recorders []*recordingPublisher
	for i := range 2 {
		pub, rec := recording(h.publisher(), delay)
		recorders = append(recorders, rec)
		cfg := h.config(pub)
		cfg.DB = watch.relayDB(i)
		cfg.RelayID = fmt.Sprintf("relay-%d", i)
		cfg.Workers = 1
		cfg.BatchSize = 20              // many calls per relay: both are busy for a few seconds
		cfg.LeaseTTL = 30 * time.Second // no lease runs out for a relay held up by the load: no duplicates
		h.start(cfg)
	}
	deadline := time.Now().Add(2 * time.Minute) // a bound against a hang
	for {
		owned := h.ownedBy()
		if owned["relay-0"] == outbox.Partitions/2 && owned["relay-1"] == outbox.Partitions/2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the relays did not share the partitions half and half: %v", owned)
		}
		time.Sleep(20 * time.Millisecond)
	}
	stopWatch := watch.start()
	keys := keysNamed("both", 100)
	const perKey = 5
	var events []outbox.Event
	for n := range perKey {
		for _, k := range keys {
			events = append(events, h.event(k, n))
		}
	}
	h.write(events...)
	got := consumeDistinct(t, h.brokers, h.topic, len(events), 90*time.Second)
	waits := stopWatch()
	if dups := checkDelivery(t, got, keys, perKey); dups != 0 {
		t.Errorf("%d duplicates without any fault", dups)
	}
	a, b := recorders[0].calls(), recorders[1].calls()
	longest, pairs := longestOverlap(a, b)
	t.Logf("%s: %d and %d publish calls of %v; %d pairs overlapped, longest by %v; %d samples saw a lock wait between the relays",
		dialect, len(a), len(b), delay, pairs, longest, len(waits))
	if len(a) == 0 || len(b) == 0 {
		t.Fatalf("a relay made no publish call (%d and %d)", len(a), len(b))
	}
	if longest < delay/2 {
		t.Fatalf("the relays' publish calls overlapped by at most %v (%d pairs), want at least %v: they did not publish at the same time",
			longest, pairs, delay/2)
	}
	if len(waits) > 0 {
		t.Fatalf("the database showed %d lock waits of one relay on the other, e.g. %s", len(waits), waits[0])
	}
}

// faultyPublisher wraps a real publisher and refuses the poisoned event ids on topic, the way a
// broker refuses a message (the dead-letter topic accepts it). By default a call containing a
// poisoned event fails whole; with partial set, the other messages of the call are delivered and
// the call still fails, as Sarama does when it refuses one message before sending the rest.
type faultyPublisher struct {
	message.Publisher
	topic    string
	partial  bool
	mu       sync.Mutex
	poisoned map[string]error
	calls    atomic.Int64
}

func (p *faultyPublisher) poison(eventID string, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil {
		delete(p.poisoned, eventID)
		return
	}
	p.poisoned[eventID] = err
}

func (p *faultyPublisher) Publish(topic string, msgs ...*message.Message) error {
	p.calls.Add(1)
	p.mu.Lock()
	var refused error
	var deliver []*message.Message
	for _, m := range msgs {
		if err := p.poisoned[m.Metadata.Get(outbox.MetadataEventID)]; err != nil && topic == p.topic {
			refused = err
			continue
		}
		deliver = append(deliver, m)
	}
	p.mu.Unlock()
	if refused == nil {
		return p.Publisher.Publish(topic, msgs...)
	}
	if p.partial && len(deliver) > 0 {
		if err := p.Publisher.Publish(topic, deliver...); err != nil {
			return err
		}
	}
	return refused
}

func TestPoisonEventIsRetriedThenDeadLetteredWithoutBlockingOtherKeys(t *testing.T) {
	for _, partial := range []bool{false, true} {
		t.Run(fmt.Sprintf("partial-delivery=%v", partial), func(t *testing.T) {
			testPoisonEvent(t, newHarness(t, outbox.Postgres, kfakeBrokers(t)), partial)
		})
	}
}

// testPoisonEvent runs on h, whose source (polling or cdc) it does not depend on.
func testPoisonEvent(t *testing.T, h *harness, partial bool) {
	pub := &faultyPublisher{Publisher: h.publisher(), topic: h.topic, partial: partial, poisoned: map[string]error{}}
	healthy := keysNamed("ok", 30)
	var events []outbox.Event
	for _, k := range healthy {
		for n := range 3 {
			events = append(events, h.event(k, n))
		}
	}
	replayed := []outbox.Event{h.event("poison-r", 0), h.event("poison-r", 1), h.event("poison-r", 2)}
	discarded := []outbox.Event{h.event("poison-d", 0), h.event("poison-d", 1), h.event("poison-d", 2)}
	injected := errors.New("injected: broker refused the message")
	pub.poison(replayed[0].ID.String(), injected)
	pub.poison(discarded[0].ID.String(), injected)
	cfg := h.config(pub)
	cfg.MaxAttempts = 3
	cfg.DeadLetterTopic = h.topic + ".dead"
	h.writeAndStart(cfg, func() { h.write(append(append(replayed, discarded...), events...)...) })

	got := consumeDistinct(t, h.brokers, h.topic, len(events), 60*time.Second)
	checkDelivery(t, got, healthy, 3)
	adm, err := admin.New(h.db, h.dialect, h.writer.Table().Events())
	if err != nil {
		t.Fatal(err)
	}
	var dead []admin.DeadLetter
	deadline := time.Now().Add(2 * time.Minute) // a bound against a hang
	for len(dead) < 2 && time.Now().Before(deadline) {
		if dead, err = adm.DeadLetters(context.Background(), 10); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(dead) != 2 {
		t.Fatalf("dead letters: %+v, want the 2 poisoned events", dead)
	}
	for _, d := range dead {
		if d.Attempts != 3 || !strings.Contains(d.LastError, "injected") {
			t.Fatalf("dead letter %+v: want 3 attempts and the injected reason", d)
		}
	}
	dlq := consume(t, h.brokers, cfg.DeadLetterTopic, 2, 2*time.Minute)
	if len(dlq) != 2 {
		t.Fatalf("dead-letter topic has %d messages, want 2", len(dlq))
	}
	for _, m := range dlq {
		if !strings.Contains(m.headers[middleware.ReasonForPoisonedKey], "injected") ||
			m.headers[middleware.PoisonedTopicKey] != h.topic || m.headers[forwarder.MetadataAttempts] != "3" {
			t.Fatalf("dead letter headers %v", m.headers)
		}
	}
	// The later events of both poisoned keys are parked, not published. (With partial delivery
	// the isolation step publishes the rest of a failed call again: duplicates, not leaks.)
	before := consume(t, h.brokers, h.topic, 10*len(events), 2*time.Second)
	for _, r := range before {
		if strings.HasPrefix(r.key, "poison") {
			t.Fatalf("event %s/%d of a parked key was published", r.key, r.n)
		}
	}
	status, err := adm.Status(context.Background())
	if err != nil || len(status) != 1 || status[0].Dead != 2 || status[0].Pending != 4 {
		t.Fatalf("status %+v (%v), want 2 dead and 4 pending", status, err)
	}

	// Replay one (the broker accepts it now) and discard the other: both keys flow again, in order.
	pub.poison(replayed[0].ID.String(), nil)
	if n, err := adm.Replay(context.Background(), replayed[0].ID); err != nil || n != 1 {
		t.Fatalf("replay: %d, %v", n, err)
	}
	if n, err := adm.Discard(context.Background(), discarded[0].ID); err != nil || n != 1 {
		t.Fatalf("discard: %d, %v", n, err)
	}
	// Read until the five events of the poisoned keys that must flow now are in (counting what
	// was read before would miss them when that read, bounded by time, saw less than the topic
	// held).
	all := consumeUntil(t, h.brokers, h.topic, func(got []received) bool {
		ids := map[string]bool{}
		for _, r := range got {
			if strings.HasPrefix(r.key, "poison") {
				ids[r.eventID] = true
			}
		}
		return len(ids) >= 5
	}, 2*time.Minute)
	var order []string
	seen := map[string]bool{}
	for _, r := range all {
		if strings.HasPrefix(r.key, "poison") && !seen[r.eventID] {
			seen[r.eventID] = true
			order = append(order, fmt.Sprintf("%s/%d", r.key, r.n))
		}
	}
	want := "[poison-r/0 poison-r/1 poison-r/2]"
	gotR := fmt.Sprint(filter(order, "poison-r"))
	gotD := fmt.Sprint(filter(order, "poison-d"))
	if gotR != want || gotD != "[poison-d/1 poison-d/2]" {
		t.Fatalf("after replay and discard: %s and %s", gotR, gotD)
	}
}

func filter(items []string, prefix string) []string {
	var out []string
	for _, s := range items {
		if strings.HasPrefix(s, prefix) {
			out = append(out, s)
		}
	}
	return out
}

// crashingPublisher publishes its first call for real and then does not return until released:
// the relay dies (its context is cancelled) between the broker's acknowledgement and the
// outbox's, so the events of that call are in the broker and still pending in the table. A dead
// relay publishes nothing more: every later call fails without publishing, so only the next
// relay can publish those events again.
type crashingPublisher struct {
	message.Publisher
	once      sync.Once
	dead      atomic.Bool
	published chan struct{} // closed once the first call's events are in the broker
	release   chan struct{} // closed by the test once the relay is being stopped
}

func newCrashingPublisher(pub message.Publisher) *crashingPublisher {
	return &crashingPublisher{Publisher: pub, published: make(chan struct{}), release: make(chan struct{})}
}

func (p *crashingPublisher) Publish(topic string, msgs ...*message.Message) error {
	if p.dead.Load() {
		return errors.New("the relay is dead")
	}
	if err := p.Publisher.Publish(topic, msgs...); err != nil {
		return err
	}
	crashed := false
	p.once.Do(func() {
		crashed = true
		p.dead.Store(true)
		close(p.published)
		<-p.release
	})
	if crashed {
		return errors.New("the relay died before it could record the acknowledgement")
	}
	return nil
}

func TestCrashBetweenPublishAndAckRepublishes(t *testing.T) {
	testCrashBetweenPublishAndAck(t, newHarness(t, outbox.Postgres, testsupport.KafkaBrokers(t)))
}

// testCrashBetweenPublishAndAck runs on h's source: a relay is stopped after the broker has a
// call's events and before the outbox records them; the next relay publishes them again (with
// cdc, it resumes from the last confirmed position), so every event arrives, some twice, in
// order.
func testCrashBetweenPublishAndAck(t *testing.T, h *harness) {
	keys := keysNamed("c", 50)
	write := func() {
		for n := range 4 {
			var events []outbox.Event
			for _, k := range keys {
				events = append(events, h.event(k, n))
			}
			h.write(events...)
		}
	}
	pub := newCrashingPublisher(h.publisher())
	cfg := h.config(pub)
	cfg.Workers = 1
	stop := h.writeAndStart(cfg, write)
	select {
	case <-pub.published:
	case <-time.After(60 * time.Second):
		t.Fatal("the relay published nothing in 60 s")
	}
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	time.Sleep(100 * time.Millisecond) // the context is cancelled while the call is in flight
	close(pub.release)
	<-stopped

	cfg.Publisher = h.publisher()
	h.start(cfg)
	deadline := time.Now().Add(60 * time.Second)
	for h.rowsWithStatus(0) > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	got := consumeUntil(t, h.brokers, h.topic, func(got []received) bool {
		ids := map[string]bool{}
		for _, r := range got {
			ids[r.eventID] = true
		}
		return len(ids) == 200 && len(got) > 200 // every event, and the crashed call's again
	}, 2*time.Minute)
	dups := checkDelivery(t, got, keys, 4)
	if dups == 0 {
		t.Fatal("no duplicates: the events published before the crash were not published again")
	}
	if n := h.rowsWithStatus(0); n != 0 {
		t.Fatalf("%d rows still pending after the second relay ran 60 s", n)
	}
	t.Logf("%d events delivered, %d published again after the crash", len(got)-dups, dups)
}

// TestListenNotifyIsWhatWakesTheForwarder: a forwarder whose polls are an hour apart (both poll
// intervals 1 h), its first poll done on an empty table, relays a new event within a minute: only
// the commit's NOTIFY can have woken it that soon. The minute only bounds a hang.
//
// Its control, the same forwarder without wake-ups leaving the event pending for the same minute
// (nothing but the notification could have moved it), is a soak test,
// TestSoakNothingButNotifyWakesTheForwarder: it holds only if the forwarder's first poll is over
// before the event is written, which the test can only wait for with a sleep.
func TestListenNotifyIsWhatWakesTheForwarder(t *testing.T) {
	pending, took := wakeByNotify(t, true)
	if pending != 0 {
		t.Fatalf("event still pending %v after commit although the forwarder listens: the NOTIFY did not wake it", notifyBound)
	}
	t.Logf("commit-to-ack with LISTEN/NOTIFY and polls an hour apart: %v", took)
}

// TestSoakNothingButNotifyWakesTheForwarder (soak only): the control of
// TestListenNotifyIsWhatWakesTheForwarder, repeated: without wake-ups the event stays pending for
// the minute in which the listening forwarder relays it.
func TestSoakNothingButNotifyWakesTheForwarder(t *testing.T) {
	runs := testsupport.Soak(t, 3)
	moved := 0
	for i := range runs {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			if pending, took := wakeByNotify(t, false); pending != 1 {
				moved++
				t.Errorf("without wake-ups the event left the table after %v: something else polled, so the notify test proves nothing", took)
			}
		})
	}
	t.Logf("soak: without wake-ups the event left the table within %v in %d of %d runs", notifyBound, moved, runs)
}

// notifyBound is how long wakeByNotify waits for the event to leave the table: far shorter than
// the forwarder's poll interval (an hour), far longer than a woken forwarder needs.
const notifyBound = time.Minute

// wakeByNotify starts a forwarder whose polls are an hour apart, listening to NOTIFY when listen
// is set, writes an event once its first poll is (very likely) over, and waits up to notifyBound
// for the event to leave the table. It returns the rows still pending and the time waited; when
// the event was relayed, it checks the broker holds it.
func wakeByNotify(t *testing.T, listen bool) (pending int, took time.Duration) {
	t.Helper()
	h := newHarness(t, outbox.Postgres, kfakeBrokers(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := h.config(h.publisher())
	cfg.Workers = 1
	cfg.MinPollInterval, cfg.MaxPollInterval = time.Hour, time.Hour
	if listen {
		cfg.Wakeups = forwarder.ListenPostgres(ctx, testsupport.PostgresDSN(t), h.writer.Table(), nil)
	}
	h.start(cfg)
	h.waitForOwners(1)
	time.Sleep(time.Second) // the first poll (and the listener's wake-up on connect) are over
	start := time.Now()
	h.write(h.event("wake", 0))
	for h.rowsWithStatus(0) > 0 && time.Since(start) < notifyBound {
		time.Sleep(5 * time.Millisecond)
	}
	took = time.Since(start)
	pending = h.rowsWithStatus(0)
	if pending == 0 {
		if got := consume(t, h.brokers, h.topic, 1, time.Minute); len(got) != 1 {
			t.Fatalf("%d messages delivered, want 1", len(got))
		}
	}
	return pending, took
}

// TestRetentionKeepsThenPrunesPublishedRows: a relay with an hour of retention keeps the rows it
// published; a relay with 2 s of retention then prunes them. (One relay with 2 s of retention
// would need the test to see the kept rows within those 2 s, which a loaded machine can miss.)
func TestRetentionKeepsThenPrunesPublishedRows(t *testing.T) {
	h := newHarness(t, outbox.Postgres, kfakeBrokers(t))
	h.write(h.event("r", 0), h.event("r", 1))
	cfg := h.config(h.publisher())
	cfg.Retention = time.Hour
	cfg.PruneInterval = 100 * time.Millisecond
	stop := h.start(cfg)
	deadline := time.Now().Add(2 * time.Minute) // bounds against a hang
	for h.rowsWithStatus(1) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("published rows were not kept")
		}
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	cfg.Retention = 2 * time.Second
	h.start(cfg)
	for h.rowsWithStatus(1) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("published rows were not pruned after the retention window")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := consume(t, h.brokers, h.topic, 2, 2*time.Minute); len(got) != 2 {
		t.Fatalf("%d messages delivered, want 2", len(got))
	}
}

func TestTenantScopedForwarders(t *testing.T) {
	h := newHarness(t, outbox.Postgres, kfakeBrokers(t))
	var events []outbox.Event
	for _, tenant := range []string{"acme", "globex", "initech"} {
		for n := range 3 {
			e := h.event("order-1", n)
			e.TenantID = tenant
			events = append(events, e)
		}
	}
	h.write(events...)
	cfg := h.config(h.publisher())
	cfg.Tenants = []string{"acme", "initech"}
	h.start(cfg)
	got := consume(t, h.brokers, h.topic, 6, 2*time.Minute)
	if len(got) != 6 {
		t.Fatalf("%d messages delivered, want 6", len(got))
	}
	tenants := map[string]int{}
	for _, r := range got {
		tenants[r.headers[outbox.MetadataTenantID]]++
	}
	if tenants["acme"] != 3 || tenants["initech"] != 3 {
		t.Fatalf("tenants delivered %v", tenants)
	}
	if extra := consume(t, h.brokers, h.topic, 7, time.Second); len(extra) != 6 {
		t.Fatalf("%d messages: globex leaked into a forwarder limited to acme and initech", len(extra))
	}
	if n := h.rowsWithStatus(0); n != 3 {
		t.Fatalf("%d rows pending, want globex's 3", n)
	}
}

func TestConfigErrorsNameTheField(t *testing.T) {
	db := testsupport.OpenPostgres(t)
	pub := &faultyPublisher{}
	base := forwarder.Config{DB: db, Dialect: outbox.Postgres, Publisher: pub}
	cases := []struct {
		mutate func(*forwarder.Config)
		want   string
	}{
		{func(c *forwarder.Config) { c.DB = nil }, "DB is required"},
		{func(c *forwarder.Config) { c.Publisher = nil }, "Publisher is required"},
		{func(c *forwarder.Config) { c.Dialect = "" }, "Dialect is required"},
		{func(c *forwarder.Config) { c.Dialect = "oracle" }, `"oracle"`},
		{func(c *forwarder.Config) { c.Table = "bad;name" }, `"bad;name"`},
		{func(c *forwarder.Config) { c.BatchSize = -1 }, "BatchSize must be positive, got -1"},
		{func(c *forwarder.Config) { c.BatchSize = 5000 }, "BatchSize 5000 is above the limit"},
		{func(c *forwarder.Config) { c.Workers = 65 }, "Workers 65"},
		{func(c *forwarder.Config) { c.MinPollInterval, c.MaxPollInterval = time.Second, time.Millisecond }, "MaxPollInterval 1ms is below"},
		{func(c *forwarder.Config) { c.RandomizationFactor = 1.5 }, "RandomizationFactor 1.5"},
		{func(c *forwarder.Config) { c.Multiplier = 0.5 }, "Multiplier 0.5"},
		{func(c *forwarder.Config) { c.LeaseTTL, c.HeartbeatInterval = time.Second, 2*time.Second }, "HeartbeatInterval 2s must be shorter than LeaseTTL 1s"},
		{func(c *forwarder.Config) { c.Retention = -time.Second }, "Retention -1s"},
		{func(c *forwarder.Config) { c.MaxAttempts = -3 }, "MaxAttempts must be positive, got -3"},
		{func(c *forwarder.Config) { c.DeadLetterTopic = "dead letters;" }, `DeadLetterTopic: topic "dead letters;"`},
	}
	for _, tc := range cases {
		cfg := base
		tc.mutate(&cfg)
		_, err := forwarder.New(cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want it to contain %q", err, tc.want)
		}
	}
}

// A relay on a table that was never migrated fails at once with ErrNotMigrated, naming the
// migration, on every database: waiting cannot create the table (it used to retry for 7.5 s).
func TestRunFailsClearlyWithoutMigratedTable(t *testing.T) {
	for _, dialect := range []outbox.Dialect{outbox.Postgres, outbox.MySQL, outbox.SQLite} {
		t.Run(string(dialect), func(t *testing.T) {
			var logs syncBuffer
			f, err := forwarder.New(forwarder.Config{DB: testdb.Open(t, dialect), Dialect: dialect, Table: testsupport.UniqueName("missing"),
				Publisher: &faultyPublisher{}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			err = f.Run(ctx)
			if !errors.Is(err, forwarder.ErrNotMigrated) || !strings.Contains(err.Error(), "outboxkit migrate") {
				t.Fatalf("Run on a missing table: %v, want ErrNotMigrated", err)
			}
			if strings.Contains(logs.String(), "database not ready") {
				t.Errorf("Run retried a missing table:\n%s", logs.String())
			}
		})
	}
}

// TestOversizedEventDoesNotTakeOthersDown: with the producer's limit set above the broker's,
// the real Kafka refuses a whole request because of one oversized message. Only that event is
// dead-lettered; the events that shared its request are published.
func TestOversizedEventDoesNotTakeOthersDown(t *testing.T) {
	h := newHarness(t, outbox.Postgres, testsupport.KafkaBrokers(t))
	w, err := outbox.NewWriter(outbox.Config{Dialect: outbox.Postgres, Table: h.writer.Table().Events(), MaxPayloadBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	h.writer = w
	big := h.event("big", 0)
	big.Payload = make([]byte, 2<<20)
	_, _ = rand.Read(big.Payload) // incompressible: lz4 would shrink zeros below the limit
	events := []outbox.Event{big}
	small := keysNamed("small", 40)
	for _, k := range small {
		events = append(events, h.event(k, 0))
	}
	h.write(events...)
	pub, err := kafka.NewPublisher(kafka.Config{Brokers: h.brokers, MessageMaxBytes: 5 << 20}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	cfg := h.config(pub)
	cfg.IsRetriable = kafka.Retriable
	cfg.DeadLetterTopic = h.topic + ".dead"
	h.start(cfg)
	got := consumeDistinct(t, h.brokers, h.topic, len(small), 60*time.Second)
	checkDelivery(t, got, small, 1) // duplicates are expected: the refused request is published again
	// The consumer can see a batch before its acknowledgement commits (no transaction is held
	// across the publish), so wait for the table to settle.
	deadline := time.Now().Add(2 * time.Minute) // a bound against a hang
	for (h.rowsWithStatus(2) < 1 || h.rowsWithStatus(0) > 0) && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if dead, pending := h.rowsWithStatus(2), h.rowsWithStatus(0); dead != 1 || pending != 0 {
		t.Fatalf("%d dead and %d pending rows, want only the oversized event dead", dead, pending)
	}
}
