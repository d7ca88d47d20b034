package forwarder_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/outboxkit/outboxkit/forwarder"
	"github.com/outboxkit/outboxkit/forwarder/internal/wal"
	"github.com/outboxkit/outboxkit/internal/testsupport"
	"github.com/outboxkit/outboxkit/outbox"
)

// noCheckpointSkip is the mutation of the exactly-once wal tests: WAL_TEST_NO_CHECKPOINT_SKIP=1
// has the stream publish again what its last checkpoint covers.
func noCheckpointSkip() bool { return os.Getenv("WAL_TEST_NO_CHECKPOINT_SKIP") == "1" }

// walEOConfig is h.walConfig with exactly-once delivery on a checkpoint topic of the test's own.
func (h *harness) walEOConfig(pub forwarder.TransactionalPublisher, checkpoints string, hooks *wal.Hooks) forwarder.Config {
	cfg := h.walConfig(pub)
	cfg.Delivery, cfg.CheckpointTopic = forwarder.ExactlyOnce, checkpoints
	if hooks == nil {
		hooks = &wal.Hooks{}
	}
	hooks.NoCheckpointSkip = noCheckpointSkip()
	return forwarder.WithWALHooks(cfg, hooks)
}

// walRelay is a relay run by a test, which the test stops when it likes.
type walRelay struct {
	cancel context.CancelFunc
	done   chan error
}

func startWALRelay(t *testing.T, cfg forwarder.Config) *walRelay {
	t.Helper()
	f, err := forwarder.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &walRelay{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- f.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop stops the relay and waits for its Run (once).
func (r *walRelay) stop(t *testing.T) {
	if r.done == nil {
		return
	}
	r.cancel()
	if err := <-r.done; err != nil {
		t.Errorf("forwarder.Run: %v", err)
	}
	r.done = nil
}

// crashPoint stops a relay's session once, at the n-th call of the hook it is set on: the hook
// blocks until the test has cancelled the relay, then the session ends without confirming the
// batch (as a relay killed there: nothing after the point happens).
type crashPoint struct {
	n       int
	calls   atomic.Int64
	hit     chan struct{}
	release chan struct{}
	once    sync.Once
}

func newCrashPoint(n int) *crashPoint {
	return &crashPoint{n: n, hit: make(chan struct{}), release: make(chan struct{})}
}

func (c *crashPoint) hook() {
	if c.calls.Add(1) != int64(c.n) {
		return
	}
	close(c.hit)
	<-c.release
}

// kill cancels r once the crash point is reached and lets the session go on to its end.
func (c *crashPoint) kill(t *testing.T, r *walRelay) {
	c.once.Do(func() {
		r.cancel()
		close(c.release)
		r.stop(t)
	})
}

// eoWriter writes events of keys, one transaction each, round-robin, and remembers them.
type eoWriter struct {
	h    *harness
	keys []string
	next map[string]int
	ids  map[string]bool
}

func newEOWriter(h *harness, keys []string) *eoWriter {
	return &eoWriter{h: h, keys: keys, next: map[string]int{}, ids: map[string]bool{}}
}

// writeOne writes the next event of the i-th key.
func (w *eoWriter) writeOne(i int) outbox.Event {
	k := w.keys[i%len(w.keys)]
	e := w.h.event(k, w.next[k])
	w.h.write(e)
	w.next[k]++
	w.ids[e.ID.String()] = true
	return e
}

// writeUntil writes events until done is closed (bounded: the test fails after a minute).
func (w *eoWriter) writeUntil(t *testing.T, done <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for i := 0; ; i++ {
		select {
		case <-done:
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the crash point was not reached after %d events", i)
		}
		w.writeOne(i)
	}
}

// write writes n events.
func (w *eoWriter) write(n int) {
	for i := range n {
		w.writeOne(i)
	}
}

// check asserts that got holds every written event exactly once, each key's in order.
func (w *eoWriter) check(t *testing.T, got []received) {
	t.Helper()
	next := map[string]int{}
	seen := map[string]bool{}
	dups := 0
	for _, r := range got {
		if !w.ids[r.eventID] {
			t.Fatalf("an event that was never written: %+v", r)
		}
		if seen[r.eventID] {
			dups++
			continue
		}
		seen[r.eventID] = true
		if r.n != next[r.key] {
			t.Fatalf("key %s: event n=%d arrived when n=%d was expected next (order violated or event lost)", r.key, r.n, next[r.key])
		}
		next[r.key]++
	}
	for _, k := range w.keys {
		if next[k] != w.next[k] {
			t.Fatalf("key %s: %d of %d events delivered", k, next[k], w.next[k])
		}
	}
	if dups > 0 {
		t.Fatalf("%d duplicates of %d events for a read_committed consumer", dups, len(w.ids))
	}
	t.Logf("%d events of %d keys, each once and in key order, for a read_committed consumer", len(w.ids), len(w.keys))
}

// waitCommitted waits until a read_committed consumer has seen want distinct events of topic.
func waitCommitted(t *testing.T, brokers []string, topic string, want int) {
	t.Helper()
	client, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ids := map[string]bool{}
	for len(ids) < want {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("a read_committed consumer saw %d of %d events", len(ids), want)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			for _, hd := range r.Headers {
				if hd.Key == outbox.MetadataEventID {
					ids[string(hd.Value)] = true
				}
			}
		})
	}
}

// readCommittedToEnd returns every record of topic a read_committed consumer sees, once the
// relays have stopped: it writes a sentinel record to each partition and reads each partition
// up to its sentinel, so that nothing committed before is missed.
func readCommittedToEnd(t *testing.T, brokers []string, topic string) []received {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	ends, err := kadm.NewClient(producer).ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		producer.Close()
		t.Fatal(err)
	}
	open := map[int32]bool{}
	for p := range int32(len(ends[topic])) {
		open[p] = true
		rec := &kgo.Record{Topic: topic, Partition: p, Key: []byte("sentinel"), Headers: []kgo.RecordHeader{{Key: "sentinel", Value: []byte("1")}}}
		if err := producer.ProduceSync(ctx, rec).FirstErr(); err != nil {
			producer.Close()
			t.Fatal(err)
		}
	}
	producer.Close()
	client, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var out []received
	for len(open) > 0 {
		fetches := client.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s back to its sentinels: %v (partitions left: %v)", topic, ctx.Err(), open)
		}
		fetches.EachRecord(func(r *kgo.Record) {
			rec := received{key: string(r.Key), headers: map[string]string{}, payload: r.Value}
			for _, hd := range r.Headers {
				rec.headers[hd.Key] = string(hd.Value)
			}
			if rec.headers["sentinel"] != "" {
				delete(open, r.Partition)
				return
			}
			rec.eventID = rec.headers[outbox.MetadataEventID]
			var b body
			if json.Unmarshal(r.Value, &b) == nil {
				rec.n = b.N
			}
			out = append(out, rec)
		})
	}
	return out
}

// newWALEOHarness is a wal harness on the real Kafka with the test's topic created and a
// checkpoint topic named.
func newWALEOHarness(t *testing.T) (*harness, string) {
	h := newWALHarness(t, testsupport.KafkaBrokers(t))
	testsupport.CreateKafkaTopic(t, h.brokers, h.topic)
	return h, testsupport.UniqueName("checkpoints")
}

// txPublisher is h's Kafka publisher as a TransactionalPublisher.
func (h *harness) txPublisher() forwarder.TransactionalPublisher {
	pub, ok := h.publisher().(forwarder.TransactionalPublisher)
	if !ok {
		h.t.Fatal(fmt.Errorf("the Kafka publisher has no transactions"))
	}
	return pub
}
