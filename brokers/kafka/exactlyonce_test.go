package kafka

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

func eoKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "key-" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
	}
	return keys
}

// bothSources runs test once per source (polling, cdc).
func bothSources(t *testing.T, test func(t *testing.T, source forwarder.Source)) {
	for _, source := range []forwarder.Source{forwarder.SourcePolling, forwarder.SourceCDC} {
		t.Run(string(source), func(t *testing.T) { test(t, source) })
	}
}

// TestExactlyOnceRelay: one relay, many keys, every event once in key order for a
// read_committed consumer, and the outbox empty afterwards. On the cdc source the first half is
// the backlog drained when the slot is created, the second half comes through the stream.
func TestExactlyOnceRelay(t *testing.T) { bothSources(t, exactlyOnceRelay) }

func exactlyOnceRelay(t *testing.T, source forwarder.Source) {
	h := newEOHarnessOn(t, source)
	keys := eoKeys(40)
	h.write(keys, 0, 25)
	r := h.startRelay("eo-1", nil)
	h.waitDrained(2 * time.Minute)
	h.ready()
	h.write(keys, 25, 25)
	h.waitDrained(2 * time.Minute)
	r.stop()
	checkExactlyOnce(t, h.readAll(h.topic, true, len(keys)*50, 60*time.Second), keys, 50)
	if c := r.counter("outboxkit_forwarder_transactions_committed_total"); c == 0 {
		t.Errorf("no transaction counted as committed")
	}
}

// gate stops a relay at a crash point once: it pauses the relay's database connections and
// blocks the calling goroutine until released, as a SIGSTOP would.
type gate struct {
	once    sync.Once
	hit     chan string
	release chan struct{}
}

func newGate() *gate { return &gate{hit: make(chan string, 1), release: make(chan struct{})} }

func (g *gate) stopHere(r **relay, unit string) {
	fired := false
	g.once.Do(func() {
		fired = true
		(*r).proxy.pause()
		g.hit <- unit
	})
	if fired {
		<-g.release
	}
}

func (g *gate) wait(t *testing.T, what string) string {
	t.Helper()
	select {
	case unit := <-g.hit:
		return unit
	case <-time.After(60 * time.Second):
		t.Fatalf("the relay never reached %s", what)
		return ""
	}
}

// TestExactlyOnceCrashPoints stops a relay (its goroutine and its database connections, as
// SIGSTOP does) at each point where a crash could publish an event twice, lets another relay
// take its partitions over and drain the outbox, then lets the stopped relay go on. A
// read_committed consumer must see every event exactly once, in key order. It runs on both
// sources: with cdc, the relay taking over is a standby that terminates the stopped relay's
// walsender once its leases expired, and streams the slot from its confirmed position.
func TestExactlyOnceCrashPoints(t *testing.T) { bothSources(t, exactlyOnceCrashPoints) }

func exactlyOnceCrashPoints(t *testing.T, source forwarder.Source) {
	t.Run("zombie paused inside an open transaction", func(t *testing.T) {
		h := newEOHarnessOn(t, source)
		keys := eoKeys(12)
		g := newGate()
		var a *relay
		a = h.startRelay("eo-a", func(p *Publisher) forwarder.TransactionalPublisher {
			p.units.beforeCommit = func(unit string) { g.stopHere(&a, unit) }
			return p
		})
		h.takeOverFrom(t, a, g, "the commit of its first transaction", keys)
		got := h.readAll(h.topic, true, len(keys)*30, 60*time.Second)
		checkExactlyOnce(t, got, keys, 30)
		// The stopped relay's transaction had records on the broker, aborted by the takeover: a
		// read_uncommitted consumer sees them twice, a read_committed one does not.
		if all := h.readAll(h.topic, false, len(keys)*30, 2*time.Minute); len(all) <= len(got) {
			t.Errorf("read_uncommitted saw %d records, read_committed %d: the stopped transaction had no records, the test proves nothing",
				len(all), len(got))
		}
		if c := a.counter("outboxkit_forwarder_transactions_aborted_total"); c == 0 {
			t.Errorf("the fenced relay counted no aborted transaction")
		}
	})

	t.Run("after the commit, before the cleanup", func(t *testing.T) {
		h := newEOHarnessOn(t, source)
		keys := eoKeys(12)
		g := newGate()
		var a *relay
		a = h.startRelay("eo-a", func(p *Publisher) forwarder.TransactionalPublisher {
			return &hookedPublisher{Publisher: p, afterCommit: func(unit string) { g.stopHere(&a, unit) }}
		})
		b := h.takeOverFrom(t, a, g, "the end of its first commit", keys)
		checkExactlyOnce(t, h.readAll(h.topic, true, len(keys)*30, 60*time.Second), keys, 30)
		if n := b.counter("outboxkit_forwarder_recovered_rows_total"); n == 0 {
			t.Errorf("the relay that took over recovered no row from the stopped relay's checkpoint")
		}
	})

	t.Run("during the takeover's cleanup", func(t *testing.T) {
		h := newEOHarnessOn(t, source)
		keys := eoKeys(12)
		ga, gb := newGate(), newGate()
		var a, b *relay
		var stoppedUnit string
		var mu sync.Mutex
		a = h.startRelay("eo-a", func(p *Publisher) forwarder.TransactionalPublisher {
			return &hookedPublisher{Publisher: p, afterCommit: func(unit string) {
				mu.Lock()
				if stoppedUnit == "" {
					stoppedUnit = unit
				}
				mu.Unlock()
				ga.stopHere(&a, unit)
			}}
		})
		h.ready()
		h.write(keys, 0, 20)
		ga.wait(t, "the end of its first commit")
		b = h.startRelay("eo-b", func(p *Publisher) forwarder.TransactionalPublisher {
			return &hookedPublisher{Publisher: p, afterOpen: func(unit string) {
				mu.Lock()
				mine := unit == stoppedUnit
				mu.Unlock()
				if mine {
					gb.stopHere(&b, unit)
				}
			}}
		})
		gb.wait(t, "the opening of the stopped relay's unit")
		c := h.startRelay("eo-c", nil)
		h.waitDrained(60 * time.Second)
		close(ga.release)
		close(gb.release)
		a.proxy.resume()
		b.proxy.resume()
		h.write(keys, 20, 10)
		h.waitDrained(60 * time.Second)
		a.stop()
		b.stop()
		c.stop()
		checkExactlyOnce(t, h.readAll(h.topic, true, len(keys)*30, 60*time.Second), keys, 30)
		if n := c.counter("outboxkit_forwarder_recovered_rows_total"); n == 0 {
			t.Errorf("the third relay recovered no row of the first relay's checkpoint")
		}
	})
}

// TestExactlyOnceCDCOpensEveryUnitBeforeStreaming: on the cdc source a unit that cannot be
// opened when a session starts ends the session, so the stream never publishes while a unit's
// last transaction may still be uncleaned (a unit opened later, by whichever batch locks it
// first, would filter only that batch by the cleanup's rows). Unit 3's first two openings fail;
// no transaction of any unit may be committed before unit 3 has been opened once, and every event
// still arrives once, in key order.
func TestExactlyOnceCDCOpensEveryUnitBeforeStreaming(t *testing.T) {
	h := newEOHarnessOn(t, forwarder.SourceCDC)
	keys := eoKeys(24)
	var mu sync.Mutex
	failures, opened, early := 0, false, 0
	r := h.startRelay("eo-open", func(p *Publisher) forwarder.TransactionalPublisher {
		return &hookedPublisher{Publisher: p,
			failOpen: func(unit string) error {
				mu.Lock()
				defer mu.Unlock()
				if strings.HasSuffix(unit, "/u03") && failures < 2 {
					failures++
					return errors.New("test: unit 3 cannot be opened yet")
				}
				return nil
			},
			afterOpen: func(unit string) {
				mu.Lock()
				defer mu.Unlock()
				opened = opened || strings.HasSuffix(unit, "/u03")
			},
			beforeCommit: func(string) {
				mu.Lock()
				defer mu.Unlock()
				if !opened {
					early++
				}
			},
		}
	})
	h.write(keys, 0, 5) // a backlog for the drain of the fresh slot
	h.ready()
	h.write(keys, 5, 5)
	h.waitDrained(60 * time.Second)
	r.stop()
	mu.Lock()
	defer mu.Unlock()
	if failures != 2 || !opened {
		t.Fatalf("unit 3 failed to open %d times and opened: %v; want 2 failures, then opened", failures, opened)
	}
	if early > 0 {
		t.Errorf("%d transactions were committed before unit 3 was opened", early)
	}
	checkExactlyOnce(t, h.readAll(h.topic, true, len(keys)*10, 60*time.Second), keys, 10)
}

// takeOverFrom runs a takeover of relay a, whose gate g stops it at what in its first
// transaction: once 20 events of each key are written and a is stopped there, relay eo-b starts
// and drains the table; then a resumes, 10 more events of each key are relayed, and both stop.
// It returns eo-b.
func (h *eoHarness) takeOverFrom(t *testing.T, a *relay, g *gate, what string, keys []string) *relay {
	t.Helper()
	h.ready()
	h.write(keys, 0, 20)
	g.wait(t, what)
	b := h.startRelay("eo-b", nil)
	h.waitDrained(60 * time.Second)
	close(g.release)
	a.proxy.resume()
	h.write(keys, 20, 10)
	h.waitDrained(60 * time.Second)
	a.stop()
	b.stop()
	return b
}

// waitDrained waits until no row is pending.
func (h *eoHarness) waitDrained(timeout time.Duration) {
	h.t.Helper()
	deadline := time.Now().Add(timeout)
	for h.pendingRows() > 0 {
		if time.Now().After(deadline) {
			h.t.Fatalf("%d rows still pending after %v", h.pendingRows(), timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// counter returns the value of one of the relay's counters.
func (r *relay) counter(name string) float64 {
	families, err := r.metrics.Gather()
	if err != nil {
		return -1
	}
	for _, f := range families {
		if f.GetName() == name {
			sum := 0.0
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum
		}
	}
	return 0
}

// TestExactlyOnceRelaysLeaseWholeUnits: three relays share the partitions a whole unit at a
// time (a unit's partitions have one owner, so one transactional producer), and the events
// still arrive exactly once.
func TestExactlyOnceRelaysLeaseWholeUnits(t *testing.T) {
	h := newEOHarness(t)
	keys := eoKeys(30)
	var relays []*relay
	for _, id := range []string{"eo-1", "eo-2", "eo-3"} {
		relays = append(relays, h.startRelay(id, nil))
	}
	h.write(keys, 0, 20)
	h.waitDrained(60 * time.Second)
	// Let the heartbeats settle the shares, then check the lease rows.
	deadline := time.Now().Add(2 * time.Minute) // a bound against a hang
	for {
		owners, split := h.unitOwners()
		if len(split) == 0 && len(owners) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 2 minutes: units owned in part by several relays: %v; relays owning units: %v", split, owners)
		}
		time.Sleep(200 * time.Millisecond)
	}
	h.write(keys, 20, 10)
	h.waitDrained(60 * time.Second)
	for _, r := range relays {
		r.stop()
	}
	checkExactlyOnce(t, h.readAll(h.topic, true, len(keys)*30, 60*time.Second), keys, 30)
}

// unitOwners reads the lease rows and returns the relays owning whole units and the units whose
// partitions have more than one owner (or some none).
func (h *eoHarness) unitOwners() (owners map[string]int, split []int) {
	rows, err := h.db.Query("SELECT partition_no, COALESCE(owner, '') FROM " + h.writer.Table().Leases() + " WHERE lease_group = 'default'")
	if err != nil {
		h.t.Fatal(err)
	}
	defer rows.Close()
	byUnit := map[int]map[string]bool{}
	for rows.Next() {
		var p int
		var owner string
		if err := rows.Scan(&p, &owner); err != nil {
			h.t.Fatal(err)
		}
		if byUnit[p%8] == nil {
			byUnit[p%8] = map[string]bool{}
		}
		byUnit[p%8][owner] = true
	}
	owners = map[string]int{}
	for u, set := range byUnit {
		if len(set) != 1 || set[""] {
			split = append(split, u)
			continue
		}
		for o := range set {
			owners[o]++
		}
	}
	return owners, split
}

// TestExactlyOncePoisonEvent: an event the client refuses (larger than MessageMaxBytes) is
// dead-lettered in the unit's next transaction, once; its key waits behind it (the dead row, as
// with at-least-once delivery); every other key is delivered exactly once.
func TestExactlyOncePoisonEvent(t *testing.T) { bothSources(t, exactlyOncePoisonEvent) }

func exactlyOncePoisonEvent(t *testing.T, source forwarder.Source) {
	h := newEOHarnessOn(t, source)
	h.maxBytes = 64 << 10
	keys := eoKeys(10)
	r := h.startRelay("eo-poison", nil)
	h.ready()
	h.write(keys, 0, 5)
	poison := outbox.Event{ID: uuid.Must(uuid.NewV7()), Topic: h.topic, AggregateType: "order", AggregateID: keys[0],
		EventType: "OrderChanged", Payload: bytes.Repeat([]byte("x"), 100<<10)}
	tx, err := h.db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.writer.WriteTx(context.Background(), tx, poison); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	h.write(keys, 5, 5)
	deadline := time.Now().Add(60 * time.Second)
	for h.pendingRows() > 5 { // the poison key's 5 later events stay behind the dead row
		if time.Now().After(deadline) {
			t.Fatalf("%d rows pending after 60 s, want 5", h.pendingRows())
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.stop()
	var dead int
	if err := h.db.QueryRow("SELECT count(*) FROM "+h.writer.Table().Events()+" WHERE status = 2 AND event_id = $1", poison.ID).Scan(&dead); err != nil {
		t.Fatal(err)
	}
	if dead != 1 {
		t.Errorf("the poison row is not dead (%d dead rows with its id)", dead)
	}
	dlq := h.readAll(h.topic+"-dlq", true, 1, 2*time.Minute)
	if len(dlq) != 1 || dlq[0].id != poison.ID.String() {
		t.Errorf("dead-letter topic: %d records %v, want the poison event once", len(dlq), dlq)
	}
	got := h.readAll(h.topic, true, 5+len(keys[1:])*10, 60*time.Second)
	var first []consumed
	for _, c := range got {
		if c.key == keys[0] && c.n >= 5 {
			t.Errorf("event %d of the poison key was delivered past its dead event", c.n)
		}
		if c.key != keys[0] {
			first = append(first, c)
		}
	}
	checkExactlyOnce(t, first, keys[1:], 10)
}

// TestCheckpointReadWaitsForOtherWritersTransactions: two units share a checkpoint partition.
// While another writer's transaction is open on it, begun before the unit's last commit, the
// partition's last stable offset stays below that commit; opening the unit must still return
// its last checkpoint, not the one before.
func TestCheckpointReadWaitsForOtherWritersTransactions(t *testing.T) {
	brokers := testsupport.KafkaBrokers(t)
	pub, err := NewPublisher(Config{Brokers: brokers}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	topic := testsupport.UniqueName("eo-shared-cp")
	unit := testsupport.UniqueName("eo-unit")
	if _, err := pub.OpenUnit(ctx, unit, topic, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := pub.CommitUnit(ctx, unit, nil, nil, []byte("first")); err != nil {
		t.Fatal(err)
	}
	other, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.TransactionalID(testsupport.UniqueName("eo-other")),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := other.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Key: []byte("other"), Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if _, err := pub.CommitUnit(ctx, unit, nil, nil, []byte("second")); err != nil {
		t.Fatal(err)
	}
	go func() {
		time.Sleep(2 * time.Second)
		_ = other.EndTransaction(ctx, kgo.TryCommit)
	}()
	last, err := pub.OpenUnit(ctx, unit, topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if string(last) != "second" {
		t.Fatalf("the last checkpoint read is %q, want %q", last, "second")
	}
}
