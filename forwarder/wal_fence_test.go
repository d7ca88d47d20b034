package forwarder_test

import (
	"errors"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/forwarder/internal/wal"
	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestWALParkedKeyDrainedWhileStreaming is the first hand-over race of docs/wal.md, "Parking":
// the drain publishes the last parked row of key p and reads that p has no row left; before it
// drops p from the parked set, p's next event (n=2) is streamed. With the key fence, the stream
// waits for the drain, then finds p unparked and publishes n=2 directly; without it, the stream
// parks n=2 (p is still in the set), the drain then drops p, and n=3 is published directly,
// ahead of n=2, which stays in the table with nothing draining it. The hooks hold the drain
// between its read and its update until the stream has parked (no fence) or is about to (fence).
// WAL_TEST_NO_KEY_FENCE=1 runs it without the fence.
func TestWALParkedKeyDrainedWhileStreaming(t *testing.T) {
	noFence := os.Getenv("WAL_TEST_NO_KEY_FENCE") == "1"
	h := newWALHarness(t, testsupport.KafkaBrokers(t))
	testsupport.CreateKafkaTopic(t, h.brokers, h.topic)
	pub := &faultyPublisher{Publisher: h.publisher(), topic: h.topic, poisoned: map[string]error{}}
	var armed, fired atomic.Bool
	parking, parked := make(chan struct{}, 16), make(chan struct{}, 16)
	var once sync.Once
	hooks := &wal.Hooks{NoKeyFence: noFence,
		Parking: func() {
			if armed.Load() {
				parking <- struct{}{}
			}
		},
		Parked: func() {
			if armed.Load() {
				parked <- struct{}{}
			}
		},
		Refreshing: func(keys int) {
			if keys != 0 || !armed.Load() {
				return
			}
			once.Do(func() {
				h.write(h.event("p", 2))
				// Only now may the test write n=3: per-key order is commit order, so n=3
				// committed before n=2 would rightly be delivered first.
				fired.Store(true)
				if noFence {
					<-parked // the stream parked n=2 behind the row the drain just removed
				} else {
					<-parking // the stream waits for the fence
				}
			})
		},
	}
	h.start(forwarder.WithWALHooks(h.walConfig(pub), hooks))
	h.waitForWALStream(forwarder.WALSlotName(h.writer.Table().Events(), "default"))

	h.write(h.event("p", 0))
	first := h.event("p", 1)
	pub.poison(first.ID.String(), errors.New("refused once"))
	h.write(first)
	waitFor(t, time.Minute, "p's n=1 parked", func() bool { return h.parkedRowsByKey()["p"] == 1 })
	armed.Store(true)
	pub.poison(first.ID.String(), nil) // the drain publishes it now, then reads p has no row
	waitFor(t, time.Minute, "the drain's read of no row of p and n=2 committed", fired.Load)
	h.write(h.event("p", 3))
	got := consumeDistinct(t, h.brokers, h.topic, 4, 30*time.Second)
	checkDelivery(t, got, []string{"p"}, 4)
	t.Logf("p's 4 events in order across the hand-over (key fence on: %v)", !noFence)
}
