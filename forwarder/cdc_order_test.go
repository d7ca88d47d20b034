package forwarder_test

import (
	"context"
	"testing"
	"time"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestCDCFailedPartIsSettledBeforeTheKeysNextPart: a stream worker settles a part with a
// failure (its key parked) before it admits its next part, whose later event of the same key must
// then go to the retry path, after the failed one. The test holds the lease rows locked while the
// failed part settles, so that its settlement waits: a relay that admitted the next part before
// the settlement was in the table (one that settled behind its next part, say) publishes the
// later event first.
func TestCDCFailedPartIsSettledBeforeTheKeysNextPart(t *testing.T) {
	h := newCDCHarness(t, testsupport.KafkaBrokers(t))
	testsupport.CreateKafkaTopic(t, h.brokers, h.topic)
	pub := &failFirstOfKey{Publisher: h.publisher(), failed: map[string]bool{}}
	cfg := h.config(pub)
	cfg.Workers = 1 // every key on the one worker, whose parts follow each other
	h.start(cfg)
	h.waitForStream()

	ctx := context.Background()
	lock, err := h.db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Rollback() }()
	// Below the harness's 2 s LeaseTTL: the heartbeat waits too, and must not lose the leases.
	if _, err := lock.ExecContext(ctx, "SELECT 1 FROM "+h.writer.Table().Leases()+" FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	if err := h.tryWrite(h.event("k", 0)); err != nil { // its first publish fails
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // published and failed; its settlement waits for the lock
	if err := h.tryWrite(h.event("k", 1)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond)
	if err := lock.Commit(); err != nil {
		t.Fatal(err)
	}
	got := consumeDistinct(t, h.brokers, h.topic, 2, 60*time.Second)
	dups := checkDelivery(t, got, []string{"k"}, 2)
	if n := pub.failures(); n != 1 {
		t.Fatalf("the publisher failed %d first publishes, want 1", n)
	}
	t.Logf("the failed event and the later one in order, through the retry path; %d duplicates", dups)
}
