package forwarder_test

import (
	"errors"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// TestWALParksAFailingKeyAndStreamsItAgain: the broker refuses one event of key p. That event
// and every later event of p go into the outbox table (and only p's: the other keys keep
// streaming); once the broker takes it again, the table's rows of p are published in order and
// removed, and p's next events stream directly again. Every key's events arrive in order.
func TestWALParksAFailingKeyAndStreamsItAgain(t *testing.T) {
	h := newWALHarness(t, testsupport.KafkaBrokers(t))
	testsupport.CreateKafkaTopic(t, h.brokers, h.topic)
	pub := &faultyPublisher{Publisher: h.publisher(), topic: h.topic, poisoned: map[string]error{}}
	h.start(h.walConfig(pub))
	h.waitForWALStream(forwarder.WALSlotName(h.writer.Table().Events(), "default"))

	keys := append([]string{"p"}, keysNamed("o", 5)...)
	writeRound := func(n int, poison bool) {
		var events []outbox.Event
		for _, k := range keys {
			e := h.event(k, n)
			if poison && k == "p" {
				pub.poison(e.ID.String(), errors.New("broker refuses this one"))
			}
			events = append(events, e)
		}
		h.write(events...)
	}
	writeRound(0, false)
	writeRound(1, true)
	for n := 2; n < 5; n++ {
		writeRound(n, false)
	}
	// Every other key's five events arrive while p is parked.
	others := consumeUntil(t, h.brokers, h.topic, func(got []received) bool {
		n := 0
		for _, r := range got {
			if r.key != "p" {
				n++
			}
		}
		return n >= 5*5
	}, 60*time.Second)
	// The other keys' records can reach the consumer before the transaction that parks p's
	// events commits: wait for the parked rows, then check they are p's four and nothing else.
	var parked map[string]int
	waitFor(t, time.Minute, "p's four events parked", func() bool {
		parked = h.parkedRowsByKey()
		return parked["p"] >= 4 || len(parked) > 1
	})
	if parked["p"] != 4 || len(parked) != 1 {
		t.Fatalf("rows in the outbox table by key: %v; want p's four events from the refused one on (got %d records)", parked, len(others))
	}
	pub.mu.Lock()
	clear(pub.poisoned)
	pub.mu.Unlock()
	waitFor(t, time.Minute, "p's parked rows published and removed", func() bool { return len(h.parkedRowsByKey()) == 0 })
	writeRound(5, false)
	got := consumeDistinct(t, h.brokers, h.topic, 6*len(keys), 60*time.Second)
	dups := checkDelivery(t, got, keys, 6)
	if parked := h.parkedRowsByKey(); len(parked) != 0 {
		t.Fatalf("rows left in the outbox table: %v", parked)
	}
	t.Logf("%d events, p parked with 4 rows and streamed again, %d duplicates", len(got)-dups, dups)
}

// parkedRowsByKey counts the pending and dead rows of the outbox table by aggregate id.
func (h *harness) parkedRowsByKey() map[string]int {
	h.t.Helper()
	rows, err := h.db.Query("SELECT aggregate_id, COUNT(*) FROM " + h.writer.Table().Events() + " WHERE status IN (0, 2) GROUP BY aggregate_id")
	if err != nil {
		h.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			h.t.Fatal(err)
		}
		out[k] = n
	}
	return out
}

var _ message.Publisher = (*faultyPublisher)(nil)
