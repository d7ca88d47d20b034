package forwarder_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/outbox"
)

// stallingTxPublisher commits every transaction at once, except those of the unit named by
// stall, which wait until release is closed; stalled receives once per stalled commit.
type stallingTxPublisher struct {
	stall   string
	stalled chan string
	release chan struct{}
}

func (p *stallingTxPublisher) Publish(string, ...*message.Message) error { return nil }
func (p *stallingTxPublisher) Close() error                              { return nil }
func (p *stallingTxPublisher) OpenUnit(context.Context, string, string, int) ([]byte, error) {
	return nil, nil
}
func (p *stallingTxPublisher) CloseUnit(string) {}

func (p *stallingTxPublisher) CommitUnit(ctx context.Context, unit string, _ []string, msgs []*message.Message, _ []byte) ([]error, error) {
	if strings.HasSuffix(unit, p.stall) {
		p.stalled <- unit
		select {
		case <-p.release:
		case <-ctx.Done():
			return make([]error, len(msgs)), ctx.Err()
		}
	}
	return make([]error, len(msgs)), nil
}

// keyOfUnit returns a key whose partition belongs to unit u of units.
func keyOfUnit(t *testing.T, prefix string, u, units int) string {
	t.Helper()
	for i := range 1000 {
		key := fmt.Sprintf("%s-%d", prefix, i)
		if outbox.PartitionOf(outbox.KeyHash("", "order", key))%units == u {
			return key
		}
	}
	t.Fatalf("no key of unit %d found", u)
	return ""
}

// TestExactlyOnceUnitsOfAWorkerCommitIndependently: under exactly-once delivery each
// transactional unit of a polling worker claims, commits and acknowledges on its own, so a unit
// whose transaction hangs does not hold back the rows of another unit of the same worker (both
// claimed before the hang began); the hung unit's rows are acknowledged once it commits.
func TestExactlyOnceUnitsOfAWorkerCommitIndependently(t *testing.T) {
	h := newHarness(t, outbox.SQLite, nil)
	pub := &stallingTxPublisher{stall: "/u00", stalled: make(chan string, 16), release: make(chan struct{})}
	h.write(h.event(keyOfUnit(t, "slow", 0, 2), 0), h.event(keyOfUnit(t, "quick", 1, 2), 0))
	cfg := h.config(pub)
	cfg.Delivery, cfg.Workers, cfg.TransactionalUnits = forwarder.ExactlyOnce, 1, 2
	cfg.LeaseTTL = time.Minute // the stalled commit must not outlive its lease during the test
	h.start(cfg)
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(pub.release) }) }) // before the stop: LIFO

	select {
	case <-pub.stalled:
	case <-time.After(30 * time.Second):
		t.Fatal("unit 0 never committed")
	}
	if !waitForRows(t, h, 1, 30*time.Second) {
		t.Fatalf("unit 1's row is not acknowledged while unit 0's transaction hangs: %d rows left, want 1", countRows(t, h))
	}
	release.Do(func() { close(pub.release) })
	if !waitForRows(t, h, 0, 30*time.Second) {
		t.Fatalf("unit 0's row is not acknowledged after its commit: %d rows left", countRows(t, h))
	}
}

func countRows(t *testing.T, h *harness) int {
	t.Helper()
	var n int
	if err := h.db.QueryRow("SELECT COUNT(*) FROM " + h.writer.Table().Events()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// waitForRows waits until the outbox holds n rows, at most timeout (a bound against hanging).
func waitForRows(t *testing.T, h *harness, n int, timeout time.Duration) bool {
	t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if countRows(t, h) == n {
			return true
		}
	}
	return false
}
