package kafka

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder"
)

func eoKeys(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "key-" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
	}
	return keys
}

// TestExactlyOnceRelay: one relay, many keys, every event once in key order for a
// read_committed consumer, and the outbox empty afterwards.
func TestExactlyOnceRelay(t *testing.T) {
	h := newEOHarness(t)
	keys := eoKeys(40)
	h.write(keys, 0, 25)
	r := h.startRelay("eo-1", nil)
	h.waitDrained(30 * time.Second)
	h.write(keys, 25, 25)
	h.waitDrained(30 * time.Second)
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
// read_committed consumer must see every event exactly once, in key order.
func TestExactlyOnceCrashPoints(t *testing.T) {
	t.Run("zombie paused inside an open transaction", func(t *testing.T) {
		h := newEOHarness(t)
		keys := eoKeys(12)
		h.write(keys, 0, 20)
		g := newGate()
		var a *relay
		a = h.startRelay("eo-a", func(p *Publisher) forwarder.TransactionalPublisher {
			p.units.beforeCommit = func(unit string) { g.stopHere(&a, unit) }
			return p
		})
		g.wait(t, "the commit of its first transaction")
		b := h.startRelay("eo-b", nil)
		h.waitDrained(60 * time.Second)
		close(g.release)
		a.proxy.resume()
		h.write(keys, 20, 10)
		h.waitDrained(60 * time.Second)
		a.stop()
		b.stop()
		got := h.readAll(h.topic, true, len(keys)*30, 60*time.Second)
		checkExactlyOnce(t, got, keys, 30)
		// The stopped relay's transaction had records on the broker, aborted by the takeover: a
		// read_uncommitted consumer sees them twice, a read_committed one does not.
		if all := h.readAll(h.topic, false, len(keys)*30, 30*time.Second); len(all) <= len(got) {
			t.Errorf("read_uncommitted saw %d records, read_committed %d: the stopped transaction had no records, the test proves nothing",
				len(all), len(got))
		}
		if c := a.counter("outboxkit_forwarder_transactions_aborted_total"); c == 0 {
			t.Errorf("the fenced relay counted no aborted transaction")
		}
	})

	t.Run("after the commit, before the cleanup", func(t *testing.T) {
		h := newEOHarness(t)
		keys := eoKeys(12)
		h.write(keys, 0, 20)
		g := newGate()
		var a *relay
		a = h.startRelay("eo-a", func(p *Publisher) forwarder.TransactionalPublisher {
			return &hookedPublisher{Publisher: p, afterCommit: func(unit string) { g.stopHere(&a, unit) }}
		})
		g.wait(t, "the end of its first commit")
		b := h.startRelay("eo-b", nil)
		h.waitDrained(60 * time.Second)
		close(g.release)
		a.proxy.resume()
		h.write(keys, 20, 10)
		h.waitDrained(60 * time.Second)
		a.stop()
		b.stop()
		checkExactlyOnce(t, h.readAll(h.topic, true, len(keys)*30, 60*time.Second), keys, 30)
		if n := b.counter("outboxkit_forwarder_recovered_rows_total"); n == 0 {
			t.Errorf("the relay that took over recovered no row from the stopped relay's checkpoint")
		}
	})

	t.Run("during the takeover's cleanup", func(t *testing.T) {
		h := newEOHarness(t)
		keys := eoKeys(12)
		h.write(keys, 0, 20)
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
