package kafka

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/outboxkit/outboxkit/internal/testsupport"
)

// TestUnitFencedByOpeningAfterCommits: a relay stopped inside a transaction of a unit, after
// none or some committed transactions of the unit, is fenced by another relay's opening of the
// unit (its transaction is aborted and its commit fails), which gets the last checkpoint
// committed. Real Kafka: the fencing is the broker's.
func TestUnitFencedByOpeningAfterCommits(t *testing.T) {
	brokers := testsupport.KafkaBrokers(t)
	for _, committed := range []int{0, 2} {
		t.Run(fmt.Sprintf("paused after %d commits", committed), func(t *testing.T) {
			unitFencedAfter(t, brokers, committed)
		})
	}
}

// unitFencedAfter commits `committed` transactions of a unit on relay a, then stops a inside its
// next transaction while relay b opens the unit, and checks what a, b and a read_committed
// consumer see.
func unitFencedAfter(t *testing.T, brokers []string, committed int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	a, b := newUnitPublisher(t, brokers), newUnitPublisher(t, brokers)
	unit := testsupport.UniqueName("eo-producers-unit")
	cpTopic := testsupport.UniqueName("eo-producers-cp")
	topic := testsupport.UniqueName("eo-producers")
	if _, err := a.OpenUnit(ctx, unit, cpTopic, 0); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i := range committed {
		value := fmt.Sprintf("a-%d", i)
		if _, err := a.CommitUnit(ctx, unit, []string{topic}, []*message.Message{message.NewMessage(value, []byte(value))}, []byte("cp-"+value)); err != nil {
			t.Fatalf("commit %d of relay a: %v", i, err)
		}
		want = append(want, value)
	}
	var opened []byte
	var openErr error
	// The opening must end a's transaction by fencing it, not by waiting for the broker to abort
	// it after the transaction timeout (it would then succeed too, late).
	a.units.beforeCommit = func(string) {
		openCtx, cancel := context.WithTimeout(ctx, transactionTimeout/2)
		defer cancel()
		opened, openErr = b.OpenUnit(openCtx, unit, cpTopic, 0)
	}
	zombie := fmt.Sprintf("a-%d", committed)
	_, err := a.CommitUnit(ctx, unit, []string{topic}, []*message.Message{message.NewMessage(zombie, []byte(zombie))}, []byte("cp-"+zombie))
	if openErr != nil {
		t.Fatalf("relay b could not open the unit while relay a's transaction was open: %v", openErr)
	}
	if err == nil {
		t.Fatalf("relay a committed its transaction after relay b opened the unit: not fenced")
	}
	wantCP := ""
	if committed > 0 {
		wantCP = fmt.Sprintf("cp-a-%d", committed-1)
	}
	if string(opened) != wantCP {
		t.Fatalf("relay b opened the unit on checkpoint %q, want %q", opened, wantCP)
	}
	if _, err := b.CommitUnit(ctx, unit, []string{topic}, []*message.Message{message.NewMessage("b-0", []byte("b-0"))}, []byte("cp-b-0")); err != nil {
		t.Fatalf("commit of relay b: %v", err)
	}
	want = append(want, "b-0")
	if last, err := newUnitPublisher(t, brokers).OpenUnit(ctx, unit, cpTopic, 0); err != nil || string(last) != "cp-b-0" {
		t.Fatalf("a third opening read checkpoint %q (%v), want %q", last, err, "cp-b-0")
	}
	if got := readCommittedValues(t, brokers, topic, len(want)); !slices.Equal(got, want) {
		t.Fatalf("read_committed consumer got %q, want %q", got, want)
	}
}

func newUnitPublisher(t *testing.T, brokers []string) *Publisher {
	t.Helper()
	p, err := NewPublisher(Config{Brokers: brokers}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// readCommittedValues reads topic read_committed until it has want records and then 2 s more,
// and returns their values. The test's messages have no key metadata, so they share one
// partition and come in the order they were produced.
func readCommittedValues(t *testing.T, brokers []string, topic string, want int) []string {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var got []string
	deadline := time.Now().Add(60 * time.Second)
	var quietUntil time.Time
	for time.Now().Before(deadline) && (quietUntil.IsZero() || time.Now().Before(quietUntil)) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		fetches := client.PollFetches(ctx)
		cancel()
		fetches.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
		if len(got) >= want && quietUntil.IsZero() {
			quietUntil = time.Now().Add(2 * time.Second)
		}
	}
	return got
}

// requestCounter counts the requests a client writes to its brokers, by request key.
type requestCounter struct {
	mu     sync.Mutex
	counts map[int16]int
}

func (c *requestCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err == nil {
		c.mu.Lock()
		c.counts[key]++
		c.mu.Unlock()
	}
}

func (c *requestCounter) count(key kmsg.Key) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[int16(key)]
}

// TestUnitAddsPartitionsExplicitly: a unit's producer adds the partitions of its transactions
// with AddPartitionsToTxn (transaction version 1), retried every concurrentTransactionsBackoff,
// and not with their first record (version 2, whose refusals wait for a metadata refresh): two
// consecutive transactions each send one. It fails if a franz-go upgrade stops honouring the
// version cap.
func TestUnitAddsPartitionsExplicitly(t *testing.T) {
	brokers := testsupport.KafkaBrokers(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := newUnitPublisher(t, brokers)
	counter := &requestCounter{counts: map[int16]int{}}
	p.opts = append(p.opts, kgo.WithHooks(counter))
	unit := testsupport.UniqueName("eo-adds-unit")
	cpTopic := testsupport.UniqueName("eo-adds-cp")
	topic := testsupport.UniqueName("eo-adds")
	if _, err := p.OpenUnit(ctx, unit, cpTopic, 0); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		value := fmt.Sprintf("v-%d", i)
		if _, err := p.CommitUnit(ctx, unit, []string{topic}, []*message.Message{message.NewMessage(value, []byte(value))}, []byte("cp-"+value)); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	if adds := counter.count(kmsg.AddPartitionsToTxn); adds < 2 {
		t.Fatalf("two transactions sent %d AddPartitionsToTxn requests, want at least 2 (one each)", adds)
	}
	if got := readCommittedValues(t, brokers, topic, 2); !slices.Equal(got, []string{"v-0", "v-1"}) {
		t.Fatalf("read_committed: %v, want [v-0 v-1]", got)
	}
}
